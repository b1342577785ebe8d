"""A real local cluster (ZooKeeper + controller + 3 brokers, as processes) for integration tests.

``cluster`` (module scope) runs ``odradek dev up --detach --kafka-port 0 --brokers 3`` into a
fresh data directory and tears it down with ``odradek dev down``; afterwards every process the
cluster ever recorded (PID *and* start time, so a reused PID is never signalled) must be gone,
else it is killed by PID and the teardown fails.

``dataset`` gives the record generator and the verifier the client acceptance tests share.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import pytest

from odradek.dev import processes
from odradek.dev.processes import ProcessRecord
from tests.conftest import wait_until

START_TIMEOUT_S = 120
COMMAND_TIMEOUT_S = 120


def _log_tails(data_dir: Path, lines: int = 30) -> str:
    out = []
    for log in sorted((data_dir / "logs").glob("*.log")):
        text = log.read_text(errors="replace").splitlines()[-lines:]
        out.append(f"--- {log} (last {len(text)} lines)\n" + "\n".join(text))
    return "\n".join(out)


@dataclass
class Cluster:
    data_dir: Path
    bootstrap: str = ""
    brokers: dict[int, str] = field(default_factory=dict)
    gateway: str | None = None                      # the HTTP gateway's URL, if started
    _seen: dict[tuple[int, int], ProcessRecord] = field(default_factory=dict)

    # -- the odradek CLI -------------------------------------------------------------------
    def run(self, *args: str, check: bool = True, timeout: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess:
        """``odradek dev <args> --data-dir DIR``; raises with the output (and log tails) on failure."""
        argv = [sys.executable, "-m", "odradek.cli", "dev", *args, "--data-dir", str(self.data_dir)]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        self._remember_processes()
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {proc.returncode}\nstdout:\n{proc.stdout}\n"
                                 f"stderr:\n{proc.stderr}\n{_log_tails(self.data_dir)}")
        return proc

    def status(self) -> dict:
        return json.loads(self.run("status", "--json").stdout)

    @property
    def pids(self) -> dict[str, int]:
        """Live processes by name (``broker-1``, ``controller-0``, ``zookeeper``), read afresh."""
        return self.status()["pids"]

    def refresh(self) -> None:
        st = self.status()
        self.bootstrap = st["bootstrap_servers"]
        self.brokers = {int(k): v for k, v in st["brokers"].items()}
        self.gateway = st.get("gateway")

    def _remember_processes(self) -> None:
        state = self.data_dir / "cluster.json"
        try:
            recs = json.loads(state.read_text()).get("processes", {}).values()
        except (OSError, ValueError):
            return
        for r in recs:
            rec = ProcessRecord.from_json(r)
            self._seen[(rec.pid, rec.start_time)] = rec

    def leftovers(self) -> list[ProcessRecord]:
        self._remember_processes()
        return [rec for rec in self._seen.values() if processes.alive(rec)]

    # -- Kafka-side helpers (confluent-kafka's AdminClient / metadata) ----------------------
    def admin(self):
        from confluent_kafka.admin import AdminClient
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: dict[str, str] | None = None, timeout: float = 60.0) -> None:
        """CreateTopics, then wait until Metadata shows every partition with a leader."""
        from confluent_kafka.admin import NewTopic
        admin = self.admin()  # keep the handle alive until the future resolves
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                      config=dict(config or {}))], operation_timeout=timeout, request_timeout=timeout)
        futures[name].result(timeout=timeout)
        self.wait_for_leaders(name, partitions, timeout=timeout)

    def partition_leaders(self, topic: str) -> dict[int, int]:
        """{partition: leader broker id} from a fresh Metadata request (-1 = no leader)."""
        md = self.admin().list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            return {}
        return {p.id: (p.leader if p.error is None else -1) for p in t.partitions.values()}

    def wait_for_leaders(self, topic: str, partitions: int, timeout: float = 60.0) -> dict[int, int]:
        def ready():
            leaders = self.partition_leaders(topic)
            return leaders if (len(leaders) == partitions and all(l >= 0 for l in leaders.values())) else None
        return wait_until(ready, timeout, f"a leader for each of {partitions} partitions of {topic!r}", 0.2)

    def leader_id(self, topic: str, partition: int) -> int:
        return self.partition_leaders(topic)[partition]

    def leader_address(self, topic: str, partition: int) -> str:
        md = self.admin().list_topics(topic, timeout=10)
        broker = md.brokers[md.topics[topic].partitions[partition].leader]
        return f"{broker.host}:{broker.port}"


def start_cluster(data_dir: Path, brokers: int = 3, extra: tuple[str, ...] = (),
                  replication_factor: int = 1, min_insync_replicas: int = 1, gateway: bool = False) -> Cluster:
    """A dev cluster; tests choose each topic's RF, so the defaults are single-replica here
    (``odradek dev up`` itself defaults to RF 3 with min.insync.replicas 2). The HTTP gateway
    only when asked for (on a free port)."""
    c = Cluster(data_dir=data_dir)
    extra = ("--replication-factor", str(replication_factor), "--min-insync-replicas", str(min_insync_replicas),
             *(("--gateway-port", "0") if gateway else ("--no-gateway",)), *extra)
    try:
        c.run("up", "--detach", "--kafka-port", "0", "--brokers", str(brokers), *extra,
              timeout=START_TIMEOUT_S)
        c.refresh()
        assert len(c.brokers) == brokers, c.brokers
    except BaseException:
        stop_cluster(c, strict=False)
        raise
    return c


def stop_cluster(c: Cluster, strict: bool = True) -> None:
    """``odradek dev down``, then kill (by PID, never by name) whatever it left behind."""
    problems = []
    try:
        proc = c.run("down", check=False)
        if proc.returncode != 0:
            problems.append(f"`odradek dev down` exited {proc.returncode}: {proc.stderr.strip()}")
    except subprocess.TimeoutExpired:
        problems.append("`odradek dev down` timed out")
    left = c.leftovers()
    for rec in left:
        try:
            os.kill(rec.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for rec in left:
        try:
            wait_until(lambda: not processes.alive(rec), 10, f"{rec.name} (pid {rec.pid}) to die after SIGKILL")
        except TimeoutError as e:
            problems.append(str(e))
    if left:
        problems.append("left running after `odradek dev down` (killed by PID): "
                        + ", ".join(f"{r.name} pid {r.pid}" for r in left))
    if strict and problems:
        raise AssertionError("; ".join(problems))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("cluster"), brokers=3)
    yield c
    stop_cluster(c)


# -- records shared by the client acceptance tests ---------------------------------------------

@dataclass(frozen=True)
class Sent:
    index: int           # position in produce order
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int       # ms, CreateTime


@dataclass(frozen=True)
class Got:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int
    create_time: bool    # timestamp type is CreateTime


def make_records(count: int, keys: int = 997, seed: int = 1) -> list[Sent]:
    """``count`` keyed records: values start with ``<index>:<per-key seq>|`` then random bytes
    (not UTF-8); every third record has headers (a repeated key, a non-ASCII key, an empty value);
    timestamps are explicit, in the last hour and deliberately not monotonic."""
    rng = random.Random(seed)
    base_ms = int(time.time() * 1000) - 3_600_000
    key_names = [f"key-{k:04d}".encode() + rng.randbytes(k % 4) for k in range(keys)]
    seq: dict[bytes, int] = defaultdict(int)
    out = []
    for i in range(count):
        key = key_names[rng.randrange(keys)]
        s = seq[key]
        seq[key] += 1
        value = f"{i}:{s}|".encode() + rng.randbytes(rng.randrange(0, 120))
        headers: tuple[tuple[str, bytes], ...] = ()
        if i % 3 == 0:
            headers = (("trace", rng.randbytes(8)), ("seq", str(s).encode()), ("trace", b"second"),
                       ("ключ", "значение".encode()), ("empty", b""))
        out.append(Sent(i, key, value, headers, base_ms + (i * 7919) % 600_000))
    return out


def _seqs(value: bytes) -> tuple[int, int]:
    head = value.split(b"|", 1)[0]
    index, seq = head.split(b":")
    return int(index), int(seq)


def verify(sent: list[Sent], got: list[Got], delivered_partition: dict[int, int] | None = None) -> None:
    """Everything produced came back exactly once, byte-identical, in order.

    ``got`` must be in consumption order. ``delivered_partition`` (index -> partition from the
    producer's delivery reports, for those it has) must agree with where records were read."""
    by_index = {s.index: s for s in sent}
    assert len(got) == len(sent), f"consumed {len(got)} records, produced {len(sent)}"
    seen: set[int] = set()
    per_partition: dict[int, list[Got]] = defaultdict(list)
    key_partition: dict[bytes, int] = {}
    mismatches = []
    for g in got:
        index, _ = _seqs(g.value or b"-1:-1|")
        s = by_index.get(index)
        assert s is not None, f"consumed a record that was never produced: {g!r}"
        assert index not in seen, f"record {index} consumed twice (partition {g.partition} offset {g.offset})"
        seen.add(index)
        if (g.key, g.value, g.headers, g.timestamp, g.create_time) != (s.key, s.value, s.headers, s.timestamp, True):
            mismatches.append((s, g))
        per_partition[g.partition].append(g)
        p = key_partition.setdefault(s.key, g.partition)
        assert p == g.partition, f"key {s.key!r} landed on partitions {p} and {g.partition}"
        if index in (delivered_partition or {}):
            assert delivered_partition[index] == g.partition, (
                f"record {index} was acknowledged on partition {delivered_partition[index]} "
                f"but read from {g.partition}")
    assert not mismatches, (f"{len(mismatches)} records differ, first: sent {mismatches[0][0]!r} "
                            f"got {mismatches[0][1]!r}")
    for partition, records in per_partition.items():
        offsets = [g.offset for g in records]
        assert offsets == list(range(len(offsets))), (
            f"partition {partition}: offsets not dense from 0 in consumption order: "
            f"first bad at {next(i for i, o in enumerate(offsets) if o != i)}")
        indices = [_seqs(g.value)[0] for g in records]
        assert indices == sorted(indices), f"partition {partition}: records out of produce order"
        last_seq: dict[bytes, int] = {}
        for g in records:
            _, s = _seqs(g.value)
            assert s > last_seq.get(g.key, -1), f"key {g.key!r}: seq {s} after {last_seq[g.key]}"
            last_seq[g.key] = s


# -- produce and consume with each client (delivery reports / consumed records) -----------------

PRODUCE_TIMEOUT_S = 120
CONSUME_TIMEOUT_S = 120


def confluent_produce(bootstrap: str, topic: str, records: list[Sent], **conf) -> dict[int, int]:
    """Produce with librdkafka (retries off); {index: partition} from the delivery reports."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "retries": 0,
                         "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 2 * len(records) + 10,
                         "message.timeout.ms": PRODUCE_TIMEOUT_S * 1000, **conf})
    delivered: dict[int, int] = {}
    errors: list = []

    for s in records:
        def cb(err, msg, index=s.index):
            if err is not None:
                errors.append((index, err))
            else:
                delivered[index] = msg.partition()
        while True:
            try:
                producer.produce(topic, key=s.key, value=s.value, headers=list(s.headers) or None,
                                 timestamp=s.timestamp, on_delivery=cb)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(PRODUCE_TIMEOUT_S) == 0, "records still queued after the flush deadline"
    assert not errors, f"{len(errors)} delivery errors, first: {errors[0]}"
    assert len(delivered) == len(records)
    return delivered


def confluent_consume(bootstrap: str, topic: str, partitions: int, expected: int) -> tuple[list[Got], int]:
    """assign() every partition at OFFSET_BEGINNING and read until ``expected`` records (plus a
    last look for extras); returns (records in consumption order, sum of high watermarks)."""
    from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, Consumer, KafkaError, TopicPartition
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",  # required by librdkafka, never joined
        "enable.auto.commit": False, "enable.auto.offset.store": False, "auto.offset.reset": "error",
        "fetch.max.bytes": 50 * 1024 * 1024, "max.partition.fetch.bytes": 8 * 1024 * 1024})
    got: list[Got] = []
    errors = []

    def consume(timeout):
        for m in consumer.consume(num_messages=10_000, timeout=timeout):
            if m.error() is not None:
                if m.error().code() != KafkaError._PARTITION_EOF:
                    errors.append(m.error())
                continue
            ts_type, ts = m.timestamp()
            got.append(Got(m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()), ts,
                           ts_type == TIMESTAMP_CREATE_TIME))
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while len(got) < expected and time.monotonic() < deadline and not errors:
            consume(0.5)
        consume(1.0)  # anything beyond the expected count (there must be nothing)
        high = sum(high_watermark(consumer, topic, p) for p in range(partitions))
    finally:
        consumer.close()
    assert not errors, f"consumer errors: {errors[:5]}"
    return got, high


def high_watermark(consumer, topic: str, partition: int, timeout: float = 30.0) -> int:
    """librdkafka does not retry an offset query that meets a leader move (a preferred-leader
    election, a restart): a Kafka client would refresh its metadata and ask again, so this does."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition
    deadline = time.monotonic() + timeout
    while True:
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
        except KafkaException as e:
            moved = e.args[0].code() in (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)
            if not moved or time.monotonic() > deadline:
                raise
            consumer.list_topics(topic, timeout=10)
            time.sleep(0.2)


def kafka_python_produce(bootstrap: str, topic: str, records: list[Sent], **conf) -> dict[int, int]:
    from kafka import KafkaProducer
    producer = KafkaProducer(**{"bootstrap_servers": bootstrap.split(","), "enable_idempotence": False,
                                "retries": 0, "linger_ms": 20, "batch_size": 512 * 1024,
                                "max_request_size": 4 * 1024 * 1024, "request_timeout_ms": 60_000, **conf})
    try:
        futures = [producer.send(topic, key=s.key, value=s.value, headers=list(s.headers),
                                 timestamp_ms=s.timestamp) for s in records]
        producer.flush(timeout=PRODUCE_TIMEOUT_S)
    finally:
        producer.close(timeout=30)
    failed = [(i, f.exception) for i, f in enumerate(futures) if not f.is_done or f.failed()]
    assert not failed, f"{len(failed)} sends failed or unfinished, first: {failed[0]}"
    return {s.index: f.value.partition for s, f in zip(records, futures)}


def kafka_python_consume(bootstrap: str, topic: str, partitions: int, expected: int) -> tuple[list[Got], int]:
    """assign + seek_to_beginning (no group); CRCs checked by the client."""
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=None, enable_auto_commit=False,
                             auto_offset_reset="none", fetch_max_bytes=50 * 1024 * 1024,
                             max_partition_fetch_bytes=8 * 1024 * 1024, check_crcs=True)
    got: list[Got] = []

    def poll(timeout_ms):
        for batch in consumer.poll(timeout_ms=timeout_ms, max_records=20_000).values():
            got.extend(Got(r.partition, r.offset, r.key, r.value, tuple((k, v) for k, v in r.headers),
                           r.timestamp, r.timestamp_type == 0) for r in batch)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while len(got) < expected and time.monotonic() < deadline:
            poll(500)
        poll(1000)  # anything beyond the expected count (there must be nothing)
        high = sum(consumer.end_offsets(tps).values())
    finally:
        consumer.close()
    return got, high


