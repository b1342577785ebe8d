"""The broker's ZooKeeper session (the only broker module importing kazoo).

The broker registers itself with the ephemeral ``/brokers/ids/<id>`` znode (created again
after a session expiry), and watches ``/controller`` to know where the active controller's
internal API is.
"""

from __future__ import annotations

import json
import logging
import threading

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError

from odradek.cluster import paths
from odradek.cluster.model import BrokerInfo

log = logging.getLogger(__name__)


class BrokerRegistration:
    def __init__(self, connect: str, cluster: str, info: BrokerInfo) -> None:
        self._zk = KazooClient(hosts=connect + paths.chroot(cluster), timeout=10.0)
        self._connect = connect
        self._cluster = cluster
        self._info = info
        self._controller_url: str | None = None
        self._lock = threading.Lock()
        self._registered = threading.Event()

    @property
    def controller_url(self) -> str | None:
        return self._controller_url

    def start(self, timeout: float = 30.0) -> None:
        _ensure_chroot(self._connect, self._cluster, timeout)
        self._zk.add_listener(self._on_state)
        self._zk.start(timeout=timeout)
        self._register()
        self._zk.DataWatch(paths.CONTROLLER, self._on_controller)

    def stop(self) -> None:
        try:
            self._zk.delete(paths.broker(self._info.id))
        except Exception:  # session may already be gone: the znode then is too
            pass
        self._zk.stop()
        self._zk.close()

    def _register(self) -> None:
        body = json.dumps(self._info.to_json()).encode()
        path = paths.broker(self._info.id)
        self._zk.ensure_path(paths.BROKER_IDS)
        try:
            self._zk.create(path, body, ephemeral=True)
        except NodeExistsError:
            # Our own znode from a session that has not expired yet (fast restart), or another
            # broker with the same id: refuse to run twice under one id, as Kafka does.
            _, stat = self._zk.get(path)
            if stat.ephemeralOwner != self._zk.client_id[0]:
                raise RuntimeError(f"broker id {self._info.id} is already registered in ZooKeeper")
        self._registered.set()
        log.info("registered as broker %d", self._info.id)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._registered.clear()
            log.warning("ZooKeeper session lost; registering again when it comes back")
        elif state == KazooState.CONNECTED and not self._registered.is_set():
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
                url = json.loads(data)["url"]
            except (ValueError, KeyError):
                log.warning("unreadable /controller znode: %r", data)
        if url != self._controller_url:
            log.info("active controller: %s", url)
        self._controller_url = url


def _ensure_chroot(connect: str, cluster: str, timeout: float) -> None:
    zk = KazooClient(hosts=connect, timeout=10.0)
    zk.start(timeout=timeout)
    try:
        zk.ensure_path(paths.chroot(cluster))
    except NoNodeError:
        pass
    finally:
        zk.stop()
        zk.close()
