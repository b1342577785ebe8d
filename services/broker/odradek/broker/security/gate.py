"""One connection's way into the dispatcher: its ``RequestContext``, the SASL exchange, the mute.

``ListenerConnection`` is the Kafka connection of one listener: when the connection is made it
builds the ``RequestContext`` (listener, client address, principal from a TLS client
certificate), and each request frame goes through ``ConnectionGate``, which sets the context
for the handlers and answers the SASL exchange itself (SaslHandshake, SaslAuthenticate: the
only APIs not in the handler table); on a SASL listener before authentication succeeds it lets
only ApiVersions and that exchange through, as Kafka does: anything else closes the connection.
After a SaslHandshake v0 the client's SASL tokens arrive as bare frames and are answered as
bare frames. Everything else goes to the dispatcher, whose answer carries the request's
throttle: the connection is muted that long once the response is written (KIP-219).

A failed authentication's response is written, then the connection closes (the transport
flushes before closing); other connections are not touched.

While a SASL listener's connection is not authenticated (from its first byte until its exchange
succeeds, and again while it re-authenticates) its frames are capped at
``sasl.server.max.receive.size`` and kept out of the listener's memory pool
(``KafkaConnection.before_authentication``); a larger one closes the connection unread and counts
as a failed authentication, as Kafka's "invalid receive size" does. A session past its lifetime
(``connections.max.reauth.ms``) is closed at its next request other than a SaslHandshake (which
starts re-authentication), as Kafka's SocketServer closes an expired channel.
"""

from __future__ import annotations

import logging
import struct
import time

from odradek.broker.dispatch import Dispatcher
from odradek.broker.security.listeners import Listener, principal_of
from odradek.broker.security.sasl import AuthenticationFailed, SaslServer
from odradek.broker.security.session import REQUEST_CONTEXT, RequestContext
from odradek.errors import KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import FrameError, decode_request, encode_response, peek_header
from odradek.protocol.connection import CloseReason, ConnectionClosed, KafkaConnection

log = logging.getLogger(__name__)

_SASL_EXCHANGE = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
_SIZE = struct.Struct(">i")


class ConnectionGate:
    def __init__(self, listener: Listener, dispatcher: Dispatcher, sasl: SaslServer, mapping_rules,
                 max_receive: int = 524288) -> None:
        self.listener = listener
        self.max_receive = max_receive   # sasl.server.max.receive.size of this listener
        self.dispatcher = dispatcher
        self.sasl = sasl   # answers the exchange on any listener (illegal state where no SASL is due)
        self._exchange = sasl.table()
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
                try:
                    return [_SIZE.pack(len(reply := await self.sasl.evaluate(frame))) + reply]
                finally:
                    self._follow_authentication()
            try:
                peeked = api_key, version, correlation_id = peek_header(memoryview(frame))
            except FrameError as e:
                raise ConnectionClosed(str(e)) from None
            if self._expired(context) and api_key != ApiKey.SASL_HANDSHAKE:
                raise ConnectionClosed(f"SASL session of {context.principal} on listener {context.listener} "
                                       f"expired (connections.max.reauth.ms)")
            if api_key in _SASL_EXCHANGE:
                try:
                    return [await self._exchange_step(frame, api_key, version, correlation_id)]
                finally:
                    self._follow_authentication()
            if not context.authenticated and api_key != ApiKey.API_VERSIONS:
                raise ConnectionClosed(f"unexpected request (api key {api_key}) before SASL authentication "
                                       f"on listener {context.listener}")
            answer = await self.dispatcher.handle(frame, peeked)
            if answer.throttle_ms and self.connection is not None:  # KIP-219: answered at once, then muted
                self.connection.throttle(answer.throttle_ms / 1000.0)
            return answer.body
        except AuthenticationFailed as e:
            if self.listener.sasl:  # failed-authentication-total (docs/observability.md)
                self.sasl.failures[context.listener] += 1
            if not isinstance(e.body, str):  # a SaslAuthenticate response is due before the close
                api_key, version, correlation_id = peek_header(memoryview(frame))
                self.transport.write(encode_response(api_key, version, correlation_id, e.body))
            raise ConnectionClosed(f"authentication failed on listener {context.listener} "
                                   f"from {context.client_address}") from None

    @staticmethod
    def _expired(context: RequestContext) -> bool:
        """An authenticated session past its lifetime (never while it re-authenticates)."""
        return context.authenticated and context.expires is not None and time.monotonic() > context.expires

    def _follow_authentication(self) -> None:
        """The connection's framing follows the session: capped and unpooled while unauthenticated."""
        connection = self.connection
        if connection is None or connection.authenticating != self.context.authenticated:
            return
        if self.context.authenticated:
            connection.authentication_done()
        else:
            connection.before_authentication(self.max_receive)

    async def _exchange_step(self, frame: bytes, api_key: int, version: int, correlation_id: int) -> bytearray:
        """A SaslHandshake or SaslAuthenticate request answered (a version we lack closes, as any)."""
        lo, hi, handler = self._exchange[api_key]
        if not lo <= version <= hi:
            raise ConnectionClosed(f"unsupported request: api key {api_key} version {version}")
        try:
            header, request = decode_request(memoryview(frame).toreadonly())
        except FrameError as e:
            raise ConnectionClosed(str(e)) from None
        return encode_response(api_key, version, correlation_id, await handler(header, request))


class ListenerConnection(KafkaConnection):
    def __init__(self, gate: ConnectionGate, *, max_frame_bytes: int) -> None:
        super().__init__(gate, max_frame_bytes=max_frame_bytes)
        self._gate = gate
        gate.connection = self

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self._gate.bind(transport)
        if self._gate.listener.sasl:  # nothing is read before this: the first frame is capped too
            self.before_authentication(self._gate.max_receive)
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.close_reason is CloseReason.PREAUTH_FRAME_TOO_LARGE:  # Kafka: a failed authentication
            self._gate.sasl.failures[self._gate.listener.name] += 1
        super().connection_lost(exc)