def aiokafka_produce(bootstrap: str, topic: str, records: list[Sent], **conf) -> dict[int, int]:
    return asyncio.run(asyncio.wait_for(_aiokafka_send(bootstrap, topic, records, conf), PRODUCE_TIMEOUT_S))


def aiokafka_consume(bootstrap: str, topic: str, partitions: int, expected: int) -> tuple[list[Got], int]:
    return asyncio.run(asyncio.wait_for(_aiokafka_read(bootstrap, topic, partitions, expected),
                                        CONSUME_TIMEOUT_S + 30))


async def _aiokafka_send(bootstrap, topic, records, conf):
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(**{"bootstrap_servers": bootstrap, "enable_idempotence": False,
                                   "linger_ms": 20, "max_batch_size": 512 * 1024,
                                   "max_request_size": 4 * 1024 * 1024, "request_timeout_ms": 60_000, **conf})
    await producer.start()
    try:
        futures = [await producer.send(topic, key=s.key, value=s.value, headers=list(s.headers),
                                       timestamp_ms=s.timestamp) for s in records]
        await producer.flush()
        results = await asyncio.gather(*futures, return_exceptions=True)
    finally:
        await producer.stop()
    failed = [(i, r) for i, r in enumerate(results) if isinstance(r, BaseException)]
    assert not failed, f"{len(failed)} sends failed, first: {failed[0]!r}"
    # with acks=0 aiokafka resolves each send to None: no partition to compare with
    return {s.index: r.partition for s, r in zip(records, results) if r is not None}


