"""ZooKeeper client sessions as Kafka's brokers hold them: the one place kazoo clients are made.

Owns: the session's timeouts (``zookeeper.session.timeout.ms`` and
``zookeeper.connection.timeout.ms``, stated in the config registry), kazoo's reconnection
policy, creating a cluster's chroot before a chrooted session starts, and the session's
security (``ZkSecurity``): ZooKeeper digest authentication and, with ``zookeeper.set.acl``,
Kafka's znode ACLs on every znode the session creates (docs/security.md, "ZooKeeper"); with
``zookeeper.ssl.client.enable``, TLS with the cluster CA (``odradek.cluster.zk_tls``) and
ZooKeeper's root locked to the cluster (``ensure_chroot``; docs/security.md, "ZooKeeper TLS").

Why a reconnection policy of our own: kazoo's default backs off exponentially without bound
(0.1 s, 0.2 s, 0.4 s ... up to an hour), so after a ZooKeeper restart of ten seconds a client
may try again only after its session timeout has run out, and the server then expires a session
it had restored from its database (every broker re-registers, every ISR shrinks). Java's
ZooKeeper client, which Kafka uses, waits under 1 s between attempts; this one waits 0.1 s,
doubling up to 0.5 s, with kazoo's ±40% jitter: back within 0.7 s of the server. A suspended
connection (kazoo's SUSPENDED) is not a lost session: only LOST (expiry) is, for every user.

Why each connection attempt is bounded (``attempt_s``, a third of the session timeout,
``zk_handler``): kazoo gives one TCP connect (and TLS handshake), and then the wait for the
server's answer to the Connect request, the whole session timeout. An attempt made while
ZooKeeper's pod is gone (its address drops the SYN), or one a starting server accepted without
answering (a controller waited 18 s in a test of a ZooKeeper restart), hangs that long, so the
client came back after the restarted server had expired the session it restored (the e2e
certificate renewal: ZooKeeper's own roll took two brokers out of every ISR at once). A third
leaves two more attempts in time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import NoAuthError, NodeExistsError, NoNodeError
from kazoo.retry import KazooRetry
from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from odradek.cluster import paths
from odradek.cluster.zk_handler import BoundedHandler
from odradek.cluster.zk_tls import ZkTls
from odradek.config import BROKER_CONFIGS
from odradek.config.cluster_security import ZK_DIGEST_FILE, ZK_SET_ACL

SESSION_TIMEOUT = "zookeeper.session.timeout.ms"
CONNECTION_TIMEOUT = "zookeeper.connection.timeout.ms"
RECONNECT_MAX_DELAY_S = 0.5
log = logging.getLogger(__name__)


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


# Kafka's ZkData: znodes under these prefixes (a plain startsWith, as Kafka's sensitivePath)
# hold credentials and are readable by their creator only; /consumers (the old consumers'
# path) stays open to all.
SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_token/tokens")
OPEN_PATH = "/consumers"
# On the cluster's own ensemble: ZooKeeper's root (world: all, out of the box) and its quota
# tree, which anyone could otherwise fill or use to set quotas on the cluster's chroot.
LOCKED_OUTSIDE_CHROOT = ("/", "/zookeeper", "/zookeeper/quota")


@dataclass(frozen=True, slots=True)
class ZkSecurity:
    """``digest``: ``user:password`` the session authenticates with (ZooKeeper's digest
    scheme), None: none; ``set_acl``: znodes are created with Kafka's ACLs (``acl``);
    ``tls``: the session is TLS (``zookeeper.ssl.*``), None: plaintext."""
    digest: str | None = None
    set_acl: bool = False
    tls: ZkTls | None = None

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> "ZkSecurity":
        """From ``{key: string}`` (other keys ignored). ``ValueError`` for an unreadable or
        malformed credentials file, or ``zookeeper.set.acl`` without credentials (Kafka refuses
        to start then too: ACLs naming no one would lock the cluster out of its own znodes), and
        ``ZkTls.from_settings``'s errors."""
        set_acl = BROKER_CONFIGS[ZK_SET_ACL].parse(settings.get(ZK_SET_ACL, BROKER_CONFIGS[ZK_SET_ACL].default))
        digest = None
        if credentials := settings.get(ZK_DIGEST_FILE, ""):
            try:
                digest = Path(credentials).read_text().strip()
            except OSError as e:
                raise ValueError(f"{ZK_DIGEST_FILE}: cannot read {credentials}: {e.strerror}") from None
            user, colon, _ = digest.partition(":")
            if not user or not colon or "\n" in digest:
                raise ValueError(f"{ZK_DIGEST_FILE}: {credentials} must hold one line user:password")
        if set_acl and digest is None:
            raise ValueError(f"{ZK_SET_ACL} is true but {ZK_DIGEST_FILE} is not set")
        return cls(digest, set_acl, ZkTls.from_settings(settings))

    @property
    def owns_ensemble(self) -> bool:
        """True when the ensemble is the cluster's own: reached over TLS with the cluster CA's
        certificates (only the cluster's processes can connect at all, as under Strimzi) and
        with ACLs on. Then ``ensure_chroot`` locks ZooKeeper's root and ``/odradek``, which a
        shared ensemble must leave open to its other users."""
        return self.set_acl and self.tls is not None and bool(self.tls.keystore)

    def acl(self, path: str) -> list[ACL]:
        """The ACL of a znode at ``path`` (relative to the cluster's chroot), as Kafka's
        ZkData.defaultAcls: its creator may do everything, the world may read, except under
        the sensitive paths (the creator only) and /consumers (open)."""
        if not self.set_acl or path == OPEN_PATH:
            return list(OPEN_ACL_UNSAFE)
        if any(path.startswith(root) for root in SENSITIVE_ROOT_PATHS):
            return list(CREATOR_ALL_ACL)
        return [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE]


