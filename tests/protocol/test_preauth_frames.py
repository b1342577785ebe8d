"""Frames before authentication (``KafkaConnection.before_authentication``): capped at the limit
(a larger announced size closes the connection unread), kept out of the listener's memory pool,
read one at a time; after ``authentication_done`` the pool and ``max_frame_bytes`` apply."""

from __future__ import annotations

import asyncio
import socket
import struct

from odradek.protocol.connection import CloseReason, KafkaConnection
from odradek.protocol.memory_pool import MemoryPool

LIMIT = 1024


async def _serve(handler, pool: MemoryPool, authenticated: bool = False):
    """A listener whose connections start unauthenticated (LIMIT); returns (server, port, made)."""
    made: list[KafkaConnection] = []

    def factory() -> KafkaConnection:
        conn = KafkaConnection(lambda frame: handler(conn, frame), max_frame_bytes=1 << 20, pool=pool)
        if not authenticated:
            conn.before_authentication(LIMIT)
        made.append(conn)
        return conn
    server = await asyncio.get_running_loop().create_server(factory, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], made


async def _until(condition, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.005)


def _client(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.setblocking(False)
    return s


def test_an_oversized_frame_before_authentication_closes_the_connection_unread():
    async def main():
        pool = MemoryPool(10 << 20)
        handled = []

        async def handler(conn, frame):
            handled.append(frame)
        server, port, made = await _serve(handler, pool)
        loop = asyncio.get_running_loop()
        sock = _client(port)
        # announce 100 MiB and send a little of it: refused at the header, nothing reserved
        await loop.sock_sendall(sock, struct.pack(">i", 104857600) + b"x" * 4096)
        await _until(lambda: made and made[0].close_reason is not None)
        assert made[0].close_reason is CloseReason.PREAUTH_FRAME_TOO_LARGE
        assert pool.reserved == 0 and not handled
        assert await asyncio.wait_for(loop.sock_recv(sock, 1), 5) == b""   # closed by the server
        sock.close()
        server.close()
    asyncio.run(main())


def test_unauthenticated_frames_stay_out_of_the_pool_and_are_read_one_at_a_time():
    async def main():
        pool = MemoryPool(10 << 20)
        seen: list[tuple[int, int]] = []   # (frame size, pool reserved while it is handled)

        async def handler(conn, frame):
            seen.append((len(frame), pool.reserved))
            if frame[:1] == b"A":            # this request completes the authentication
                conn.authentication_done()
        server, port, made = await _serve(handler, pool)
        loop = asyncio.get_running_loop()
        sock = _client(port)
        small, auth, large = b"s" * 100, b"A" * 200, b"L" * (LIMIT * 8)   # large: over the pre-auth cap
        # pipelined in one write: the large frame is read only once "A" has been handled, so it is
        # judged by the authenticated rules (charged to the pool, up to max_frame_bytes)
        await loop.sock_sendall(sock, b"".join(struct.pack(">i", len(f)) + f for f in (small, auth, large)))
        await _until(lambda: len(seen) == 3)
        assert seen == [(100, 0), (200, 0), (len(large), len(large))]
        assert made[0].close_reason is None and pool.reserved == 0
        sock.close()
        server.close()
    asyncio.run(main())


def test_a_held_unauthenticated_frame_does_not_take_the_pool_from_authenticated_connections():
    async def main():
        pool = MemoryPool(64 << 10)
        got = asyncio.Event()

        async def handler(conn, frame):
            got.set()
        server, port, _ = await _serve(handler, pool)
        authed, authed_port, _ = await _serve(handler, pool, authenticated=True)
        loop = asyncio.get_running_loop()
        holder = _client(port)
        # the most an unauthenticated client may announce, held incomplete
        await loop.sock_sendall(holder, struct.pack(">i", LIMIT) + b"h" * (LIMIT - 1))
        client = _client(authed_port)
        await loop.sock_sendall(client, struct.pack(">i", 60 << 10) + b"p" * (60 << 10))
        await asyncio.wait_for(got.wait(), 5)   # a pool of 64 KiB still admits 60 KiB
        for s in (holder, client):
            s.close()
        server.close()
        authed.close()
    asyncio.run(main())