async def _aiokafka_read(bootstrap, topic, partitions, expected):
    """assign + seek_to_beginning (no group); CRCs checked by the client."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="none", fetch_max_bytes=50 * 1024 * 1024,
                                max_partition_fetch_bytes=8 * 1024 * 1024, check_crcs=True)
    await consumer.start()
    got: list[Got] = []

    async def poll(timeout_ms):
        for batch in (await consumer.getmany(timeout_ms=timeout_ms, max_records=20_000)).values():
            got.extend(Got(r.partition, r.offset, r.key, r.value, tuple((k, v) for k, v in r.headers),
                       r.timestamp, r.timestamp_type == 0) for r in batch)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while len(got) < expected and time.monotonic() < deadline:
            await poll(500)
        await poll(1000)  # anything beyond the expected count (there must be nothing)
        high = sum((await consumer.end_offsets(tps)).values())
    finally:
        await consumer.stop()
    return got, high


@pytest.fixture(scope="session")
def dataset():
    return SimpleNamespace(make=make_records, verify=verify, Sent=Sent, Got=Got, wait_until=wait_until)


@pytest.fixture(scope="session")
def clients():
    return SimpleNamespace(confluent_produce=confluent_produce, confluent_consume=confluent_consume,
                           kafka_python_produce=kafka_python_produce, kafka_python_consume=kafka_python_consume,
                           aiokafka_produce=aiokafka_produce, aiokafka_consume=aiokafka_consume,
                           PRODUCE_TIMEOUT_S=PRODUCE_TIMEOUT_S, CONSUME_TIMEOUT_S=CONSUME_TIMEOUT_S)
