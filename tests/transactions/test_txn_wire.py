"""Transactions in the partition log on a dev cluster, driven on the wire: transactional
batches, WriteTxnMarkers (its per-partition errors), ListOffsets read_committed, and a real
confluent-kafka consumer with isolation.level=read_committed that never sees aborted records
and stops at the last stable offset while a transaction is open; a leader restart keeps it."""

import datetime
import time

import pytest
from confluent_kafka import KafkaException
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.write_txn_markers.v1.request import WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest

from odradek.records import Record, build_batch
from tests.idempotence.test_wire import init_producer_id
from tests.support.kafka_wire import WireClient

PRODUCE, LIST_OFFSETS, FIND_COORDINATOR, ADD_PARTITIONS_TO_TXN, WRITE_TXN_MARKERS = 0, 2, 10, 24, 27
TOPIC = "txn-log"


class Txn:
    """One producer's transactional batches and markers, sent to the partition leader. The
    coordinator is told of the partition once (AddPartitionsToTxn: KIP-890's verification) and
    then left alone: the markers are written by hand."""

    def __init__(self, cluster, producer: tuple[str, int], epoch: int = 0) -> None:
        self.cluster, (self.tid, self.pid), self.epoch, self.seq = cluster, producer, epoch, 0
        self.added = False

    def produce(self, *values: bytes, transactional: bool = True) -> int:
        if not self.added:
            with WireClient(self.cluster.bootstrap.split(",")[0]) as c:
                (added,) = add_partitions(c, self.tid, self.pid, self.epoch)
            assert added == ErrorCode.none
            self.added = True
        records = bytes(build_batch([Record(v, b"k") for v in values], producer_id=self.pid,
                                    producer_epoch=self.epoch, base_sequence=self.seq, transactional=transactional))
        request = ProduceRequest(transactional_id=self.tid, acks=-1, timeout=datetime.timedelta(seconds=20),
                                 topic_data=(TopicProduceData(name=TOPIC, partition_data=(
                                     PartitionProduceData(index=0, records=records),)),))
        with WireClient(self.cluster.leader_address(TOPIC, 0)) as c:
            r = c.request(PRODUCE, 9, request).responses[0].partition_responses[0]
        assert r.error_code == ErrorCode.none, r
        self.seq += len(values)
        return r.base_offset

    def end(self, commit: bool, *, coordinator_epoch: int = 0, epoch: int | None = None,
            address: str | None = None, partitions=(0,)) -> ErrorCode:
        return write_marker(address or self.cluster.leader_address(TOPIC, 0), self.pid,
                            self.epoch if epoch is None else epoch, commit, coordinator_epoch, partitions)


def add_partitions(client, tid: str, pid: int, epoch: int) -> list[ErrorCode]:
    """AddPartitionsToTxn v3 of the module's partition (to the id's coordinator)."""
    request = AddPartitionsToTxnRequest(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                                        v3_and_below_producer_epoch=epoch, v3_and_below_topics=(
                                            AddPartitionsToTxnTopic(name=TOPIC, partitions=(0,)),))
    with WireClient(coordinator_of(client, tid)) as c:
        answer = c.request(ADD_PARTITIONS_TO_TXN, 3, request)
    return [p.partition_error_code for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition]


def coordinator_of(client, tid: str) -> str:
    request = FindCoordinatorRequest(key_type=1, coordinator_keys=(tid,))
    deadline = time.monotonic() + 30
    while True:
        (found,) = client.request(FIND_COORDINATOR, 4, request).coordinators
        if found.error_code == ErrorCode.none or time.monotonic() > deadline:
            return f"{found.host}:{found.port}"
        time.sleep(0.2)   # __transaction_state being created or loaded


def write_marker(address, pid, epoch, commit, coordinator_epoch, partitions=(0,)):
    request = WriteTxnMarkersRequest(markers=(WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
        topics=(WritableTxnMarkerTopic(name=TOPIC, partition_indexes=tuple(partitions)),)),))
    with WireClient(address) as c:
        (marker,) = c.request(WRITE_TXN_MARKERS, 1, request).markers
    assert marker.producer_id == pid
    return [p.error_code for p in marker.topics[0].partitions]


def latest(cluster, isolation: int, check: bool = True) -> int | None:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=(ListOffsetsTopic(
        name=TOPIC, partitions=(ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1),)),))
    with WireClient(cluster.leader_address(TOPIC, 0)) as c:
        (p,) = c.request(LIST_OFFSETS, 7, request).topics[0].partitions
    if not check and p.error_code != ErrorCode.none:
        return None
    assert p.error_code == ErrorCode.none
    return p.offset


