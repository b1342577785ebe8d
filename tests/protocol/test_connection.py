"""The Kafka listener's framing and version negotiation, over a real loopback socket."""

import asyncio
import io
import os
import socket
import struct

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.serial import entity_reader, entity_writer
from kio.index import load_response_schema

from odradek.broker.dispatch import Dispatcher
from odradek.protocol.connection import FileRegion, KafkaConnection
from tests.support.descriptors import descriptors_on, target
from tests.support.loop_thread import stop_server_loop


def _request(header_cls, header, body_cls, body) -> bytes:
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header)
    entity_writer(body_cls)(buf, body)
    payload = buf.getvalue()
    return struct.pack(">i", len(payload)) + payload


def _read_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", _recv_exact(sock, 4))[0]
    return _recv_exact(sock, size)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


@pytest.fixture(params=["asyncio", "uvloop"])
def server(request):
    """A listener with only ApiVersions, on its own loop thread (both event loops: uvloop
    keeps the receive buffer exported while calling buffer_updated)."""
    if request.param == "uvloop":
        import uvloop
        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    dispatcher = Dispatcher({})
    srv = loop.run_until_complete(loop.create_server(
        lambda: KafkaConnection(dispatcher, max_frame_bytes=1024 * 1024), "127.0.0.1", 0))
    port = srv.sockets[0].getsockname()[1]
    import threading
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    yield port

    stop_server_loop(loop, srv, t)


def _connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    return s


def _api_versions_v3(correlation_id=1):
    return _request(HeaderV2, HeaderV2(request_api_key=18, request_api_version=3, correlation_id=correlation_id,
                                       client_id="t"),
                    ApiVersionsV3, ApiVersionsV3(client_software_name="t", client_software_version="1"))


def _decode_api_versions(frame: bytes, version: int):
    view = memoryview(frame).toreadonly()
    schema = load_response_schema(18, version)
    header, n = entity_reader(schema.__header_schema__)(view, 0)
    return header, entity_reader(schema)(view, n)[0]


def test_api_versions_v3_lists_ranges(server):
    with _connect(server) as s:
        s.sendall(_api_versions_v3(7))
        header, body = _decode_api_versions(_read_frame(s), 3)
    assert header.correlation_id == 7
    assert body.error_code == ErrorCode.none
    assert {(k.api_key, k.min_version, k.max_version) for k in body.api_keys} == {(18, 0, 4)}


def test_unknown_api_versions_version_gets_error_35_with_v0_body(server):
    # librdkafka's fallback: error 35 + a v0 body with our ranges, then it retries at v0.
    request = bytearray(_api_versions_v3(9))
    struct.pack_into(">h", request, 6, 99)  # api_version = 99
    with _connect(server) as s:
        s.sendall(request)
        header, body = _decode_api_versions(_read_frame(s), 0)
        assert header.correlation_id == 9
        assert body.error_code == ErrorCode.unsupported_version
        assert [(k.api_key, k.max_version) for k in body.api_keys] == [(18, 4)]
        # the connection stays usable: a v0 retry works
        s.sendall(_request(HeaderV1, HeaderV1(request_api_key=18, request_api_version=0, correlation_id=10,
                                              client_id="t"), ApiVersionsV0, ApiVersionsV0()))
        frame = memoryview(_read_frame(s)).toreadonly()
        assert struct.unpack_from(">i", frame, 0)[0] == 10


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("frame", [
    struct.pack(">i", 2**31 - 1) + b"xx",                  # 2 GiB frame: refused without allocating
    struct.pack(">i", -5),                                  # negative size
    struct.pack(">i", 6) + b"\x00\x03\x00\x63\x00\x00",     # Metadata v99: unsupported version
    struct.pack(">i", 8) + b"\x03\xe7\x00\x00\x00\x00\x00\x01",  # unknown api key 999
    struct.pack(">i", 3) + b"abc",                          # shorter than a header
    struct.pack(">i", 10) + b"\x00\x12\x00\x03\x00\x00\x00\x01\xff\xff",  # garbage ApiVersions body
])
def test_bad_frames_close_only_that_connection(server, frame):
    with _connect(server) as bad, _connect(server) as good:
        bad.sendall(frame)
        assert _closed(bad)
        good.sendall(_api_versions_v3(3))
        assert struct.unpack_from(">i", _read_frame(good), 0)[0] == 3


