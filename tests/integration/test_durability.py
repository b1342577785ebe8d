"""Data survives restarts and crashes: offsets unchanged, torn tails truncated."""

import os
import random
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.dev.waiting import wait_until


def _produce(bootstrap, topic, count, prefix="v", **conf):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for i in range(count):
        p.produce(topic, key=str(i % 17).encode(), value=f"{prefix}-{i}".encode())
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def read_all(bootstrap, topic, partitions, deadline_s=60):
    """{partition: [(offset, value)]} up to each partition's high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "durability", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = {p: [] for p in range(partitions)}
    at_eof = set()
    deadline = time.monotonic() + deadline_s
    while len(at_eof) < partitions and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == -191:  # _PARTITION_EOF
                at_eof.add(msg.partition())
            continue
        at_eof.discard(msg.partition())
        out[msg.partition()].append((msg.offset(), msg.value()))
    c.close()
    assert len(at_eof) == partitions, "did not reach the end of every partition"
    return out


def test_restart_every_broker_keeps_data_and_offsets(cluster):
    cluster.create_topic("durable", partitions=3)
    _produce(cluster.bootstrap, "durable", 6000)
    before = read_all(cluster.bootstrap, "durable", 3)
    assert sum(len(v) for v in before.values()) == 6000
    for broker_id in cluster.brokers:
        cluster.run("kill", str(broker_id), "--graceful")
        cluster.run("start", str(broker_id))
    cluster.wait_for_leaders("durable", 3)
    assert read_all(cluster.bootstrap, "durable", 3) == before


def test_kill9_mid_stream_and_torn_tail_recovers(cluster):
    cluster.create_topic("torn", partitions=1)
    leader = cluster.leader_id("torn", 0)
    errors, delivered = [], []
    stop = threading.Event()

    def on_delivery(err, _msg):
        (errors if err else delivered).append(err)

    def stream():
        p = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 1, "message.timeout.ms": 60000,
                      "retries": 1000000})
        i = 0
        while not stop.is_set():
            try:
                p.produce("torn", value=f"r-{i}".encode(), on_delivery=on_delivery)
            except BufferError:   # the leader is down and the queue full: wait for room, as producers do
                p.poll(0.1)
                continue
            p.poll(0)
            i += 1
            if i % 500 == 0:
                time.sleep(0.01)
        p.flush(60)

    t = threading.Thread(target=stream)
    t.start()
    wait_until(lambda: len(delivered) >= 2000, 60, "records acknowledged before the kill")
    cluster.run("kill", str(leader))  # SIGKILL
    segment = max((cluster.data_dir / f"broker-{leader}" / "torn-0").glob("*.log"))
    size = segment.stat().st_size
    cut = random.Random(size).randrange(max(size - 5000, 1), size) if size > 1 else 0
    os.truncate(segment, cut)
    cluster.run("start", str(leader))
    cluster.wait_for_leaders("torn", 1)
    resumed = len(delivered)
    wait_until(lambda: len(delivered) >= resumed + 2000, 90, "records acknowledged after the restart")
    stop.set()
    t.join(90)
    assert not t.is_alive() and not errors, errors[:3]
    data = read_all(cluster.bootstrap, "torn", 1)[0]
    offsets = [o for o, _ in data]
    assert offsets == list(range(len(offsets))), "offsets must be dense and continue after recovery"
    assert all(v.startswith(b"r-") for _, v in data)