def lso_or_none(cluster) -> int | None:
    """The read_committed latest offset, or None while the partition has no (ready) leader."""
    try:
        return latest(cluster, 1, check=False)
    except (KeyError, OSError, KafkaException):   # no leader yet, a broker still starting
        return None


def read_committed(cluster, until_offset: int, timeout: float = 30.0) -> list[tuple[int, bytes]]:
    """(offset, value) of what a read_committed confluent-kafka consumer gets from the start,
    reading until it reaches ``until_offset`` (its position) or the deadline."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "txn-log-reader",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "enable.partition.eof": False})
    got = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in consumer.consume(num_messages=1000, timeout=0.5):
                assert m.error() is None, m.error()
                got.append((m.offset(), m.value()))
            position = consumer.position([TopicPartition(TOPIC, 0)])[0].offset
            if position >= until_offset:
                break
        consumer.consume(num_messages=1000, timeout=1.0) and pytest.fail("read past the last stable offset")
    finally:
        consumer.close()
    return got


@pytest.fixture(scope="module")
def cluster(gw_cluster):
    """One dev cluster with the HTTP gateway for the whole module."""
    return gw_cluster


@pytest.fixture(scope="module")
def topic(cluster):
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    cluster.wait_for_leaders(TOPIC, 1)
    return TOPIC


@pytest.fixture(scope="module")
def pids(cluster):
    """(transactional id, producer id) of eight transactional producers, with the longest
    transaction timeout (the coordinator must not abort them while the module runs)."""
    out = []
    with WireClient(cluster.bootstrap.split(",")[0]) as c:
        for i in range(8):
            tid = f"txn-wire-{i}"
            with WireClient(coordinator_of(c, tid)) as coordinator:
                answer = init_producer_id(coordinator, tid, timeout_ms=900_000)
            assert answer.error_code == ErrorCode.none, answer
            out.append((tid, answer.producer_id))
    return out


def test_read_committed_skips_aborted_data_and_stops_at_the_lso(cluster, topic, pids):
    committed, aborted, open_ = (Txn(cluster, pid) for pid in pids[:3])
    committed.produce(b"c1", b"c2")
    aborted.produce(b"a1")
    committed.produce(b"c3")
    assert committed.end(True) == [ErrorCode.none]
    assert aborted.end(False) == [ErrorCode.none]
    first_open = open_.produce(b"o1")
    aborted.produce(b"a2")                              # a second transaction of the same producer
    assert aborted.end(False) == [ErrorCode.none]
    assert latest(cluster, 1) == first_open < latest(cluster, 0)
    got = read_committed(cluster, first_open)
    assert [v for _, v in got] == [b"c1", b"c2", b"c3"]
    assert open_.end(True) == [ErrorCode.none]
    end = latest(cluster, 0)
    assert latest(cluster, 1) == end
    assert [v for _, v in read_committed(cluster, end)] == [b"c1", b"c2", b"c3", b"o1"]


def test_marker_errors_are_kafkas(cluster, topic, pids):
    txn = Txn(cluster, pids[3])
    txn.produce(b"x")
    assert txn.end(True, coordinator_epoch=5) == [ErrorCode.none]
    assert txn.end(False, coordinator_epoch=4) == [ErrorCode.transaction_coordinator_fenced]
    assert txn.end(False, coordinator_epoch=5, epoch=1) == [ErrorCode.none]   # an abort bumping the epoch
    assert txn.end(False, coordinator_epoch=5, epoch=0) == [ErrorCode.invalid_producer_epoch]
    assert txn.end(True, partitions=(0, 7)) == [ErrorCode.invalid_producer_epoch,
                                                ErrorCode.unknown_topic_or_partition]
    leader = cluster.leader_id(TOPIC, 0)
    other = next(a for b, a in cluster.brokers.items() if b != leader)
    assert txn.end(True, epoch=1, coordinator_epoch=5, address=other) == [ErrorCode.not_leader_or_follower]


def test_confluent_transactional_producer_and_read_committed_consumer(cluster):
    """End to end with the transaction coordinator: committed records are read, aborted ones
    never, and an open transaction holds the consumer back until it commits."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    topic = "txn-e2e"
    cluster.create_topic(topic, partitions=2, replication_factor=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "txn-log-e2e",
                         "linger.ms": 5})
    producer.init_transactions(30)

    def transaction(prefix: str, commit: bool | None) -> None:
        producer.begin_transaction()
        for i in range(20):
            producer.produce(topic, f"{prefix}-{i}".encode(), key=str(i).encode())
        producer.flush(30)
        if commit is True:
            producer.commit_transaction(30)
        elif commit is False:
            producer.abort_transaction(30)

    transaction("committed", True)
    transaction("aborted", False)
    transaction("open", None)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "txn-e2e-reader",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(2)])
    seen: list[bytes] = []

    def read_until(count: int, quiet_s: float) -> None:
        deadline = time.monotonic() + 30
        while len(seen) < count and time.monotonic() < deadline:
            seen.extend(m.value() for m in consumer.consume(100, 0.5) if m.error() is None)
        end = time.monotonic() + quiet_s
        while time.monotonic() < end:
            seen.extend(m.value() for m in consumer.consume(100, 0.5) if m.error() is None)
    try:
        read_until(20, quiet_s=2.0)
        assert sorted(seen) == sorted(f"committed-{i}".encode() for i in range(20))
        producer.commit_transaction(30)
        read_until(40, quiet_s=1.0)
    finally:
        consumer.close()
    assert sorted(seen) == sorted([f"committed-{i}".encode() for i in range(20)]
                                  + [f"open-{i}".encode() for i in range(20)])