def test_frames_split_across_reads_and_pipelined(server):
    data = b"".join(_api_versions_v3(i) for i in range(50))
    with _connect(server) as s:
        for i in range(0, len(data), 7):
            s.sendall(data[i:i + 7])
        ids = [struct.unpack_from(">i", _read_frame(s), 0)[0] for _ in range(50)]
    assert ids == list(range(50))


def test_frames_larger_than_the_buffer_grow_it(server):
    big = _request(HeaderV2, HeaderV2(request_api_key=18, request_api_version=3, correlation_id=77, client_id="t"),
                   ApiVersionsV3, ApiVersionsV3(client_software_name="x" * 300_000, client_software_version="1"))
    with _connect(server) as s:
        for _ in range(3):
            s.sendall(_api_versions_v3(1) + big + _api_versions_v3(2))
            ids = [struct.unpack_from(">i", _read_frame(s), 0)[0] for _ in range(3)]
            assert ids == [1, 77, 2]


class _OpenTransport:
    """Just what ``_send_file`` asks of a transport."""
    closed = False

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def test_a_peer_gone_during_sendfile_closes_quietly(tmp_path, caplog):
    import logging
    from odradek.protocol.connection import CloseReason
    path = tmp_path / "segment"
    path.write_bytes(b"x" * 200_000)
    ours, theirs = socket.socketpair()
    theirs.close()  # the client left while its fetch response was due: sendfile gets EPIPE
    fd = os.open(path, os.O_RDONLY)
    conn = KafkaConnection(Dispatcher({}), max_frame_bytes=1024)
    conn._transport, conn._sock_fd = _OpenTransport(), ours.fileno()
    with caplog.at_level(logging.DEBUG, logger="odradek.protocol.connection"):
        asyncio.run(conn._send_file(FileRegion(fd, 0, 200_000)))
    os.close(fd)
    ours.close()
    assert conn.close_reason is CloseReason.PEER_CLOSED and conn._transport.closed
    assert [r.levelname for r in caplog.records] == ["DEBUG"]


class _CountingTransport(_OpenTransport):
    """Writes what it is given to ``sock`` at once (blocking), counting the bytes."""
    written = 0

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def write(self, data) -> None:
        self.written += len(data)
        self.sock.setblocking(True)
        self.sock.sendall(data)
        self.sock.setblocking(False)


def test_a_region_larger_than_the_socket_buffer_goes_out_whole_by_sendfile(tmp_path):
    """The socket fills: the rest waits for it to drain and is sent by sendfile too (not read
    into memory and written through the transport, but for at most its last 64 KiB), in order,
    with a reader slower than us; one duplicate of the socket is watched over all the waits,
    closed with the connection."""
    import threading
    payload = os.urandom(3 << 20)
    path = tmp_path / "segment"
    path.write_bytes(b"HEAD" + payload)
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    ours.setblocking(False)
    got = bytearray()

    def read() -> None:
        while len(got) < len(payload):
            chunk = theirs.recv(256 * 1024)
            if not chunk:
                return
            got.extend(chunk)
    reader = threading.Thread(target=read)
    fd = os.open(path, os.O_RDONLY)
    conn = KafkaConnection(Dispatcher({}), max_frame_bytes=1024)
    conn._transport, conn._sock_fd = _CountingTransport(ours), ours.fileno()

    socket_link = target(ours.fileno())

    async def send() -> None:
        assert descriptors_on(socket_link) == 1
        await conn._send_file(FileRegion(fd, 4, len(payload)))
        assert descriptors_on(socket_link) == 2 and conn._watched_fd >= 0
        conn._close_watched()
        assert descriptors_on(socket_link) == 1
    try:
        reader.start()
        asyncio.run(asyncio.wait_for(send(), 60))
        reader.join(60)
    finally:
        os.close(fd)
        ours.close()
        theirs.close()
    assert bytes(got) == payload and conn._transport.written <= 64 * 1024
