"""ZooKeeper client sessions as Kafka's brokers hold them: the one place kazoo clients are made.

Owns: the session's timeouts (``zookeeper.session.timeout.ms`` and
``zookeeper.connection.timeout.ms``, stated in the config registry), kazoo's reconnection
policy, and creating a cluster's chroot before a chrooted session starts.

Why a reconnection policy of our own: kazoo's default backs off exponentially without bound
(0.1 s, 0.2 s, 0.4 s ... up to an hour), so after a ZooKeeper restart of ten seconds a client
may try again only after its session timeout has run out, and the server then expires a session
it had restored from its database (every broker re-registers, every ISR shrinks). Java's
ZooKeeper client, which Kafka uses, waits under 1 s between attempts; this one waits 0.1 s,
doubling up to 0.5 s, with kazoo's ±40% jitter: back within 0.7 s of the server. A suspended
connection (kazoo's SUSPENDED) is not a lost session: only LOST (expiry) is, for every user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.retry import KazooRetry

from odradek.cluster import paths
from odradek.config import BROKER_CONFIGS

SESSION_TIMEOUT = "zookeeper.session.timeout.ms"
CONNECTION_TIMEOUT = "zookeeper.connection.timeout.ms"
RECONNECT_MAX_DELAY_S = 0.5


@dataclass(frozen=True, slots=True)
class ZkTimeouts:
    """``session_ms``: how long ZooKeeper keeps an unreachable client's session (and its
    ephemeral znodes); ``connection_ms``: how long start-up waits to connect (Kafka: the
    session timeout when unset)."""
    session_ms: int = BROKER_CONFIGS[SESSION_TIMEOUT].typed_default
    connection_ms: int | None = BROKER_CONFIGS[CONNECTION_TIMEOUT].typed_default

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> "ZkTimeouts":
        """From ``{key: string}``, each checked by the registry's validator; ``ValueError``
        names a key that is not one of the two, or a bad value."""
        values = {}
        for name, value in settings.items():
            if name not in (SESSION_TIMEOUT, CONNECTION_TIMEOUT):
                raise ValueError(f"unknown setting {name} (expected {SESSION_TIMEOUT} or {CONNECTION_TIMEOUT})")
            try:
                values[name] = BROKER_CONFIGS[name].parse(value)
            except ValueError as e:
                raise ValueError(f"Invalid value {value} for configuration {name}: {e}") from None
        defaults = cls()
        return cls(values.get(SESSION_TIMEOUT, defaults.session_ms),
                   values.get(CONNECTION_TIMEOUT, defaults.connection_ms))

    @property
    def session_s(self) -> float:
        return self.session_ms / 1000

    @property
    def connection_s(self) -> float:
        return (self.connection_ms if self.connection_ms is not None else self.session_ms) / 1000


def client(connect: str, timeouts: ZkTimeouts, chroot: str = "") -> KazooClient:
    """A kazoo client (not started) asking for ``timeouts.session_ms`` and reconnecting fast."""
    return KazooClient(hosts=connect + chroot, timeout=timeouts.session_s,
                       connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2,
                                                   max_delay=RECONNECT_MAX_DELAY_S))


def ensure_chroot(connect: str, cluster: str, timeouts: ZkTimeouts) -> None:
    """Create ``/odradek/<cluster>`` with a short-lived unchrooted session."""
    zk = client(connect, timeouts)
    zk.start(timeout=timeouts.connection_s)
    try:
        zk.ensure_path(paths.chroot(cluster))
    except NoNodeError:  # a concurrent creator removed a parent meanwhile: theirs to finish
        pass
    finally:
        zk.stop()
        zk.close()
