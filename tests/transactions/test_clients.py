"""Transactions with real clients on one dev cluster (3 brokers, RF 3): confluent-kafka's
transactional producer (commit, abort, offsets sent to the transaction), a read_committed
consumer seeing exactly the committed records, consume-transform-produce, aiokafka's
transactions, zombie fencing, a hung transaction aborted at its timeout, and Kafka's own
TransactionalMessageCopier through broker kills (last: it restarts brokers)."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from odradek.dev.harness import start_cluster, stop_cluster
from odradek.dev.waiting import wait_until

ABORT_CHECK_MS = 500   # transaction.abort.timed.out.transaction.cleanup.interval.ms on this cluster
ZK_SESSION_MS = 10000  # brokers' sessions (as the verify clusters'): a SIGKILLed broker's registration outlives it this long


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("txn"), brokers=3, replication_factor=3, min_insync_replicas=2,
                      extra=("--config", f"transaction.abort.timed.out.transaction.cleanup.interval.ms={ABORT_CHECK_MS}",
                             "--config", f"zookeeper.session.timeout.ms={ZK_SESSION_MS}"))
    yield c
    stop_cluster(c)


@pytest.fixture
def topic(cluster):
    name = f"txn-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(name, partitions=3, replication_factor=3)
    cluster.wait_for_leaders(name, 3)
    return name


def producer(cluster, tid: str, **conf) -> Producer:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid, "linger.ms": 5, **conf})
    p.init_transactions(60)
    return p


def read_all(cluster, topic: str, isolation: str, partitions: int = 3) -> list[bytes]:
    """Every value below the end (the LSO for read_committed) of each partition."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                  "isolation.level": isolation, "enable.partition.eof": True, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values, eof, deadline = [], set(), time.monotonic() + 60
        while len(eof) < partitions and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                eof.add(m.partition())
                continue
            eof.discard(m.partition())
            values.append(m.value())
        assert len(eof) == partitions, "no end of partition within 60 s"
        return values
    finally:
        c.close()


def transaction(p: Producer, topic: str, values: list[bytes], commit: bool = True) -> None:
    p.begin_transaction()
    for i, v in enumerate(values):
        p.produce(topic, value=v, key=v, partition=i % 3)
    if commit:
        p.commit_transaction(60)
    else:
        p.flush(30)
        p.abort_transaction(60)


def test_read_committed_sees_exactly_the_committed_transactions(cluster, topic):
    p = producer(cluster, f"{topic}-p")
    committed = [b"c1-%d" % i for i in range(10)] + [b"c3-%d" % i for i in range(10)]
    transaction(p, topic, committed[:10])
    transaction(p, topic, [b"aborted-%d" % i for i in range(5)], commit=False)
    transaction(p, topic, committed[10:])
    assert sorted(read_all(cluster, topic, "read_committed")) == sorted(committed)
    assert len(read_all(cluster, topic, "read_uncommitted")) == 25


def test_consume_transform_produce_commits_offsets_with_the_output(cluster, topic):
    source = f"{topic}-in"
    cluster.create_topic(source, partitions=1, replication_factor=3)
    cluster.wait_for_leaders(source, 1)
    plain = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(30):
        plain.produce(source, value=b"%d" % i)
    assert plain.flush(30) == 0
    group = f"{topic}-ctp"
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    p = producer(cluster, f"{topic}-ctp")
    consumer.subscribe([source])
    try:
        done, deadline = 0, time.monotonic() + 90
        while done < 30 and time.monotonic() < deadline:
            batch = [m for m in consumer.consume(10, 1.0) if m.error() is None]
            if not batch:
                continue
            p.begin_transaction()
            for m in batch:
                p.produce(topic, value=b"x" + m.value(), partition=0)
            p.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                          consumer.consumer_group_metadata(), 30)
            p.commit_transaction(60)
            done += len(batch)
        assert done == 30
    finally:
        consumer.close()
    assert sorted(read_all(cluster, topic, "read_committed")) == sorted(b"x%d" % i for i in range(30))
    check = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        assert [tp.offset for tp in check.committed([TopicPartition(source, 0)], timeout=30)] == [30]
    finally:
        check.close()


def test_aiokafka_transactions(cluster, topic):
    from aiokafka import AIOKafkaProducer

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id=f"{topic}-aio")
        await p.start()
        try:
            async with p.transaction():
                for i in range(5):
                    await p.send(topic, b"aio-%d" % i, partition=i % 3)
            with pytest.raises(RuntimeError):
                async with p.transaction():
                    await p.send(topic, b"aio-aborted", partition=0)
                    raise RuntimeError("abort this one")
        finally:
            await p.stop()
    asyncio.run(run())
    assert sorted(read_all(cluster, topic, "read_committed")) == [b"aio-%d" % i for i in range(5)]