def test_coordinator_metrics_on_each_brokers_prometheus_endpoint(cluster):
    """Right after the transactions above (the first FindCoordinator created
    ``__transaction_state``, every broker loaded the partitions it leads): Kafka's coordinator
    series on every broker, a load time within Kafka's 60 s window on some, empty queues."""
    import math
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families
    urls = {n: u for n, u in cluster.status()["metrics_url"].items() if n.startswith("broker-")}
    scraped = {}
    for name, url in urls.items():
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        scraped[name] = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples
                         if "transaction" in s.name}
    load, queues = ("kafka_server_transaction_coordinator_metrics_partition_load_time_",
                    "kafka_coordinator_transaction_transactionmarkerchannelmanager_")
    for name, series in scraped.items():
        assert series[queues + "unknowndestinationqueuesize"] == 0, (name, series)
        assert series[queues + "logappendretryqueuesize"] == 0, (name, series)
        assert {load + "avg", load + "max"} <= set(series), (name, series)
    assert any(not math.isnan(s[load + "max"]) and s[load + "max"] >= s[load + "avg"] >= 0
               for s in scraped.values()), scraped


def test_gateway_range_reads_and_spark_offsets_honour_read_committed(cluster, topic, pids):
    """The gateway's offsets and range reads with isolation_level=read_committed (what the Spark
    source's kafka.isolation.level uses): the end is the LSO, aborted records never come back."""
    from odradek.client import GatewayClient
    aborted, hanging = Txn(cluster, pids[6]), Txn(cluster, pids[7])
    aborted.produce(b"gw-aborted")
    assert aborted.end(False) == [ErrorCode.none]
    first_open = hanging.produce(b"gw-open")
    with GatewayClient(cluster.gateway, isolation_level="read_committed") as committed, \
            GatewayClient(cluster.gateway) as uncommitted:
        assert committed.offsets(TOPIC, 0)[1] == first_open < uncommitted.offsets(TOPIC, 0)[1]
        values, offset = [], 0
        while offset < first_open:
            records, offset = committed.read_json(TOPIC, 0, offset, first_open)
            values += [r["value"] for r in records]
        assert offset == first_open and len(values) == 5   # c1 c2 c3 o1 x, nothing aborted
        everything, _ = uncommitted.read_json(TOPIC, 0, 0, first_open + 1)
        assert len(everything) > len(values)
    assert hanging.end(False) == [ErrorCode.none]


# last: the restart moves leadership
def test_a_restarted_leader_keeps_the_lso_and_the_aborted_transactions(cluster, topic, pids):
    txn = Txn(cluster, pids[4])
    before = latest(cluster, 1)
    txn.produce(b"gone")
    assert txn.end(False) == [ErrorCode.none]
    hanging = Txn(cluster, pids[5])
    first_open = hanging.produce(b"pending")
    leader = cluster.leader_id(TOPIC, 0)
    cluster.run("kill", str(leader))              # not graceful: recovery rebuilds the state
    cluster.run("start", str(leader))
    cluster.wait_for_leaders(TOPIC, 1)
    cluster.refresh()
    assert first_open > before
    deadline = time.monotonic() + 60
    while lso_or_none(cluster) != first_open and time.monotonic() < deadline:
        time.sleep(0.2)   # the restarted broker loads its logs; leadership may move
    assert latest(cluster, 1) == first_open
    values = [v for _, v in read_committed(cluster, first_open)]
    assert values == [b"c1", b"c2", b"c3", b"o1", b"x"]   # neither "gone" (aborted) nor "pending" (open)
