"""A full disk under one broker of three (issue 15, findings 1 and 2), with real processes.

Broker 3's data directory is a small tmpfs. Filling it while an idempotent acks=all producer
runs (RF 3, min.insync.replicas 2): broker 3's next write fails with ENOSPC, its log
directory goes offline (KAFKA_STORAGE_ERROR), it reports a log directory event and exits;
leadership and the ISR move to brokers 1 and 2, the producer retries transparently, and
every acknowledged record is read back. Once space is freed broker 3 restarts cleanly and
rejoins the ISR. A start-up on the full disk exits non-zero, logs the cause, and
``odradek dev start`` says the broker failed.
"""

from __future__ import annotations

import threading
import time

import pytest

from odradek.dev.harness import Cluster, start_cluster, stop_cluster
from odradek.dev.waiting import wait_until
from tests.support.small_fs import fill, free, small_tmpfs

TOPIC, PARTITIONS, VICTIM = "disk-full", 3, 3
FS_MIB = 24


@pytest.fixture(scope="module")
def disk(tmp_path_factory):
    root = tmp_path_factory.mktemp("disk-full")
    with small_tmpfs(root / f"broker-{VICTIM}", FS_MIB) as fs:
        c = start_cluster(root, brokers=3, replication_factor=3, min_insync_replicas=2)
        try:
            c.create_topic(TOPIC, PARTITIONS, replication_factor=3)
            yield c, fs
        finally:
            stop_cluster(c, strict=False)


class Producer:
    """An idempotent acks=all producer in a thread, sending numbered records until stopped."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer as Rd
        self._p = Rd({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 5, "message.timeout.ms": 120_000})
        self.acked: set[int] = set()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _report(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.add(int(msg.key()))

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            try:
                self._p.produce(TOPIC, str(n).encode() * 100, key=str(n).encode(), on_delivery=self._report)
            except BufferError:
                self._p.poll(0.1)
                continue
            n += 1
            self._p.poll(0.002)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self._p.flush(150) == 0, "records still undelivered"


def isr(c: Cluster) -> dict[int, tuple[int, list[int]]]:
    parts = c.admin().list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
    return {p: (m.leader, sorted(m.isrs)) for p, m in parts.items()}


def broker_log(c: Cluster) -> str:
    return (c.data_dir / "logs" / f"broker-{VICTIM}.log").read_text(errors="replace")


def read_all(c: Cluster) -> set[int]:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "disk-full-check",
                         "enable.auto.commit": False})
    ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in range(PARTITIONS)}
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got, positions = set(), {p: 0 for p in range(PARTITIONS)}

    def caught_up() -> bool:
        for msg in consumer.consume(500, 1.0):
            if msg.error() is None:
                got.add(int(msg.key()))
                positions[msg.partition()] = msg.offset() + 1
        return all(positions[p] >= ends[p] for p in range(PARTITIONS))
    wait_until(caught_up, 120, "reading every partition to its end", 0)
    consumer.close()
    return got


def rejoined(c: Cluster) -> bool:
    return all(VICTIM in members for _, members in isr(c).values())


def test_full_disk_moves_leadership_loses_nothing_and_restarts_clean(disk):
    c, fs = disk
    producer = Producer(c.bootstrap)
    try:
        wait_until(lambda: len(producer.acked) >= 2000, 60, "2000 records acknowledged")
        fill(fs)
        wait_until(lambda: f"broker-{VICTIM}" not in c.pids, 60, f"broker {VICTIM} to exit on the full disk", 0.2)
        text = broker_log(c)
        assert "is offline" in text and "Shutdown broker because all log dirs" in text, text[-3000:]
        assert "after an unexpected error" not in text and "Traceback" not in text, text[-3000:]
        wait_until(lambda: all(leader in (1, 2) and VICTIM not in members for leader, members in isr(c).values()),
                   60, "leadership and ISRs to leave the broker with the full disk", 0.2)
        acked_then = len(producer.acked)
        wait_until(lambda: len(producer.acked) >= acked_then + 2000, 60, "producing to go on without broker 3")
    finally:
        producer.stop()
    assert not producer.errors, producer.errors[:5]
    free(fs)
    c.run("start", str(VICTIM))
    wait_until(lambda: rejoined(c), 90, f"broker {VICTIM} to rejoin every ISR", 0.5)
    assert producer.acked <= read_all(c), "acknowledged records lost"


def test_start_on_a_full_disk_fails_and_dev_start_says_so(disk):
    c, fs = disk
    c.run("kill", str(VICTIM))
    fill(fs)
    try:
        proc = c.run("start", str(VICTIM), check=False)
        assert proc.returncode != 0, proc.stdout
        assert "failed to start" in proc.stderr and "No space left on device" in proc.stderr, proc.stderr
        assert "cannot start" in broker_log(c)
    finally:
        free(fs)
    c.run("start", str(VICTIM))
    wait_until(lambda: rejoined(c), 90, f"broker {VICTIM} to rejoin every ISR", 0.5)
