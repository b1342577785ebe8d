"""One Kafka connection on the server side: framing, in-order dispatch, zero-copy writes.

Frames are ``int32 size`` + payload. Bytes arrive through ``asyncio.BufferedProtocol`` into
one growing buffer (no per-read allocation); each complete frame is copied out once and
queued. A single task per connection handles the queue in order, as Kafka does (one request
in flight per connection on the broker side, responses in request order), so a long-polling
Fetch delays only its own connection.

A response is a sequence of pieces: ``bytes``-like objects, written through the transport,
and ``FileRegion``s, sent from the segment file with ``os.sendfile`` while the transport's
buffer is empty (else, and always over TLS, read and written through the transport: ordering
always holds).
Regions up to 64 KiB are read and gathered with the bytes around them into one write.

A frame size that is negative or over ``max_frame_bytes`` (Kafka's
``socket.request.max.bytes``, 100 MiB) closes the connection before anything is allocated.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import struct
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterable, Union

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_INITIAL_BUFFER = 64 * 1024
_MAX_QUEUED_FRAMES = 64
_INLINE_REGION_BYTES = 64 * 1024   # smaller regions are read and sent with the rest (no sendfile)


@dataclass(frozen=True, slots=True)
class FileRegion:
    """``size`` bytes of an open file from ``position``, sent with sendfile."""

    fd: int
    position: int
    size: int


Piece = Union[bytes, bytearray, memoryview, FileRegion]
Handler = Callable[[bytes], Awaitable[Iterable[Piece] | None]]


class CloseReason(enum.Enum):
    PEER_CLOSED = "peer closed the connection"
    FRAME_TOO_LARGE = "frame size over socket.request.max.bytes"
    BAD_FRAME = "frame could not be parsed"
    SERVER_STOPPING = "server stopping"


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, handler: Handler, *, max_frame_bytes: int, name: str = "") -> None:
        self._handler = handler
        self._max_frame = max_frame_bytes
        self._buf = bytearray(_INITIAL_BUFFER)
        self._start = 0
        self._end = 0
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._writable = asyncio.Event()
        self._writable.set()
        self._transport: asyncio.Transport | None = None
        self._sock_fd = -1
        self._task: asyncio.Task | None = None
        self._paused = False
        self.name = name
        self.close_reason: CloseReason | None = None

    # -- asyncio callbacks -------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._transport = transport
        sock = transport.get_extra_info("socket")
        # over TLS the bytes must go through the transport's encryption: no sendfile (regions are
        # read and written through the transport, see _send_file)
        tls = transport.get_extra_info("sslcontext") is not None
        self._sock_fd = sock.fileno() if sock is not None and not tls else -1
        peer = transport.get_extra_info("peername")
        self.name = self.name or f"{peer}"
        self._task = asyncio.get_running_loop().create_task(self._serve())

    def connection_lost(self, exc: Exception | None) -> None:
        self.close_reason = self.close_reason or CloseReason.PEER_CLOSED
        self._writable.set()
        if self._task is not None:
            self._task.cancel()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._end == len(self._buf):
            self._make_room(len(self._buf))
        return memoryview(self._buf)[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        self._end += nbytes
        buf = self._buf
        while self._end - self._start >= 4:
            (size,) = _SIZE.unpack_from(buf, self._start)
            if size < 0 or size > self._max_frame:
                log.warning("closing %s: frame of %d bytes (limit %d)", self.name, size, self._max_frame)
                self.close(CloseReason.FRAME_TOO_LARGE)
                return
            if self._end - self._start < 4 + size:
                self._make_room(4 + size)
                return
            begin = self._start + 4
            with memoryview(buf) as view:  # one copy: slicing the bytearray would copy it twice
                self._queue.put_nowait(bytes(view[begin:begin + size]))
            self._start = begin + size
        if self._start == self._end:
            self._start = self._end = 0
        if self._queue.qsize() >= _MAX_QUEUED_FRAMES and not self._paused:
            self._paused = True
            self._transport.pause_reading()

    def eof_received(self) -> bool:
        return False

    # -- buffer management -------------------------------------------------------------
    def _make_room(self, needed: int) -> None:
        """Make ``needed`` bytes fit from the start of the unparsed tail.

        The event loop may still hold the memoryview ``get_buffer`` handed out (uvloop does,
        during ``buffer_updated``), so the bytearray is never resized in place: the tail moves
        within it, or into a new one.
        """
        pending = self._end - self._start
        size = len(self._buf)
        if needed > size or pending == size:
            grown = bytearray(max(needed, 2 * size))
            grown[:pending] = self._buf[self._start:self._end]
            self._buf = grown
        elif size > 4 * _INITIAL_BUFFER and needed <= _INITIAL_BUFFER and pending <= _INITIAL_BUFFER:
            small = bytearray(_INITIAL_BUFFER)  # give memory back after a large frame
            small[:pending] = self._buf[self._start:self._end]
            self._buf = small
        elif self._start:
            self._buf[:pending] = self._buf[self._start:self._end]
        self._start, self._end = 0, pending

    # -- request loop ------------------------------------------------------------------
    async def _serve(self) -> None:
        try:
            while True:
                frame = await self._queue.get()
                if self._paused and self._queue.qsize() < _MAX_QUEUED_FRAMES // 2:
                    self._paused = False
                    self._transport.resume_reading()
                response = await self._handler(frame)
                if response is not None:
                    await self._write(response)
        except asyncio.CancelledError:
            pass
        except ConnectionClosed as e:
            log.info("closing %s: %s", self.name, e)
            self.close(CloseReason.BAD_FRAME)
        except Exception:
            log.exception("closing %s after an unexpected error", self.name)
            self.close(CloseReason.BAD_FRAME)

    async def _write(self, pieces: Iterable[Piece]) -> None:
        """Consecutive bytes and small file regions go out in one writev: a write per piece
        cost a syscall and a wake-up of the peer each (a fetch response has five pieces)."""
        transport = self._transport
        gathered: list[bytes | bytearray | memoryview] = []
        for piece in pieces:
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
                self._send_file(piece)
        if gathered and not transport.is_closing():
            transport.writelines(gathered)
        await self._writable.wait()

    def _send_file(self, region: FileRegion) -> None:
        position, remaining = region.position, region.size
        if self._sock_fd >= 0 and self._transport.get_write_buffer_size() == 0:
            try:
                while remaining:
                    sent = os.sendfile(self._sock_fd, region.fd, position, remaining)
                    if sent == 0:
                        break
                    position += sent
                    remaining -= sent
            except (BlockingIOError, InterruptedError):
                pass
        if remaining:  # socket full: the transport buffers the rest, in order
            self._transport.write(os.pread(region.fd, remaining, position))

    def close(self, reason: CloseReason) -> None:
        self.close_reason = reason
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()


class ConnectionClosed(Exception):
    """Raised by a handler to close the connection (malformed or unsupported request)."""
