"""One connection's way into the dispatcher: its ``RequestContext`` and the SASL gate.

``ListenerConnection`` is the Kafka connection of one listener: when the connection is made it
builds the ``RequestContext`` (listener, client address, principal from a TLS client
certificate), and each request frame goes through ``ConnectionGate``, which sets the context
for the handlers and, on a SASL listener before authentication succeeds, lets only ApiVersions,
SaslHandshake and SaslAuthenticate through, as Kafka does: anything else closes the
connection. After a SaslHandshake v0 the client's SASL tokens arrive as bare frames and are
answered as bare frames.

A failed authentication's response is written, then the connection closes (the transport
flushes before closing); other connections are not touched.
"""

from __future__ import annotations

import logging
import struct

from odradek.broker.dispatch import API_VERSIONS, Dispatcher
from odradek.broker.security.listeners import Listener, principal_of
from odradek.broker.security.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE, AuthenticationFailed, SaslServer
from odradek.broker.security.session import REQUEST_CONTEXT, RequestContext
from odradek.errors import KafkaError
from odradek.protocol.codec import FrameError, encode_response, peek_header
from odradek.protocol.connection import ConnectionClosed, KafkaConnection

log = logging.getLogger(__name__)

_BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
_SIZE = struct.Struct(">i")


class ConnectionGate:
    def __init__(self, listener: Listener, dispatcher: Dispatcher, sasl: SaslServer | None, mapping_rules) -> None:
        self.listener = listener
        self.dispatcher = dispatcher
        self.sasl = sasl
        self.mapping_rules = mapping_rules
        self.context: RequestContext | None = None
        self.transport = None
        self.connection: KafkaConnection | None = None  # muted after a throttled response

    def bind(self, transport) -> None:
        peer = transport.get_extra_info("peername")
        address = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        ssl_object = transport.get_extra_info("ssl_object")
        try:
            principal = principal_of(ssl_object, self.mapping_rules) if self.listener.tls else "User:ANONYMOUS"
        except KafkaError as e:  # no ssl.principal.mapping.rules rule matches the subject: refused
            log.warning("closing TLS connection from %s on %s: %s", address, self.listener.name, e.message)
            principal = None
        self.context = RequestContext(self.listener.name, self.listener.protocol, address, principal,
                                      authenticated=not self.listener.sasl and principal is not None)
        self.transport = transport
        if principal is None:
            transport.close()
            return
        if ssl_object is not None and principal != "User:ANONYMOUS":
            log.info("TLS client %s on %s authenticated as %s", address, self.listener.name, principal)

    async def __call__(self, frame: bytes):
        context = self.context
        REQUEST_CONTEXT.set(context)
        context.request_bytes = len(frame)
        try:
            if context.raw_tokens and not context.authenticated:
                return [_SIZE.pack(len(reply := await self.sasl.evaluate(frame))) + reply]
            if not context.authenticated:
                try:
                    api_key, _, _ = peek_header(memoryview(frame))
                except FrameError as e:
                    raise ConnectionClosed(str(e)) from None
                if api_key not in _BEFORE_AUTHENTICATION:
                    raise ConnectionClosed(f"unexpected request (api key {api_key}) before SASL authentication "
                                           f"on listener {context.listener}")
            pieces = await self.dispatcher(frame)
            if context.throttle_ms:  # KIP-219: answered at once, then muted for the throttle time
                if self.connection is not None:
                    self.connection.throttle(context.throttle_ms / 1000.0)
                context.throttle_ms = 0
            return pieces
        except AuthenticationFailed as e:
            if self.sasl is not None:  # failed-authentication-total (docs/observability.md)
                self.sasl.failures[context.listener] += 1
            if not isinstance(e.body, str):  # a SaslAuthenticate response is due before the close
                api_key, version, correlation_id = peek_header(memoryview(frame))
                self.transport.write(encode_response(api_key, version, correlation_id, e.body))
            raise ConnectionClosed(f"authentication failed on listener {context.listener} "
                                   f"from {context.client_address}") from None


class ListenerConnection(KafkaConnection):
    def __init__(self, gate: ConnectionGate, *, max_frame_bytes: int) -> None:
        super().__init__(gate, max_frame_bytes=max_frame_bytes)
        self._gate = gate
        gate.connection = self

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self._gate.bind(transport)
        super().connection_made(transport)
