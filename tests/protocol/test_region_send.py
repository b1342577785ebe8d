"""File regions larger than the socket's send buffer, through a real listener on both event loops:
sent whole and in order with one writability watch per region, from descriptors that stay
valid while the response waits (retention may close a segment meanwhile), and a client that
leaves in the middle of one costs no descriptor and no error; over TLS, through the transport."""

import asyncio
import contextlib
import logging
import os
import socket
import ssl
import struct
import threading
import time

import pytest

from odradek.protocol.connection import FileRegion, KafkaConnection
from tests.support.descriptors import descriptors_on, target
from tests.support.loop_thread import stop_server_loop

SEND_BUFFER = 64 * 1024
FIRST, SECOND = 1_500_000, 1_100_000   # the two regions of each response: both wait for the socket


def _wait_for(condition, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


class _Server:
    """A listener whose handler answers a 4-byte request id with: size, id, ``FIRST`` bytes of
    file A, a marker, ``SECOND`` bytes of file B, a trailer. Right after the handler returns
    (the response waiting for the socket in its first region), file B's descriptor is closed and
    its number reused by file C (what retention closing a segment could do), unless
    ``reuse`` is off. Counts the writability watches the loop is asked for."""

    def __init__(self, loop: asyncio.AbstractEventLoop, tmp_path) -> None:
        self.loop = loop
        self.a, self.b, self.c = (os.urandom(2 << 20) for _ in range(3))
        self.paths = []
        for name, data in zip("abc", (self.a, self.b, self.c)):
            path = tmp_path / name
            path.write_bytes(data)
            self.paths.append(path)
        self.fd_a = os.open(self.paths[0], os.O_RDONLY)
        self.watches = 0
        self.connections: list[KafkaConnection] = []
        self.reuse = True
        self.reused: list[int] = []   # closed at the end
        add_writer = loop.add_writer

        def counting_add_writer(fd, callback, *args):
            self.watches += 1
            return add_writer(fd, callback, *args)
        loop.add_writer = counting_add_writer

    def expected(self, request_id: int) -> bytes:
        body = (struct.pack(">i", request_id) + self.a[7:7 + FIRST] + b"--marker--"
                + self.b[3:3 + SECOND] + b"trailer")
        return struct.pack(">i", len(body)) + body

    async def handle(self, frame):
        fd_b = os.open(self.paths[1], os.O_RDONLY)
        if self.reuse:
            self.loop.call_soon(self._reuse_number, fd_b)
        else:
            self.loop.call_soon(os.close, fd_b)
        size = 4 + FIRST + 10 + SECOND + 7
        return [struct.pack(">i", size) + bytes(frame[:4]), FileRegion(self.fd_a, 7, FIRST), b"--marker--",
                FileRegion(fd_b, 3, SECOND), b"trailer"]

    def _reuse_number(self, fd_b: int) -> None:
        fd_c = os.open(self.paths[2], os.O_RDONLY)
        os.dup2(fd_c, fd_b)   # fd_b's number now reads file C: the response must not send its bytes
        os.close(fd_c)
        self.reused.append(fd_b)

    def connection(self) -> KafkaConnection:
        server = self

        class SmallBuffer(KafkaConnection):
            def connection_made(self, transport) -> None:
                transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
                server.connections.append(self)
                super().connection_made(transport)
        return SmallBuffer(self.handle, max_frame_bytes=1024)


@contextlib.contextmanager
def _serving(loop_kind: str, tmp_path, tls: ssl.SSLContext | None = None):
    if loop_kind == "uvloop":
        import uvloop

        class CountingLoop(uvloop.Loop):   # uvloop's own methods cannot be replaced on an instance
            pass
        loop = CountingLoop()
    else:
        loop = asyncio.new_event_loop()
    srv = _Server(loop, tmp_path)
    listener = loop.run_until_complete(loop.create_server(srv.connection, "127.0.0.1", 0, ssl=tls))
    srv.port = listener.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        stop_server_loop(loop, listener, thread)
        for fd in (srv.fd_a, *srv.reused):
            os.close(fd)


@pytest.fixture(params=["asyncio", "uvloop"])
def server(request, tmp_path):
    with _serving(request.param, tmp_path) as srv:
        yield srv


def _connect(port: int, tls: ssl.SSLContext | None = None) -> socket.socket:
    """A small receive window: the responses cannot all fit in flight, each region waits."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.settimeout(30)
    sock.connect(("127.0.0.1", port))
    return tls.wrap_socket(sock, server_hostname="localhost") if tls is not None else sock


def _read_slowly(sock: socket.socket, n: int) -> bytes:
    """A reader slower than the broker: small reads, so the socket fills and drains many times."""
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(min(32 * 1024, n - len(out)))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)


def test_pipelined_responses_arrive_whole_in_order_from_one_watch_per_region(server):
    with _connect(server.port) as sock:
        sock.sendall(b"".join(struct.pack(">ii", 4, i) for i in (1, 2, 3)))
        for i in (1, 2, 3):
            expected = server.expected(i)
            assert _read_slowly(sock, len(expected)) == expected
        # each response's regions waited for the socket (64 KiB buffers, 32 KiB reads): one watch
        # for each region at most, not one per wait (tens of them per region)
        assert 0 < server.watches <= 6


def test_a_client_gone_mid_region_closes_quietly_and_keeps_no_descriptor(server, caplog):
    server.reuse = False
    with caplog.at_level(logging.DEBUG, logger="odradek.protocol.connection"):
        sock = _connect(server.port)
        sock.sendall(struct.pack(">ii", 4, 1))
        assert len(sock.recv(64 * 1024)) > 0   # the response has started: its region waits for the socket
        _wait_for(lambda: server.watches == 1, "the first region's watch")
        accepted = target(server.connections[0]._sock_fd)
        assert descriptors_on(accepted) == 2   # the transport's socket and the watched duplicate
        assert descriptors_on(*server.paths) >= 2   # file A's own descriptor and the region's duplicate
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()   # a reset in the middle of the region
        _wait_for(lambda: server.connections and server.connections[0].close_reason is not None,
                  "the connection to close")
        # the watched duplicate of the socket and the region's duplicate of the segment: closed
        _wait_for(lambda: descriptors_on(accepted) == 0 and descriptors_on(*server.paths) == 1,
                  "the broker's descriptors to be closed (all but file A's own)")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_over_tls_regions_go_through_the_transport_whole_and_in_order(loop_kind, tmp_path):
    import trustme
    ca = trustme.CA()
    server_tls, client_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH), ssl.create_default_context()
    ca.issue_cert("localhost").configure_cert(server_tls)
    ca.configure_trust(client_tls)
    with _serving(loop_kind, tmp_path, server_tls) as server, _connect(server.port, client_tls) as sock:
        sock.sendall(b"".join(struct.pack(">ii", 4, i) for i in (1, 2)))
        for i in (1, 2):
            expected = server.expected(i)
            assert _read_slowly(sock, len(expected)) == expected
        assert server.watches == 0   # no sendfile: the transport encrypts every byte
