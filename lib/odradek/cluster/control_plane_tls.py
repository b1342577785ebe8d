"""Mutual TLS on the control plane (the internal HTTP API of the controller and of each broker).

Owns: the control plane's TLS settings (``ControlPlaneTls``, from the ``control.plane.ssl.*``
keys of ``odradek.config.cluster_security``), the TLS contexts of both sides (TLS 1.2 and
later; the server requires a client certificate chaining to the cluster CA, every client
presents its own); ``MutualTlsSite``, the aiohttp site that runs each connection's handshake
before the HTTP server sees it, is in ``control_plane_tls_site`` (only servers import aiohttp).

Why a site of our own: with aiohttp's ``TCPSite(ssl_context=...)`` a failed handshake (no
client certificate, one from another CA, plain HTTP on the TLS port) is dropped by asyncio
with a DEBUG line at most; the control plane must log every refused peer at WARNING with its
address. So the site accepts sockets itself and hands each to aiohttp's protocol through
``loop.connect_accepted_socket``, which completes the handshake or raises (as the Kafka
listener does). (``loop.start_tls`` on an accepted transport was tried first: uvloop may
deliver the ClientHello before the hand-over, and the handshake then hangs.)

Without ``control.plane.ssl.keystore.location`` there is no ``ControlPlaneTls`` (None) and
the control plane is plaintext HTTP, as before.
"""

from __future__ import annotations

import functools
import logging
import re
import ssl
from dataclasses import dataclass
from typing import Callable, Mapping

from odradek.config import BROKER_CONFIGS
from odradek.config.cluster_security import (CONTROL_PLANE_ENDPOINT_IDENTIFICATION, CONTROL_PLANE_KEYSTORE,
                                             CONTROL_PLANE_PEER_CN, CONTROL_PLANE_TRUSTSTORE)
from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger("odradek.control_plane")


@dataclass(frozen=True, slots=True)
class ControlPlaneTls:
    """``keystore``: PEM with this process's certificate chain and key; ``truststore``: the
    cluster CA every peer's certificate must chain to; ``check_hostname``: a client checks the
    server's certificate against the URL's host; ``peer_common_name``: a regular expression a
    client certificate's CN must match ("": any certificate from the CA)."""
    keystore: str
    truststore: str
    check_hostname: bool = True
    peer_common_name: str = ""

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> "ControlPlaneTls | None":
        """From ``{key: string}`` (other keys ignored); None without a keystore. ``ValueError``
        when the keystore comes without a truststore, or a file does not load."""
        def value(key: str) -> str:
            return str(settings.get(key, BROKER_CONFIGS[key].default))
        keystore, truststore = value(CONTROL_PLANE_KEYSTORE), value(CONTROL_PLANE_TRUSTSTORE)
        if not keystore:
            return None
        if not truststore:
            raise ValueError(f"{CONTROL_PLANE_KEYSTORE} needs {CONTROL_PLANE_TRUSTSTORE} (the cluster CA)")
        tls = cls(keystore, truststore, BROKER_CONFIGS[CONTROL_PLANE_ENDPOINT_IDENTIFICATION].parse(
            value(CONTROL_PLANE_ENDPOINT_IDENTIFICATION)) == "https",
            str(BROKER_CONFIGS[CONTROL_PLANE_PEER_CN].parse(value(CONTROL_PLANE_PEER_CN))))
        try:  # fail at start-up, not at the first push
            tls.server_context()
            client_context(tls)
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"control-plane TLS files do not load ({keystore}, {truststore}): {e}") from None
        return tls

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.keystore)
        context.load_verify_locations(self.truststore)
        context.verify_mode = ssl.CERT_REQUIRED
        return context


@functools.lru_cache(maxsize=8)
def client_context(tls: ControlPlaneTls) -> ssl.SSLContext:
    """The context of a control-plane client (one per settings: contexts are reusable)."""
    return pem_client_context(tls.truststore, tls.keystore, tls.check_hostname)


def pem_client_context(truststore: str, keystore: str, check_hostname: bool) -> ssl.SSLContext:
    """A TLS 1.2+ client context trusting ``truststore``'s CA alone and presenting
    ``keystore``'s certificate ("": none); also ZooKeeper's (``odradek.cluster.zk_tls``)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_verify_locations(truststore)
    context.check_hostname = check_hostname
    if keystore:
        context.load_cert_chain(keystore)
    return context


def scheme(tls: ControlPlaneTls | None) -> str:
    """The scheme of this process's control-plane URL."""
    return "https" if tls is not None else "http"


# --- the server side ---------------------------------------------------------------------------
def peer_check(tls: ControlPlaneTls, what: str) -> Callable | None:
    """An aiohttp middleware refusing (403 CLUSTER_AUTHORIZATION_FAILED, logged at WARNING) a
    request whose client certificate's CN does not match ``tls.peer_common_name``; None when
    no pattern is set. It runs before any handler: a refused request changes nothing."""
    if not tls.peer_common_name:
        return None
    from aiohttp import web   # here: a command that only calls the control plane needs no aiohttp (~0.4 s)
    pattern = re.compile(tls.peer_common_name)

    @web.middleware
    async def check(request: web.Request, handler):
        cert = request.transport.get_extra_info("peercert") if request.transport else None
        names = [v for rdn in (cert or {}).get("subject", ()) for k, v in rdn if k == "commonName"]
        if not any(pattern.fullmatch(name) for name in names):
            log.warning("%s: refused %s %s from %s: the client certificate's CN %s does not match %s", what,
                        request.method, request.path, request.remote, names or "(none)", tls.peer_common_name)
            error = KafkaError(ErrorCode.cluster_authorization_failed,
                               "the client certificate is not one of this cluster's processes")
            return web.json_response(error.to_json(), status=403)
        return await handler(request)
    return check
