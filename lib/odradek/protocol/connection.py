"""One Kafka connection on the server side: framing, admission, in-order dispatch, zero-copy writes.

Frames are ``int32 size`` + payload. Bytes arrive through ``asyncio.BufferedProtocol`` into a
receive buffer (64 KiB, no per-read allocation) lent by ``RECEIVE_BUFFERS`` for as long as the
connection holds bytes not yet parsed: an idle connection holds none (10,000 idle connections
held 640 MB of them when each kept its own; docs/performance.md, "Idle connections"). A frame
that fits in it is copied out once when complete; a larger one gets a buffer of its own,
allocated when its header is read and the bytes it announces are admitted, which the socket
then fills directly (no copy).

**Admission** (Kafka's KIP-72): before a frame is copied out or its buffer allocated, its size
is reserved in the listener's ``MemoryPool`` (``queued.max.request.bytes``), and released
once its request has been handled. When the pool cannot take it, the connection is *muted*
(reading paused; at most one receive buffer of its bytes is held) until a release makes room:
a client announcing a huge frame costs memory only once admitted. A frame size that is
negative or over ``max_frame_bytes`` (``socket.request.max.bytes``) closes the connection
before anything is allocated.

**Before authentication** (``before_authentication(limit)``, until ``authentication_done()``:
a SASL listener's connection until its exchange succeeds, and again while it re-authenticates)
a frame may not exceed ``limit`` (``sasl.server.max.receive.size``, Kafka's cap since
CVE-2022-34917): a larger announced size closes the connection before its body is read. Such
frames are not charged to the pool: the connection reads one at a time (reading pauses until
it is handled, as Kafka's authenticator reads one receive at a time), so it holds at most
``limit`` bytes of its own and an unauthenticated client can never hold the pool that
authenticated requests and followers' fetches need.

A single task per connection handles the queue in order, as Kafka does (one request in flight
per connection on the broker side, responses in request order), so a long-polling Fetch
delays only its own connection. More than 64 queued frames mute the connection too, and so
does a quota throttle (``throttle``: once the response is written, the connection is not read
for the throttle time, Kafka's KIP-219).

A response is a sequence of pieces: ``bytes``-like objects, written through the transport,
and ``FileRegion``s, sent from the segment file with ``os.sendfile`` while the transport's
buffer is empty; once the socket is full, the rest from the loop's callbacks as it drains (one
watch of a duplicate of the socket's descriptor per region: the transport owns the original's
registration); over TLS, or behind bytes the transport still buffers, read and written through
the transport: ordering always holds.
Regions up to 64 KiB are read and gathered with the bytes around them into one write.

An ``observer`` (the broker's request metrics) is told, after each request, when its frame
was complete, when its handling started and ended, and when its response was written
(monotonic seconds): one call per request, no per-record work.

A peer that goes away (reset, broken pipe, even in the middle of a response) is an ordinary
event, logged at debug; ERROR is kept for what an operator must act on.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import logging
import os
import struct
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterable, Union

from odradek.protocol.flow import WriteFlow
from odradek.protocol.memory_pool import MemoryPool

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_RECEIVE_BUFFER = 64 * 1024
_MAX_QUEUED_FRAMES = 64
_INLINE_REGION_BYTES = 64 * 1024   # smaller regions are read and sent with the rest (no sendfile)
_QUEUE_FULL, _NO_MEMORY, _THROTTLED, _AUTHENTICATING = 1, 2, 4, 8   # why a connection is muted (a bit each)
_now = time.monotonic

_API = struct.Struct(">hh")        # a request header's api key and version
# observer(api key, api version, received, started, handled, written): monotonic seconds of one request
Observer = Callable[[int, int, float, float, float, float], None]


class ReceiveBuffers:
    """Receive buffers lent to connections: taken when bytes arrive at a connection holding
    none, given back once all it held is parsed (frames copied out). Reads on an event loop are
    one at a time, so a few buffers serve thousands of connections; ``keep`` bounds the spares."""

    def __init__(self, size: int = _RECEIVE_BUFFER, keep: int = 64) -> None:
        self.size = size
        self._keep = keep
        self._free: list[bytearray] = []  # list.pop/append: atomic, brokers in threads may share it

    def take(self) -> bytearray:
        try:
            return self._free.pop()
        except IndexError:
            return bytearray(self.size)

    def give(self, buf: bytearray) -> None:
        if len(buf) == self.size and len(self._free) < self._keep:  # a grown one is not kept
            self._free.append(buf)


RECEIVE_BUFFERS = ReceiveBuffers()


@dataclass(frozen=True, slots=True)
class FileRegion:
    """``size`` bytes of an open file from ``position``, sent with sendfile."""

    fd: int
    position: int
    size: int


Piece = Union[bytes, bytearray, memoryview, FileRegion]
Handler = Callable[[bytes | bytearray], Awaitable[Iterable[Piece] | None]]


class CloseReason(enum.Enum):
    PEER_CLOSED = "peer closed the connection"
    FRAME_TOO_LARGE = "frame size over socket.request.max.bytes"
    PREAUTH_FRAME_TOO_LARGE = "frame size before authentication over sasl.server.max.receive.size"
    BAD_FRAME = "frame could not be parsed"
    IDLE = "idle for longer than connections.max.idle.ms"
    SERVER_STOPPING = "server stopping"


_UNREAD = frozenset((CloseReason.FRAME_TOO_LARGE, CloseReason.PREAUTH_FRAME_TOO_LARGE))  # closed with the body unread


class KafkaConnection(WriteFlow, asyncio.BufferedProtocol):
    """``pool``: the listener's request memory (unbounded if None); ``on_closed(conn)`` is
    called once the connection is lost."""

    def __init__(self, handler: Handler, *, max_frame_bytes: int, pool: MemoryPool | None = None,
                 on_closed: Callable[[KafkaConnection], None] | None = None, name: str = "") -> None:
        self._handler = handler
        self._max_frame = max_frame_bytes
        self._pool = pool if pool is not None else MemoryPool(0)
        self._on_closed = on_closed
        self._buf: bytearray | None = None  # lent by RECEIVE_BUFFERS while bytes wait to be parsed
        self._start = 0
        self._end = 0
        self._frame: bytearray | None = None  # a frame larger than the receive buffer, being filled
        self._frame_got = 0
        self._reserved = 0                     # pool bytes of queued frames and of self._frame
        self._frame_pooled = True              # whether self._frame is charged to the pool
        self._preauth_limit: int | None = None  # before authentication: the frame cap (no pool)
        self._preauth_held = 0                 # bytes of the one unauthenticated frame not yet handled
        # queued frames with when each was complete and whether the pool holds its bytes; a deque
        # and a future the request loop waits on when it is empty (an asyncio.Queue and an Event
        # cost 4 KiB more per connection)
        self._frames: collections.deque[tuple[bytes | bytearray, float, bool]] = collections.deque()
        self._frame_waiter: asyncio.Future | None = None
        self.observer: Observer | None = None
        self.listener_name = ""  # the listener that accepted it (per-listener connection counts)
        self._drained: asyncio.Future | None = None  # while the transport's write buffer is over its limit
        self._transport: asyncio.Transport | None = None
        self._sock_fd = -1
        self._watched_fd = -1  # a duplicate of the socket's descriptor, watched (see _send_when_writable)
        self._muted = 0
        self._throttle_s = 0.0  # quota throttle: mute this long once the current response is written
        self._paused = False
        self._busy = False
        self.task: asyncio.Task | None = None
        self.name = name
        self.peer_host: str | None = None
        self.last_active = _now()
        self.close_reason: CloseReason | None = None

    def attach(self, pool: MemoryPool, on_closed: Callable[[KafkaConnection], None], peer_host: str) -> None:
        """Join a listener: its request memory pool, its bookkeeping (before ``connection_made``)."""
        self._pool, self._on_closed, self.peer_host = pool, on_closed, peer_host

    def before_authentication(self, limit: int) -> None:
        """Frames parsed from now on are unauthenticated: capped at ``limit``, one at a time, not
        charged to the pool (called before any byte is read, or while a request is handled)."""
        self._preauth_limit = limit

    def authentication_done(self) -> None:
        """Frames parsed from now on are charged to the pool, up to ``max_frame_bytes``."""
        self._preauth_limit = None

    @property
    def authenticating(self) -> bool:
        return self._preauth_limit is not None

    # -- asyncio callbacks -------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._transport = transport
        sock = transport.get_extra_info("socket")
        # over TLS the bytes must go through the transport's encryption: no sendfile (regions are
        # read and written through the transport, see _send_file)
        tls = transport.get_extra_info("sslcontext") is not None
        self._sock_fd = sock.fileno() if sock is not None and not tls else -1
        peer = transport.get_extra_info("peername")
        self.peer_host = self.peer_host or (peer[0] if isinstance(peer, tuple) else None)
        self.name = self.name or f"{peer}"
        self.task = asyncio.get_running_loop().create_task(self._serve())

    def connection_lost(self, exc: Exception | None) -> None:
        self.close_reason = self.close_reason or CloseReason.PEER_CLOSED
        log.debug("connection %s closed: %s", self.name, self.close_reason.value)
        self._pool.forget(self)
        self._frame = None
        self._return_buffer()
        self._frames.clear()  # unhandled requests: dropped, their memory released
        reserved, self._reserved = self._reserved, 0
        if reserved:
            self._pool.release(reserved)
        self.resume_writing()
        self._close_watched()
        if self.task is not None:
            self.task.cancel()
        if self._on_closed is not None:
            self._on_closed(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._frame_got:]
        if self._buf is None:
            self._buf = RECEIVE_BUFFERS.take()
        elif self._end == len(self._buf):
            self._compact()
        return memoryview(self._buf)[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = _now()
        if self._frame is not None:
            self._frame_got += nbytes
            if self._frame_got == len(self._frame):
                frame, self._frame = self._frame, None
                self._enqueue(frame, self._frame_pooled)
            return
        self._end += nbytes
        self._parse()

    def eof_received(self) -> bool:
        return False

    # -- framing and admission ---------------------------------------------------------
    def _parse(self) -> None:
        """Queue every complete frame of the receive buffer that the pool admits."""
        buf = self._buf
        if buf is None:
            return
        while self._end - self._start >= 4:
            if self._preauth_limit is not None and self._preauth_held:
                self._mute(_AUTHENTICATING)  # the next frame is read once this one is handled
                return
            (size,) = _SIZE.unpack_from(buf, self._start)
            if not self._size_allowed(size):
                return
            begin = self._start + 4
            if 4 + size > len(buf):
                self._start_large_frame(begin, size)
                return
            if self._end - begin < size:
                if self._start + 4 + size > len(buf):
                    self._compact()
                return
            if not self._admit(size):
                return
            with memoryview(buf) as view:  # one copy: slicing the bytearray would copy it twice
                self._enqueue(bytes(view[begin:begin + size]), self._preauth_limit is None)
            self._start = begin + size
        if self._start == self._end:
            self._return_buffer()

    def _size_allowed(self, size: int) -> bool:
        """Within the limit in force, else the connection is closed (its body is never read)."""
        if self._preauth_limit is not None and size > self._preauth_limit:
            log.warning("closing %s: frame of %d bytes before authentication (sasl.server.max.receive.size %d)",
                        self.name, size, self._preauth_limit)
            self.close(CloseReason.PREAUTH_FRAME_TOO_LARGE)
            return False
        if size < 0 or size > self._max_frame:
            log.warning("closing %s: frame of %d bytes (limit %d)", self.name, size, self._max_frame)
            self.close(CloseReason.FRAME_TOO_LARGE)
            return False
        return True

    def _return_buffer(self) -> None:
        """Everything received is parsed: the buffer goes back (the event loop may still hold
        the view ``get_buffer`` gave, but writes nothing more through it)."""
        if self._buf is not None:
            RECEIVE_BUFFERS.give(self._buf)
            self._buf = None
        self._start = self._end = 0

    def _start_large_frame(self, begin: int, size: int) -> None:
        """A frame larger than the receive buffer: once admitted, its own buffer, which the
        socket fills from then on."""
        if not self._admit(size):
            return
        frame = bytearray(size)
        got = self._end - begin
        with memoryview(self._buf) as view:
            frame[:got] = view[begin:self._end]
        self._frame, self._frame_got, self._frame_pooled = frame, got, self._preauth_limit is None
        self._return_buffer()

    def _admit(self, size: int) -> bool:
        if self._preauth_limit is not None:  # the connection's own budget: this frame alone
            self._preauth_held = size
            return True
        if self._pool.try_reserve(size):
            self._reserved += size
            return True
        self._mute(_NO_MEMORY)
        self._pool.wait(self, size, self._memory_freed)
        return False

    def _mute(self, reason: int) -> None:
        self._muted |= reason
        self._sync_reading()

    def _memory_freed(self) -> None:
        self._unmute_and_parse(_NO_MEMORY)

    def _unmute_and_parse(self, reason: int) -> None:
        """The reason to wait is gone: parse what is buffered, read again unless muted otherwise."""
        if self._transport is None or self._transport.is_closing():
            return
        self._muted &= ~reason
        self._parse()
        self._sync_reading()

    def _enqueue(self, frame: bytes | bytearray, pooled: bool) -> None:
        self._frames.append((frame, _now(), pooled))
        waiter = self._frame_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if len(self._frames) >= _MAX_QUEUED_FRAMES and not self._muted & _QUEUE_FULL:
            self._muted |= _QUEUE_FULL
            self._sync_reading()

    def _sync_reading(self) -> None:
        """Pause reading while muted for any reason, resume when no reason is left."""
        paused = bool(self._muted)
        if paused != self._paused and self._transport is not None and not self._transport.is_closing():
            self._paused = paused
            if paused:
                self._transport.pause_reading()
            else:
                self._transport.resume_reading()

    def _compact(self) -> None:
        """Move the unparsed tail to the front of the receive buffer.

        The event loop may still hold the memoryview ``get_buffer`` handed out (uvloop does,
        during ``buffer_updated``), so the bytearray is never resized: the tail moves within it.
        """
        pending = self._end - self._start
        if pending == len(self._buf):  # cannot happen while the framing rules hold: stay safe
            grown = bytearray(2 * len(self._buf))
            grown[:pending] = self._buf
            self._buf = grown
        elif self._start:
            with memoryview(self._buf) as view:
                view[:pending] = view[self._start:self._end]
        self._start, self._end = 0, pending

    # -- request loop ------------------------------------------------------------------
    def idle_since(self) -> float | None:
        """When the connection last moved bytes, or None while a request is queued or handled."""
        if self._busy or self._frames:
            return None
        return self.last_active

    async def _serve(self) -> None:
        frames, create_future = self._frames, asyncio.get_running_loop().create_future
        try:
            while True:
                # inlined, the loop looked up once: a coroutine and a get_running_loop (which
                # calls getpid) per request cost the single-record round trip (issue 33)
                while not frames:
                    self._frame_waiter = create_future()
                    try:
                        await self._frame_waiter
                    finally:
                        self._frame_waiter = None
                frame, received, pooled = frames.popleft()
                size = len(frame)
                if pooled:
                    self._reserved -= size
                if self._muted & _QUEUE_FULL and len(self._frames) < _MAX_QUEUED_FRAMES // 2:
                    self._muted &= ~_QUEUE_FULL
                    self._sync_reading()
                self._busy = True
                api = _API.unpack_from(frame) if self.observer is not None and size >= 4 else None
                started = _now()
                try:
                    response = await self._handler(frame)
                finally:
                    if size > _RECEIVE_BUFFER:  # give a large frame's memory back with its reservation
                        frame = None  # (a small one may wait for the next: freeing each at once costs
                    self._busy = False  # malloc trims and page faults, 5 us a 16 KiB frame)
                    self._release(size, pooled)
                handled = written = _now()
                if response is not None:
                    await self._write(response)
                    self.last_active = written = _now()
                if api is not None:
                    self.observer(api[0], api[1], received, started, handled, written)
                if self._throttle_s:
                    await self._mute_for_throttle()
        except asyncio.CancelledError:
            pass
        except ConnectionClosed as e:
            log.info("closing %s: %s", self.name, e)
            self.close(CloseReason.BAD_FRAME)
        except ConnectionError as e:  # the peer went away while we answered: ordinary
            log.debug("%s went away: %r", self.name, e)
            self.close(CloseReason.PEER_CLOSED)
        except Exception:
            log.exception("closing %s after an unexpected error", self.name)
            self.close(CloseReason.BAD_FRAME)

    def _release(self, size: int, pooled: bool) -> None:
        if pooled:
            self._pool.release(size)
            return
        self._preauth_held = 0   # the next frame may be read, under the rules now in force
        if self._muted & _AUTHENTICATING:
            self._unmute_and_parse(_AUTHENTICATING)

    def throttle(self, seconds: float) -> None:
        """Mute the connection for ``seconds`` once the response being prepared is written
        (Kafka's KIP-219: the client learns the throttle time at once and is not read meanwhile)."""
        self._throttle_s = max(self._throttle_s, seconds)

    async def _mute_for_throttle(self) -> None:
        seconds, self._throttle_s = self._throttle_s, 0.0
        self._muted |= _THROTTLED
        self._sync_reading()
        try:
            await asyncio.sleep(seconds)
        finally:
            self._muted &= ~_THROTTLED
            self._sync_reading()
        self.last_active = _now()  # a muted connection is not idle

    async def _write(self, pieces: Iterable[Piece]) -> None:
        """Consecutive bytes and small file regions go out in one writev: a write per piece
        cost a syscall and a wake-up of the peer each (a fetch response has five pieces)."""
        transport = self._transport
        pieces = list(pieces)
        gathered: list[bytes | bytearray | memoryview] = []
        held: list[int] = []  # our duplicates of later regions' descriptors (see _hold_later_regions)
        holding = False
        try:
            for i, piece in enumerate(pieces):
                if not isinstance(piece, FileRegion):
                    gathered.append(piece)
                elif piece.size <= _INLINE_REGION_BYTES:
                    gathered.append(os.pread(piece.fd, piece.size, piece.position))
                else:
                    if transport.is_closing():
                        return
                    if gathered:
                        transport.writelines(gathered)
                        gathered = []
                    if not holding:
                        holding = True
                        _hold_later_regions(pieces, i + 1, held)
                    await self._send_file(piece)
            if gathered and not transport.is_closing():
                transport.writelines(gathered)
        finally:
            for fd in held:
                os.close(fd)
        if self._drained is not None:
            await self._drained

    async def _send_file(self, region: FileRegion) -> None:
        """sendfile until the region is sent, waiting for the socket to drain between calls:
        reading the rest into memory once the socket was full (as before) cost a consumer's
        fetch a copy of most of its megabyte, an allocation and the page faults of it."""
        position, remaining = region.position, region.size
        if self._sock_fd >= 0 and self._transport.get_write_buffer_size() == 0:
            try:
                sent = os.sendfile(self._sock_fd, region.fd, position, remaining)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except ConnectionError as e:
                self._gone_mid_response(e)
                return
            position, remaining = position + sent, remaining - sent
            if remaining > _INLINE_REGION_BYTES:
                await self._send_when_writable(region.fd, position, remaining)
                return
        if remaining and not self._transport.is_closing():  # TLS, or queued bytes first: in order
            self._transport.write(os.pread(region.fd, remaining, position))

    async def _send_when_writable(self, fd: int, position: int, remaining: int) -> None:
        """The rest of a region, sent by ``_RegionSend`` from the loop's writability callbacks,
        its last bytes (at most 64 KiB) handed to the transport, which sends them (and the
        response's bytes after them) when the socket drains. The segment's descriptor is
        duplicated for the wait: the log may close its segment (retention) meanwhile, and its
        number must not be read once reused."""
        if self._transport.is_closing():
            return
        if self._watched_fd < 0:
            self._watched_fd = os.dup(self._sock_fd)
        owned = os.dup(fd)
        try:
            send = _RegionSend(self._transport, self._watched_fd, owned, position, remaining)
            await self._watch_until_sent(send)
            if isinstance(send.error, ConnectionError):
                self._gone_mid_response(send.error)
            elif send.error is not None:
                raise send.error
            elif send.remaining and not self._transport.is_closing():
                self._transport.write(os.pread(owned, send.remaining, send.position))
        finally:
            os.close(owned)

    async def _watch_until_sent(self, send: _RegionSend) -> None:
        loop = asyncio.get_running_loop()
        watched = self._watched_fd
        loop.add_writer(watched, send.on_writable)
        try:
            await send.done
        finally:
            if watched == self._watched_fd:  # else closed (and its number maybe reused) by connection_lost
                loop.remove_writer(watched)

    def _gone_mid_response(self, error: OSError) -> None:
        """Reset or broken pipe while a response was sent: the client left, an ordinary event."""
        log.debug("%s went away during a fetch response: %r", self.name, error)
        self.close(CloseReason.PEER_CLOSED)

    def _close_watched(self) -> None:
        """The transport closed the socket; the duplicate kept it open: close it too (a region
        being sent stops: the connection's task is cancelled)."""
        watched, self._watched_fd = self._watched_fd, -1
        if watched >= 0:
            asyncio.get_running_loop().remove_writer(watched)
            os.close(watched)

    def close(self, reason: CloseReason) -> None:
        self.close_reason = self.close_reason or reason
        if self._transport is None:
            return
        if reason in _UNREAD:  # no TLS shutdown to wait for: its wait would keep reading the peer's bytes
            self._transport.abort()
        elif not self._transport.is_closing():
            self._transport.close()


class _RegionSend:
    """A region's rest, sent from the writability callbacks of the connection's watched
    duplicate socket descriptor: one watch for the whole region and a ``sendfile`` per wake-up,
    not an ``add_writer``, a future, a task wake-up and a ``remove_writer`` per wait (tens of
    them per 8 MiB fetch with a 256 KiB send buffer: 41% of a consume's broker CPU was user
    time, issue 33). After a partial ``sendfile`` the next call waits for the next wake-up (the
    watch is level-triggered: a socket still writable wakes it at the loop's next poll).
    ``done`` resolves once at most 64 KiB are left (the transport sends those), or on an error
    (kept in ``error`` for the sending task: a callback's exception would only be logged)."""

    __slots__ = ("transport", "sock_fd", "fd", "position", "remaining", "error", "done")

    def __init__(self, transport: asyncio.Transport, sock_fd: int, fd: int, position: int, remaining: int) -> None:
        # sock_fd: the watched duplicate, open for as long as the watch (the transport's own
        # descriptor may be closed, its number reused, before connection_lost removes the watch)
        self.transport, self.sock_fd, self.fd = transport, sock_fd, fd
        self.position, self.remaining = position, remaining
        self.error: OSError | None = None
        self.done = asyncio.get_running_loop().create_future()

    def on_writable(self) -> None:
        if self.done.done():
            return
        if self.transport.is_closing():
            self.done.set_result(None)
            return
        try:
            sent = os.sendfile(self.sock_fd, self.fd, self.position, self.remaining)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:  # the sending task handles it (a reset peer is ordinary)
            self.error = e
            self.done.set_result(None)
            return
        self.position += sent
        self.remaining -= sent
        if sent == 0 or self.remaining <= _INLINE_REGION_BYTES:  # 0: the file ends before the region
            self.done.set_result(None)


def _hold_later_regions(pieces: list[Piece], start: int, held: list[int]) -> None:
    """Point the regions from ``start`` on at duplicates of their descriptors (added to ``held``,
    for the caller to close): the response may wait for the socket before it sends them, and
    retention may close their segments meanwhile."""
    for i in range(start, len(pieces)):
        piece = pieces[i]
        if isinstance(piece, FileRegion):
            held.append(os.dup(piece.fd))
            pieces[i] = FileRegion(held[-1], piece.position, piece.size)


class ConnectionClosed(Exception):
    """Raised by a handler to close the connection (malformed or unsupported request)."""
