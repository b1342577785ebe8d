"""The broker's ZooKeeper session: its registration, the active controller, log directory events.

The broker registers itself with the ephemeral ``/brokers/ids/<id>`` znode (created again
after a session expiry; its czxid is the broker epoch the controller fences requests with),
and watches ``/controller`` to know where the active controller's internal API is. When its
log directory goes offline it writes a sequential ``/log_dir_event_notification/log_dir_event_``
znode (Kafka's log directory failure event) for the controller.

The session (``odradek.cluster.zk_session``: ``zookeeper.session.timeout.ms``, fast
reconnection) outlives a ZooKeeper restart shorter than its timeout: a suspended connection
changes nothing here; only a lost (expired) session makes the broker register again, under a
new broker epoch.

Stopping is bounded (``STOP_TIMEOUT_S``), as Kafka's session close is: a request to an
unreachable ZooKeeper waits for a reconnection that may never come (a SIGTERMed broker used to
hang there until SIGKILL). Without ZooKeeper the deregistration is skipped: the registration
znode goes when the session expires, as after a crash.
"""

from __future__ import annotations

import logging
import time

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError

from odradek.broker.zk.znodes import Znodes
from odradek.cluster import paths, zk_session
from odradek.cluster.model import BrokerInfo
from odradek.cluster.zk_data import BROKER, CONTROLLER, LOG_DIR_EVENT, LogDirEvent
from odradek.cluster.zk_session import ZkSecurity, ZkTimeouts

log = logging.getLogger(__name__)
STOP_TIMEOUT_S = 5.0  # how long deregistering (and the log directory event) may wait on ZooKeeper


class BrokerSession:
    """Built with the broker (its ``znodes`` given to the stores then), started once the broker
    knows its advertised endpoints (``start(info)``); until then ``znodes`` raise ``NoZooKeeper``."""

    def __init__(self, connect: str, cluster: str, timeouts: ZkTimeouts = ZkTimeouts(),
                 security: ZkSecurity = ZkSecurity()) -> None:
        self._zk = zk_session.client(connect, timeouts, paths.chroot(cluster), security)
        self._security = security
        self._timeouts = timeouts
        self._connect = connect
        self._cluster = cluster
        self._info: BrokerInfo | None = None
        self._controller_url: str | None = None
        self._session_lost = False
        self.broker_epoch = -1  # czxid of our registration znode (-1 until registered)
        self.znodes = Znodes(self._started_client)

    def _started_client(self) -> KazooClient | None:
        return self._zk if self._info is not None else None

    @property
    def state(self) -> str | None:
        """kazoo's connection state (CONNECTED, SUSPENDED, LOST); None before ``start``."""
        return self._zk.state if self._info is not None else None

    @property
    def controller_url(self) -> str | None:
        return self._controller_url

    def start(self, info: BrokerInfo) -> None:
        """Connect (within ``zookeeper.connection.timeout.ms``) and register as ``info``."""
        zk_session.ensure_chroot(self._connect, self._cluster, self._timeouts, self._security)
        self._zk.add_listener(self._on_state)
        self._zk.start(timeout=self._timeouts.connection_s)
        self._info = info
        self._register()
        self._zk.DataWatch(CONTROLLER.path, self._on_controller)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Deregister (within ``timeout``, only while connected) and close the session."""
        if self._info is None:
            self._zk.close()
            return
        if self._zk.connected:
            try:
                self._zk.delete_async(BROKER.path(self._info.id)).get(timeout=timeout)
            except Exception:  # noqa: BLE001 - the session may be gone already: the znode then is too
                pass
        else:
            log.warning("ZooKeeper unreachable: the registration of broker %d goes when its session expires",
                        self._info.id)
        self._zk.remove_listener(self._on_state)  # the closing session's LOST is no reason to register again
        self._zk.stop()  # kazoo's reconnection loop sees the stop within its 0.5 s backoff
        self._zk.close()

    def report_log_dir_failure(self) -> None:
        """Tell the controller our log directory is offline (it moves our leaderships away)."""
        body = LOG_DIR_EVENT.encode(LogDirEvent(self._info.id, self.broker_epoch))
        try:
            self._zk.create_async(LOG_DIR_EVENT.prefix, body, sequence=True, makepath=True).get(timeout=STOP_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 - the deregistration that follows moves leadership too
            log.warning("could not write the log directory event: %s", e)

    def _register(self) -> None:
        """Create our ephemeral znode. After a crash, the previous process's znode lives until
        its session expires: wait for that (a bounded time) rather than fail, as a restarted
        pod would otherwise crash-loop; a live broker with the same id keeps it forever."""
        body = BROKER.encode(self._info)
        path = BROKER.path(self._info.id)
        self._zk.ensure_path(paths.BROKER_IDS)
        deadline = time.monotonic() + 3 * self._timeouts.session_s
        while True:
            try:
                self._zk.create(path, body, ephemeral=True)
                break
            except NodeExistsError:
                try:
                    _, stat = self._zk.get(path)
                except NoNodeError:
                    continue
                if stat.ephemeralOwner == self._zk.client_id[0]:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"broker id {self._info.id} is registered in ZooKeeper by another "
                                       f"live session (is a broker with this id running?)") from None
                log.info("waiting for the previous session of broker %d to expire", self._info.id)
                time.sleep(0.5)
        try:
            _, stat = self._zk.get(path)
            self.broker_epoch = stat.czxid
        except NoNodeError:
            self.broker_epoch = -1
        log.info("registered as broker %d (broker epoch %d)", self._info.id, self.broker_epoch)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._session_lost = True
            log.warning("ZooKeeper session lost; registering again when it comes back")
        elif state == KazooState.SUSPENDED:  # not a loss: the session outlives this by its timeout
            log.warning("ZooKeeper connection lost; reconnecting (the session lasts %.0f s without it)",
                        self._timeouts.session_s)
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self._zk.handler.spawn(self._register_quietly)

    def _register_quietly(self) -> None:
        try:
            self._register()
        except Exception:
            log.exception("re-registration failed")

    def _on_controller(self, data: bytes | None, stat) -> None:
        url = None
        if data:
            try:
                url = CONTROLLER.decode(data).url
            except (ValueError, KeyError, TypeError):
                log.warning("unreadable /controller znode: %r", data)
        if url != self._controller_url:
            log.info("active controller: %s", url)
        self._controller_url = url

