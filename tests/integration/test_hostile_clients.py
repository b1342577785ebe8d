"""A broker under hostile and careless clients (issue 15, findings 4 and 5), on one broker of
its own (the limits are broker settings): request memory stays bounded while a normal client
keeps producing, connection limits hold, and ordinary disconnects, even in the middle of a
fetch response, log no ERROR."""

from __future__ import annotations

import datetime
import socket
import struct
import time

import pytest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

from odradek.dev.harness import start_cluster, stop_cluster
from odradek.dev.waiting import wait_until
from tests.support.kafka_wire import WireClient

MIB = 1024 * 1024
POOL = 100 * MIB                 # queued.max.request.bytes: the default
IDLE_MS = 6000                   # connections.max.idle.ms, small for the test (muted ones go too)
PER_IP = 80                      # max.connections.per.ip
HOSTILE, HOSTILE_FRAME = 50, 90 * MIB
SLACK = 48 * MIB                 # receive buffers (64 KiB a connection), allocator slack, Python objects


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("hostile"), brokers=1, extra=(
        "--config", f"connections.max.idle.ms={IDLE_MS}", "--config", f"max.connections.per.ip={PER_IP}"))
    c.log = c.data_dir / "logs" / "broker-1.log"
    c.address = c.bootstrap.split(",")[0]
    yield c
    stop_cluster(c, strict=False)


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def _connect(address: str, source: str = "127.0.0.1") -> socket.socket:
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))


def _closed_by_broker(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, TimeoutError):  # nothing to read: still open
        return False
    except ConnectionResetError:
        return True


def _produce(bootstrap: str, topic: str, count: int, size: int) -> int:
    """confluent-kafka, acks=all: how many records were acknowledged."""
    from confluent_kafka import Producer
    acked = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000})
    for i in range(count):
        p.produce(topic, b"v" * size, on_delivery=lambda err, msg: acked.append(err is None))
        p.poll(0)
    assert p.flush(60) == 0
    return sum(acked)


def test_hostile_frames_stay_within_the_pool_while_a_client_produces(broker):
    broker.create_topic("hostile-ok")
    pid = broker.pids["broker-1"]
    assert _produce(broker.bootstrap, "hostile-ok", 2000, 1000) == 2000  # warm up
    baseline = _rss(pid)
    hostile = [_connect(broker.address) for _ in range(HOSTILE)]
    for s in hostile:
        s.sendall(struct.pack(">i", HOSTILE_FRAME) + b"\0" * 1024)
    peak = baseline
    deadline = time.monotonic() + 4  # within connections.max.idle.ms: the muted connections stay
    acked = 0
    while time.monotonic() < deadline:
        for s in hostile:
            s.send(b"\0")  # a trickle: the admitted frame's connection is never idle
        acked += _produce(broker.bootstrap, "hostile-ok", 500, 1000)
        peak = max(peak, _rss(pid))
    for s in hostile:
        s.close()
    print(f"RSS baseline {baseline / MIB:.0f} MiB, peak {peak / MIB:.0f} MiB, {acked} records acknowledged")
    assert acked >= 500 and acked % 500 == 0
    assert peak < baseline + POOL + SLACK, (
        f"RSS {peak / MIB:.0f} MiB over {baseline / MIB:.0f} MiB + pool {POOL / MIB:.0f} MiB + {SLACK / MIB:.0f} MiB")


def test_a_frame_over_socket_request_max_bytes_closes_only_its_connection(broker):
    with _connect(broker.address) as bad, WireClient(broker.address) as good:
        bad.sendall(struct.pack(">i", 100 * MIB + 1) + b"\0" * 100)
        assert bad.recv(1) == b""
        assert good.request(18, 3, _api_versions()).error_code == 0


def test_max_connections_per_ip(broker):
    held = [_connect(broker.address) for _ in range(PER_IP + 5)]
    try:
        wait_until(lambda: sum(map(_closed_by_broker, held)) >= 5, 10, "connections beyond the limit closed")
        assert sum(not _closed_by_broker(s) for s in held) <= PER_IP
        with WireClient(broker.address, source="127.0.0.2") as other:  # another address has its own count
            assert other.request(18, 3, _api_versions()).error_code == 0
    finally:
        for s in held:
            s.close()


def test_an_idle_connection_is_closed_after_connections_max_idle_ms(broker):
    with _connect(broker.address) as idle:
        started = time.monotonic()
        idle.settimeout(IDLE_MS / 1000 * 3)
        assert idle.recv(1) == b""
        assert time.monotonic() - started >= IDLE_MS / 1000 * 0.9


def _api_versions():
    from kio.schema.api_versions.v3.request import ApiVersionsRequest
    return ApiVersionsRequest(client_software_name="t", client_software_version="1")


def _fetch_all(topic: str) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait=datetime.timedelta(milliseconds=0), min_bytes=1,
                        max_bytes=64 * MIB, isolation_level=0, session_id=0, session_epoch=-1,
                        topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
                            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                            log_start_offset=-1, partition_max_bytes=64 * MIB),)),),
                        forgotten_topics_data=(), rack_id="")


def test_disconnects_mid_fetch_and_many_clients_leaving_log_no_error(broker):
    broker.create_topic("hostile-big")
    assert _produce(broker.bootstrap, "hostile-big", 12000, 1000) == 12000  # ~12 MB to fetch
    for i in range(20):
        c = WireClient(broker.address)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.send_raw(c.encode(1, 12, _fetch_all("hostile-big")))
        if i % 2:
            c.sock.recv(4096)  # the response is streaming
        if i % 3:
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset
        c.close()
    from confluent_kafka import Consumer, TopicPartition
    for i in range(10):  # clients that come and go, some in the middle of a fetch
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "leaving",
                             "auto.offset.reset": "earliest", "fetch.max.bytes": 50 * MIB})
        consumer.assign([TopicPartition("hostile-big", 0, 0)])
        consumer.poll(0.3)
        consumer.close() if i % 2 else None
        del consumer
        assert _produce(broker.bootstrap, "hostile-ok", 1, 10) == 1
    assert _produce(broker.bootstrap, "hostile-ok", 10, 10) == 10
    stop_cluster(broker)  # the shutdown, with connections open, is part of what is checked
    text = broker.log.read_text(errors="replace")
    bad = [line for line in text.splitlines() if " ERROR " in line or "Task was destroyed" in line
           or "Traceback" in line]
    assert not bad, "\n".join(bad[:20])