def test_an_older_instance_is_fenced_and_cannot_commit(cluster, topic):
    tid = f"{topic}-zombie"
    zombie = producer(cluster, tid)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    assert zombie.flush(30) == 0
    successor = producer(cluster, tid)          # fences the zombie, aborting its transaction
    transaction(successor, topic, [b"successor"])
    with pytest.raises(KafkaException) as e:
        zombie.produce(topic, value=b"zombie-2", partition=0)
        zombie.commit_transaction(30)
    assert e.value.args[0].code() in (KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH,
                                      KafkaError._FENCED), e.value
    assert read_all(cluster, topic, "read_committed") == [b"successor"]


def test_a_hung_transaction_is_aborted_at_its_timeout(cluster, topic):
    hung = producer(cluster, f"{topic}-hung", **{"transaction.timeout.ms": 2000})
    hung.begin_transaction()
    for i in range(3):
        hung.produce(topic, value=b"hung-%d" % i, partition=i)
    assert hung.flush(30) == 0
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"{topic}-lso",
                  "isolation.level": "read_committed"})
    try:
        def stable_everywhere():  # the LSO (read_committed's end) reaches the log end once aborted
            return all(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1] >= 2
                       for p in range(3))
        wait_until(stable_everywhere, 30, "the LSO past the aborted transaction", 0.2)
    finally:
        c.close()
    assert read_all(cluster, topic, "read_committed") == []
    with pytest.raises(KafkaException):
        hung.commit_transaction(30)


def test_kafkas_transactional_copier_copies_exactly_once_through_kills(cluster, topic):
    """Kafka's system-test copier (consume, produce, send offsets, commit; random aborts) over
    6,000 records in transactions of 20 while the transaction coordinator's broker and then the
    input leader are SIGKILLed and restarted: the output holds every input record exactly once.
    (The copier stops at the input's end as it found it, so the input is all there first; 3,000
    in transactions of 100 were copied before the first kill on a quiet machine.)"""
    from bench import apache_kafka
    from odradek.broker.group.config import partition_for
    from tests.support.kafka_tools import require_kafka

    require_kafka()
    source, count, tid = f"{topic}-src", 6000, f"{topic}-copier"
    cluster.create_topic(source, partitions=1, replication_factor=3)
    cluster.wait_for_leaders(source, 1)
    plain = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 20})
    for i in range(count):
        plain.produce(source, value=b"%d" % i, partition=0)
    assert plain.flush(60) == 0
    # Kafka's own JVM flags, not the tests' C1-only ones (QUICK_TOOL_JVM): this JVM works for a minute
    copier = subprocess.Popen(apache_kafka.tool_argv(
        "org.apache.kafka.tools.TransactionalMessageCopier", "--broker-list", cluster.bootstrap,
        "--input-topic", source, "--input-partition", "0", "--output-topic", topic, "--transactional-id", tid,
        "--consumer-group", f"{topic}-copier", "--transaction-size", "20", "--max-messages", str(count),
        "--enable-random-aborts", "--use-group-metadata", jvm=apache_kafka.TOOL_JVM),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        progress = _copier_progress(copier)
        wait_until(lambda: progress["consumed"] > 0, 60, "the copier's first transaction", 0.2)
        for victim in (cluster.leader_id("__transaction_state", partition_for(tid, 50)),
                       cluster.leader_id(source, 0)):
            assert copier.poll() is None and progress["consumed"] < count, "the copier ended before the kills"
            cluster.run("kill", str(victim))
            time.sleep(2)
            cluster.run("start", str(victim))
        assert copier.wait(240) == 0, copier.stderr.read()[-3000:]
    finally:
        if copier.poll() is None:
            copier.kill()
            copier.wait()
    values = read_all(cluster, topic, "read_committed")
    assert sorted(values, key=int) == [b"%d" % i for i in range(count)]


def _copier_progress(copier) -> dict:
    """The copier's JSON status lines (``consumed`` = its latest count), read in a thread."""
    import json
    import threading
    progress = {"consumed": 0}

    def follow():
        for line in copier.stdout:
            try:
                status = json.loads(line)
            except ValueError:
                continue
            progress["consumed"] = max(progress["consumed"], int(status.get("consumed", status.get("copied", 0))))
    threading.Thread(target=follow, daemon=True).start()
    return progress
