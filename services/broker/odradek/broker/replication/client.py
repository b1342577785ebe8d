"""A minimal async Kafka client for broker-to-broker requests (followers -> leaders, the
transaction coordinator -> partition leaders).

No client library lets a caller set Fetch's ``replica_id``, so followers speak the protocol
themselves over kio's schemas (``wire``): one connection, one request in flight at a time
(requests are sent and answered in order, which is all a fetcher needs). The connection
comes from a ``Connector`` (the inter-broker listener's ``connector.ClientSecurity``: TLS and
SASL live there), already authenticated; this client only frames requests on it.

``BrokerClients`` keeps one such client per other broker, on its inter-broker listener address
(the transaction coordinator's markers, a leader's transaction verifications).

Once opened, the connection's bytes go to a ``_Frames`` protocol (``transport.set_protocol``)
rather than through the connector's streams: a request is one write, its answer a future the
protocol resolves when the frame is complete. A ``StreamReader``'s two ``readexactly`` and an
``asyncio.timeout`` (a timer scheduled and cancelled) per request were a fifth of a follower's
CPU in the single-record acks=all round trip (py-spy, issue 33); the timeout is a watchdog
instead: one timer per connection, re-armed only when it fires, that fails the request in
flight once its deadline has passed.

Errors: any socket failure or a mismatched correlation id closes the connection and raises
``ConnectionError``; the caller reconnects. Not thread-safe (one event loop, one caller).
"""

from __future__ import annotations

import asyncio
import struct
from typing import TYPE_CHECKING, Any, Protocol

from odradek.broker.replication.connector import ClientSecurity, Streams
from odradek.broker.replication.wire import decode_response, encode_request
from odradek.protocol.flow import WriteFlow

if TYPE_CHECKING:
    from odradek.broker.partitions import ReplicaManager


class Connector(Protocol):
    """Opens a connection ready for requests (TLS and SASL done), or raises ConnectionError."""

    async def open(self, host: str, port: int, *, client_id: str, timeout: float) -> Streams: ...


class KafkaClient:
    """One connection to one broker's Kafka listener."""

    def __init__(self, host: str, port: int, *, client_id: str, connect_timeout: float = 5.0,
                 security: Connector | None = None) -> None:
        self.host = host
        self.port = port
        self.security = security or ClientSecurity()
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self._frames: _Frames | None = None
        self._correlation = 0

    @property
    def connected(self) -> bool:
        return self._frames is not None and not self._frames.transport.is_closing()

    async def connect(self) -> None:
        if not self.connected:
            reader, writer = await self.security.open(self.host, self.port, client_id=self.client_id,
                                                      timeout=self.connect_timeout)
            self._frames = _Frames.take_over(reader, writer)

    async def request(self, api_key: int, version: int, body: Any, *, timeout: float) -> Any:
        """Send one request and wait (at most ``timeout`` s) for its response body."""
        if not self.connected:
            await self.connect()
        self._correlation = correlation = (self._correlation + 1) & 0x7FFFFFFF
        try:
            frame = await self._frames.exchange(encode_request(api_key, version, correlation, self.client_id, body),
                                                timeout)
        except (OSError, asyncio.TimeoutError) as e:  # OSError: ConnectionError too
            self.close()
            raise ConnectionError(f"request {api_key} v{version} to {self.host}:{self.port} failed: {e!r}") from e
        got, response = decode_response(api_key, version, frame)
        if got != correlation:
            self.close()
            raise ConnectionError(f"request {api_key} v{version} to {self.host}:{self.port}: "
                                  f"correlation id {got}, expected {correlation}")
        return response

    def close(self) -> None:
        if self._frames is not None:
            self._frames.transport.close()
        self._frames = None


_SIZE = struct.Struct(">i")


class _Frames(WriteFlow, asyncio.Protocol):
    """One connection's response frames (size prefix dropped), one request in flight."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self._buf = bytearray()
        self._waiter: asyncio.Future | None = None
        self._deadline = 0.0                       # loop time the request in flight must be answered by
        self._watchdog: asyncio.TimerHandle | None = None
        self._lost: Exception | None = None
        self._streams: asyncio.StreamWriter | None = None

    @classmethod
    def take_over(cls, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> "_Frames":
        """The protocol of the connection the streams were opened on (nothing is buffered in
        ``reader``: every exchange of the connector was answered)."""
        frames = cls(writer.transport)
        frames._streams = writer   # kept: a StreamWriter closes its transport when collected
        writer.transport.set_protocol(frames)
        return frames

    async def exchange(self, request: bytes, timeout: float) -> bytes | memoryview:
        """Write ``request``; its answer's frame, within ``timeout`` s."""
        if self._lost is not None:
            raise self._lost
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        self._deadline = deadline = loop.time() + timeout
        watchdog = self._watchdog
        if watchdog is None or watchdog.when() > deadline:   # none armed, or for later than this one
            if watchdog is not None:
                watchdog.cancel()
            self._watchdog = loop.call_at(deadline, self._watch)
        try:
            self.transport.write(request)
            if self._drained is not None:
                await self._drained
            return await waiter
        finally:
            self._waiter = None

    def _watch(self) -> None:
        """Fail the request in flight past its deadline (closing the connection, which also ends
        a wait for the socket to drain); else sleep until the next one could be."""
        self._watchdog = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        loop = asyncio.get_running_loop()
        if loop.time() >= self._deadline:
            self._fail(asyncio.TimeoutError())
        else:
            self._watchdog = loop.call_at(self._deadline, self._watch)

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        if not buf and len(data) >= 4 and _SIZE.unpack_from(data)[0] == len(data) - 4:
            self._answer(memoryview(data)[4:])  # the usual case: one whole frame in one read, no copy
            return
        buf += data
        while len(buf) >= 4:
            (size,) = _SIZE.unpack_from(buf)
            if size < 0:
                self._fail(OSError(f"negative frame size {size}"))
                return
            if len(buf) < 4 + size:
                return
            with memoryview(buf) as view:
                frame = bytes(view[4:4 + size])
            del buf[:4 + size]
            self._answer(frame)

    def _answer(self, frame: bytes | memoryview) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():  # nothing asked: the peer is out of step
            self._fail(OSError("a response frame with no request in flight"))
            return
        waiter.set_result(frame)

    def _fail(self, error: Exception) -> None:
        self._lost = self._lost or error
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(ConnectionError(f"connection lost: {exc!r}") if exc is not None else ConnectionError("connection closed"))
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        self.resume_writing()

    def eof_received(self) -> bool:
        return False


class BrokerClients:
    """A client per live broker on the inter-broker listener, replaced when its address changes."""

    def __init__(self, replicas: ReplicaManager, client_id: str) -> None:
        self.replicas, self.client_id = replicas, client_id
        self._clients: dict[int, KafkaClient] = {}

    def get(self, broker: int) -> KafkaClient:
        """Raises ConnectionError when the broker is gone or lacks the listener."""
        listener = self.replicas.inter_broker.listener
        info = next((b for b in self.replicas.live_brokers() if b.id == broker), None)
        address = info.endpoint(listener) if info is not None else None
        if address is None:
            raise ConnectionError(f"broker {broker} is not live or has no {listener} listener")
        client = self._clients.get(broker)
        if client is not None and (client.host, client.port) != address:
            client.close()
            client = None
        if client is None:
            client = self._clients[broker] = KafkaClient(*address, client_id=self.client_id,
                                                         security=self.replicas.inter_broker)
        return client

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