class _AclClient(KazooClient):
    """A kazoo client whose every created znode gets ``ZkSecurity.acl`` of its own path
    (kazoo's ``default_acl`` is one ACL for all paths). Every creation (``create``,
    ``ensure_path``, ``makepath``'s parents) reaches ``_create_async_inner`` with its final
    path; transactions make their own requests, hence ``_AclTransaction``."""

    def __init__(self, security: ZkSecurity, **kwargs) -> None:
        super().__init__(**kwargs)
        self.security = security

    def _create_async_inner(self, path, value, acl, flags, trailing=False, include_data=False):
        return super()._create_async_inner(path, value, self.security.acl(path), flags, trailing, include_data)

    def transaction(self) -> TransactionRequest:
        return _AclTransaction(self)


class _AclTransaction(TransactionRequest):
    def create(self, path, value=b"", acl=None, ephemeral=False, sequence=False):
        super().create(path, value, self.client.security.acl(path), ephemeral, sequence)


def client(connect: str, timeouts: ZkTimeouts, chroot: str = "", security: ZkSecurity = ZkSecurity()) -> KazooClient:
    """A kazoo client (not started) asking for ``timeouts.session_ms``, reconnecting fast and,
    with ``security``, authenticating and creating znodes with Kafka's ACLs."""
    attempt_s = timeouts.session_s / 3
    options = dict(hosts=connect + chroot, timeout=timeouts.session_s, handler=BoundedHandler(attempt_s),
                   connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=RECONNECT_MAX_DELAY_S),
                   auth_data=[("digest", security.digest)] if security.digest else None)
    if security.tls is not None:
        options.update(handler=security.tls.handler(attempt_s), use_ssl=True)
    return _AclClient(security, **options) if security.set_acl else KazooClient(**options)


def ensure_chroot(connect: str, cluster: str, timeouts: ZkTimeouts, security: ZkSecurity = ZkSecurity()) -> None:
    """Create ``/odradek/<cluster>`` with a short-lived unchrooted session. On a shared
    ensemble ``/odradek``, shared by every cluster (which may hold other credentials), stays
    open (it holds no data; nobody can remove it while a cluster lives under it); on the
    cluster's own (``ZkSecurity.owns_ensemble``) ZooKeeper's root, its quota tree and
    ``/odradek`` are locked to the cluster's principals (others may read, not create). The
    chroot gets the ACL of the cluster's root."""
    zk = client(connect, timeouts, security=ZkSecurity(security.digest, tls=security.tls))
    zk.start(timeout=timeouts.connection_s)
    parent = paths.chroot(cluster).rsplit("/", 1)[0]
    locked = security.owns_ensemble
    try:
        if locked:
            for path in LOCKED_OUTSIDE_CHROOT:
                _lock(zk, path, security.acl("/"))
        for path, acl in ((parent, security.acl("/") if locked else OPEN_ACL_UNSAFE),
                          (paths.chroot(cluster), security.acl("/"))):
            try:
                zk.create(path, acl=acl)
            except NodeExistsError:
                if locked and path == parent:
                    _lock(zk, path, acl)
    except NoNodeError:  # a concurrent creator removed a parent meanwhile: theirs to finish
        pass
    finally:
        zk.stop()
        zk.close()


def _lock(zk: KazooClient, path: str, acl: list[ACL]) -> None:
    """Give ``path`` the cluster's ACL (again at every start: the cluster's principals hold
    ADMIN on it after the first time). Refused: some other principal locked it first, which only
    a holder of a cluster-CA certificate could have done; the chroot's own ACL still keeps it out."""
    try:
        zk.set_acls(path, acl)
    except NoAuthError:
        log.warning("ZooKeeper's %s is locked by other principals than this cluster's: left as it is", path)
