"""The Kafka listener's limits (KIP-72 request memory, connection limits, idle connections) and
its shutdown, over real loopback sockets, with a listener that serves only ApiVersions."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading

import pytest
import uvloop

from odradek.broker.dispatch import Dispatcher
from odradek.dev.waiting import wait_until
from odradek.protocol.connection import KafkaConnection
from odradek.protocol.listener import KafkaListener, ListenerLimits
from odradek.protocol.memory_pool import MemoryPool
from tests.protocol.test_connection import _api_versions_v3, _closed, _read_frame

KIB, MIB = 1024, 1024 * 1024


class Running:
    """A listener on its own event-loop thread (uvloop, as the broker runs)."""

    def __init__(self, limits: ListenerLimits) -> None:
        self.loop = uvloop.new_event_loop()  # the broker's loop
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.listener = self.call(self._start, limits)

    async def _start(self, limits):
        listener = KafkaListener(limits)
        dispatcher = Dispatcher({})
        self.port = listener.listen("127.0.0.1", 0, lambda: KafkaConnection(
            dispatcher, max_frame_bytes=limits.socket_request_max_bytes))
        listener.start()
        return listener

    def call(self, fn, *args):
        return asyncio.run_coroutine_threadsafe(fn(*args), self.loop).result(10)

    def pool(self) -> tuple[int, int]:
        """(bytes reserved, connections waiting for memory)"""
        async def read():
            return self.listener.pool.reserved, self.listener.pool.waiting
        return self.call(read)

    def stop(self) -> None:
        self.call(self.listener.stop)
        tasks = self.call(_pending_tasks)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()
        assert tasks == [], f"tasks left after stop: {tasks}"


async def _pending_tasks():
    return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]


@pytest.fixture
def listen():
    started: list[Running] = []

    def start(**limits) -> Running:
        r = Running(ListenerLimits(**limits))
        started.append(r)
        return r
    yield start
    for r in started:
        r.stop()


def _connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))


def _answers(sock: socket.socket, correlation_id: int = 5) -> bool:
    sock.sendall(_api_versions_v3(correlation_id))
    return struct.unpack_from(">i", _read_frame(sock), 0)[0] == correlation_id


def test_pool_is_strict_but_admits_a_lone_frame_larger_than_itself():
    pool = MemoryPool(100)
    assert pool.try_reserve(60) and not pool.try_reserve(50) and pool.try_reserve(40)
    woken = []
    pool.wait("a", 70, lambda: woken.append("a") or pool.try_reserve(70))
    pool.release(60)
    assert woken == [] and pool.reserved == 40
    pool.release(40)
    assert woken == ["a"] and pool.reserved == 70
    pool.release(70)
    assert pool.try_reserve(500) and not pool.try_reserve(1)
    assert MemoryPool(-1).try_reserve(10**12)


def test_announced_frames_wait_for_memory_while_small_requests_are_served(listen):
    r = listen(queued_max_request_bytes=4 * MIB, socket_request_max_bytes=8 * MIB)
    hostile = [_connect(r.port) for _ in range(6)]
    for s in hostile:  # 3 MiB each: one admitted, the others muted before any allocation
        s.sendall(struct.pack(">i", 3 * MIB) + b"\0" * KIB)
    wait_until(lambda: r.pool() == (3 * MIB, 5), 5, "one large frame admitted, five waiting")
    with _connect(r.port) as good:
        for i in range(20):
            assert _answers(good, i)
    assert r.pool() == (3 * MIB, 5)
    hostile[0].close()  # its reservation goes to the next waiting frame
    wait_until(lambda: r.pool() == (3 * MIB, 4), 5, "the next frame admitted")
    for s in hostile[1:]:
        s.close()
    wait_until(lambda: r.pool() == (0, 0), 5, "every reservation released")


def test_a_frame_larger_than_the_receive_buffer_is_served_once_admitted(listen):
    from tests.protocol.test_connection import _request, HeaderV2, ApiVersionsV3
    big = _request(HeaderV2, HeaderV2(request_api_key=18, request_api_version=3, correlation_id=9, client_id="t"),
                   ApiVersionsV3, ApiVersionsV3(client_software_name="x" * 300_000, client_software_version="1"))
    r = listen(queued_max_request_bytes=200_000)  # smaller than the frame: admitted alone
    with _connect(r.port) as s:
        for i in range(0, len(big), 50_000):
            s.sendall(big[i:i + 50_000])
        assert struct.unpack_from(">i", _read_frame(s), 0)[0] == 9
        assert _answers(s)
    wait_until(lambda: r.pool() == (0, 0), 5, "the frame's memory released")


def test_frames_over_socket_request_max_bytes_close_only_that_connection(listen):
    r = listen(socket_request_max_bytes=MIB)
    with _connect(r.port) as bad, _connect(r.port) as good:
        bad.sendall(struct.pack(">i", MIB + 1) + b"\0" * 100)
        assert _closed(bad)
        assert _answers(good)
    assert r.pool() == (0, 0)


def test_max_connections_per_ip_closes_new_connections_beyond_it(listen):
    r = listen(max_connections_per_ip=3)
    first = [_connect(r.port) for _ in range(3)]
    assert all(_answers(s) for s in first)
    with _connect(r.port) as extra:
        assert _closed(extra)
    with _connect(r.port, source="127.0.0.2") as other_address:
        assert _answers(other_address)
    first[0].close()
    wait_until(lambda: r.listener.connections == 2, 5, "the closed connection forgotten")
    with _connect(r.port) as again:
        assert _answers(again)
    for s in first[1:]:
        s.close()


def test_max_connections_per_ip_overrides_set_other_counts_for_given_addresses(listen):
    r = listen(max_connections_per_ip=1, max_connections_per_ip_overrides={"127.0.0.2": 2})
    with _connect(r.port) as one, _connect(r.port) as extra:
        assert _answers(one) and _closed(extra)
    with _connect(r.port, source="127.0.0.2") as a, _connect(r.port, source="127.0.0.2") as b:
        assert _answers(a) and _answers(b)
        with _connect(r.port, source="127.0.0.2") as third:
            assert _closed(third)


def test_max_connections_makes_new_connections_wait(listen):
    r = listen(max_connections=2)
    held = [_connect(r.port) for _ in range(2)]
    assert all(_answers(s) for s in held)
    waiting = _connect(r.port)  # the kernel completes the handshake; the listener does not accept
    waiting.sendall(_api_versions_v3(8))
    waiting.settimeout(0.5)
    with pytest.raises(socket.timeout):
        waiting.recv(1)
    held[0].close()
    waiting.settimeout(5)
    assert struct.unpack_from(">i", _read_frame(waiting), 0)[0] == 8
    for s in (waiting, *held[1:]):
        s.close()


def test_idle_connections_are_closed_after_connections_max_idle_ms(listen):
    r = listen(connections_max_idle_ms=300)
    with _connect(r.port) as idle, _connect(r.port) as busy:
        for i in range(8):  # one request every 100 ms keeps `busy` open
            assert _answers(busy, i)
            threading.Event().wait(0.1)
        assert _closed(idle)
        assert _answers(busy)


def test_stop_closes_connections_and_leaves_no_task():
    r = Running(ListenerLimits())
    socks = [_connect(r.port) for _ in range(5)]
    assert all(_answers(s) for s in socks)
    socks[0].sendall(struct.pack(">i", 1000) + b"\0" * 10)  # a frame half read
    r.stop()  # asserts that no task is left
    assert all(_closed(s) for s in socks)
    for s in socks:
        s.close()


def test_accepted_connections_get_the_send_buffer_asked(listen):
    """``socket.send.buffer.bytes`` is each accepted socket's SO_SNDBUF (the kernel caps it at
    net.core.wmem_max and doubles it); -1 leaves the OS default (autotuned: any size)."""
    wmem_max = int(open("/proc/sys/net/core/wmem_max").read())
    for asked in (256 * KIB, 3 * MIB, -1):
        r = listen(socket_send_buffer_bytes=asked)
        with _connect(r.port) as client:
            assert _answers(client)

            async def send_buffers():
                return [c._transport.get_extra_info("socket").getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
                        for c in r.listener._connections]
            (got,) = r.call(send_buffers)
        assert got == 2 * min(asked, wmem_max) if asked > 0 else got > 0
