"""TLS between Odradek's processes and ZooKeeper (Kafka's ``zookeeper.ssl.*`` client configs).

Owns: the client side's settings (``ZkTls``, from ``zookeeper.ssl.client.enable``,
``zookeeper.ssl.keystore.location``, ``zookeeper.ssl.truststore.location`` and
``zookeeper.ssl.endpoint.identification.algorithm`` of ``odradek.config.cluster_security``),
its TLS context, and the kazoo connection handler that uses that context.

Why a handler of our own: kazoo's TLS (``use_ssl``, ``ca``, ``certfile``) builds its context on
every connection and always adds the system's default CAs to the one given, so a certificate
from any public CA for the ZooKeeper host name would pass. The cluster's ZooKeeper is checked
against the cluster CA alone (as Kafka's truststore replaces the JVM's), with TLS 1.2 or later;
the client presents the process's certificate (ZooKeeper's ``ssl.clientAuth=need``).

Files are PEM, as everywhere in Odradek (``*.type=PEM``): the keystore holds the certificate
chain and the unencrypted private key, the truststore the CA. Unlike Kafka, which falls back
to the JVM's default truststore, a truststore is required: a ZooKeeper ensemble is private.
"""

from __future__ import annotations

import functools
import socket
import ssl
from dataclasses import dataclass
from typing import Mapping

from odradek.cluster.control_plane_tls import pem_client_context
from odradek.cluster.zk_handler import BoundedHandler
from odradek.config import BROKER_CONFIGS
from odradek.config.cluster_security import (ZK_SSL_CLIENT_ENABLE, ZK_SSL_ENDPOINT_IDENTIFICATION, ZK_SSL_KEYSTORE,
                                             ZK_SSL_KEYSTORE_TYPE, ZK_SSL_TRUSTSTORE, ZK_SSL_TRUSTSTORE_TYPE)


@dataclass(frozen=True, slots=True)
class ZkTls:
    """``truststore``: the CA ZooKeeper's certificate must chain to; ``keystore``: this
    process's certificate chain and key ("" presents none); ``check_hostname``: the
    certificate must name the host of the connect string."""
    truststore: str
    keystore: str = ""
    check_hostname: bool = True

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> "ZkTls | None":
        """From ``{key: string}`` (other keys ignored); None unless
        ``zookeeper.ssl.client.enable`` is true. ``ValueError`` for a bad value, a missing
        truststore, or files that do not load."""
        values = {}
        for key in (ZK_SSL_CLIENT_ENABLE, ZK_SSL_KEYSTORE_TYPE, ZK_SSL_KEYSTORE, ZK_SSL_TRUSTSTORE_TYPE,
                    ZK_SSL_TRUSTSTORE, ZK_SSL_ENDPOINT_IDENTIFICATION):
            raw = settings.get(key, BROKER_CONFIGS[key].default)
            try:
                values[key] = BROKER_CONFIGS[key].parse(raw)
            except ValueError as e:
                raise ValueError(f"Invalid value {raw} for configuration {key}: {e}") from None
        if not values[ZK_SSL_CLIENT_ENABLE]:
            return None
        if not values[ZK_SSL_TRUSTSTORE]:
            raise ValueError(f"{ZK_SSL_CLIENT_ENABLE} is true but {ZK_SSL_TRUSTSTORE} is not set")
        tls = cls(values[ZK_SSL_TRUSTSTORE], values[ZK_SSL_KEYSTORE],
                  values[ZK_SSL_ENDPOINT_IDENTIFICATION].lower() == "https")
        try:  # fail at start-up, not at the first connection
            context(tls)
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"ZooKeeper TLS files do not load ({tls.keystore or '-'}, {tls.truststore}): {e}") from None
        return tls

    def handler(self, attempt_s: float) -> BoundedHandler:
        """A kazoo handler whose connections are TLS with this context (``client(handler=...,
        use_ssl=True)``: kazoo's own options are not used), each attempt (connect and handshake)
        given at most ``attempt_s`` (``zk_session``)."""
        return _TlsHandler(context(self), attempt_s)


@functools.lru_cache(maxsize=8)
def context(tls: ZkTls) -> ssl.SSLContext:
    """The client context for ``tls`` (one per settings: a context is reusable)."""
    return pem_client_context(tls.truststore, tls.keystore, tls.check_hostname)


class _TlsHandler(BoundedHandler):
    """kazoo's threading handler, its sessions' sockets (and four-letter commands) wrapped in
    ``ssl_context``. The handshake runs within the attempt's timeout."""

    def __init__(self, ssl_context: ssl.SSLContext, attempt_s: float) -> None:
        super().__init__(attempt_s)
        self._ssl_context = ssl_context

    def create_connection(self, address, hostname=None, timeout=None, **_ignored):
        sock = socket.create_connection(address, self.bound(timeout))
        try:
            conn = self._ssl_context.wrap_socket(sock, server_hostname=hostname or address[0])
        except BaseException:
            sock.close()
            raise
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn
