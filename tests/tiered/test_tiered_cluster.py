"""Tiered storage on a dev cluster (``odradek dev up --tiered``: S3Proxy and 2 brokers running
the remote log manager every second): a topic with remote.storage.enable and tiny segments and
local retention has its rolled segments copied, the leader's disk keeps only the local limit,
and after the leader is killed the new leader resumes the copies with no gap and no second copy.

Then the read side, on the same topic: ListOffsets EARLIEST / EARLIEST_LOCAL / LATEST_TIERED
(v9); a corrupt remote object answered an error, never its bytes; a confluent-kafka consumer and
Kafka's Java console consumer read every record from offset 0, in order, with its offset, most
of them from the store; confluent-kafka's offsets_for_times finds timestamps in the store and on
the disk (the first record at or after each, with its batch's leader epoch, as Kafka answers); a
follower stopped while the leader's local log start passes its end catches up from the store and
is in the ISR again (its BuildRemoteLogAuxState meter counts the rebuild).

Other topics on the same cluster: the metrics and the console (the brokers' RemoteCopy* meters
count exactly the bytes and segments the store holds, RemoteFetch* the remote reads of a consumer
from offset 0, the leader's gauges the store's size and count; the gateway's offsets, the
console's partition table, give the leader's local size, remote size and local start offset); a
transactional producer's aborted transactions, once in the store only, are skipped by a
read_committed consumer from offset 0 (the remote transaction indexes); 200 MB of large records
through a local limit of three segments: the leader's disk ends near the limit and a consumer
from offset 0 reads every record, in order and equal."""

from __future__ import annotations

import random
import re
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v9.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

from odradek.broker.storage.remote_storage import RemoteStorageConfig, RemoteStorageManager, object_key
from odradek.dev.harness import Cluster, start_cluster, stop_cluster
from odradek.dev.waiting import wait_until
from tests.support.clients import confluent_consume, confluent_produce
from tests.support.kafka_tools import CONSOLE_CONSUMER, Endpoint, require_kafka
from tests.support.kafka_wire import WireClient, fetch_partition
from odradek.records import read_header
from tests.support.records import make_records

TOPIC = "tiered"
CONFIG = {"remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "32768",
          "min.insync.replicas": "1"}
SMALL_BATCHES = {"batch.size": 4000, "linger.ms": 5}   # several segments from a few hundred records
LIST_OFFSETS = 2
EARLIEST, EARLIEST_LOCAL, LATEST_TIERED = -2, -4, -5
_STORES: dict = {}
PRODUCED = 1600   # by the first test: make_records(800), then make_records(800, seed=2)


@pytest.fixture(scope="module")
def tc(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("tiered"), brokers=2, extra=("--tiered",), gateway=True)
    yield c
    stop_cluster(c)


def _rsm(c: Cluster) -> RemoteStorageManager:
    store = _store(c)
    return RemoteStorageManager(RemoteStorageConfig(store["endpoint"], store["bucket"], store["access_key"],
                                                    store["secret_key"], max_attempts=1))


def _store(c: Cluster) -> dict:
    """The cluster's object store settings, asked once (``dev status`` is a CLI run)."""
    if c.data_dir not in _STORES:
        _STORES[c.data_dir] = c.status()["object_store"]
    return _STORES[c.data_dir]


def _segments(rsm, topic_id):
    return rsm.list_log_segments(topic_id, TOPIC, 0)


def _local_logs(c: Cluster, broker: int, topic: str = TOPIC) -> list[int]:
    part = c.data_dir / f"broker-{broker}" / f"{topic}-0"
    return sorted(int(p.stem) for p in part.glob("*.log"))


def _local_bytes(c: Cluster, broker: int, topic: str) -> int:
    return sum(p.stat().st_size for p in (c.data_dir / f"broker-{broker}" / f"{topic}-0").glob("*.log"))


def _assert_no_gap_nor_second_copy(listed) -> None:
    assert listed[0].start_offset == 0
    for a, b in zip(listed, listed[1:]):
        assert b.start_offset == a.end_offset + 1, f"gap or second copy between {a} and {b}"


def test_segments_reach_the_store_and_a_new_leader_resumes(tc):
    tc.create_topic(TOPIC, replication_factor=2, config=CONFIG)
    rsm = _rsm(tc)
    delivered = confluent_produce(tc.bootstrap, TOPIC, make_records(800), acks="all", **SMALL_BATCHES)
    assert len(delivered) == 800
    topic_id = None

    def uploaded(n: int):
        nonlocal topic_id
        topic_id = topic_id or _find_topic_id(rsm)
        listed = _segments(rsm, topic_id) if topic_id else []
        return listed if listed and listed[-1].end_offset >= n else None
    leader = tc.leader_id(TOPIC, 0)
    listed = wait_until(lambda: uploaded(400), 90, "the rolled segments in the store", interval=0.5)
    _assert_no_gap_nor_second_copy(listed)
    wait_until(lambda: _local_logs(tc, leader)[0] > 0, 60, "local retention on the leader", interval=0.5)
    assert _local_logs(tc, leader)[0] <= listed[-1].end_offset + 1, "a segment left the disk before the store had it"

    tc.run("kill", str(leader))
    try:
        wait_until(lambda: tc.leader_id(TOPIC, 0) not in (leader, -1), 60, "a new leader", interval=0.5)
        confluent_produce(tc.bootstrap, TOPIC, make_records(800, seed=2), acks="all", **SMALL_BATCHES)
        after = wait_until(lambda: uploaded(1200), 90, "the new leader's copies", interval=0.5)
        _assert_no_gap_nor_second_copy(after)
        assert {m.broker_id for m in after} == {leader, tc.leader_id(TOPIC, 0)}
    finally:
        tc.run("start", str(leader))


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _find_topic_id(rsm, topic: str = TOPIC) -> str | None:
    """The topic id, from the store's key layout (``<topic>-<topicId>/<partition>/...``)."""
    for key in rsm._keys(f"{topic}-"):
        topic_id = key.split("/", 1)[0][len(topic) + 1:]
        if UUID.fullmatch(topic_id):   # not "txn-<id>" of the topic "<topic>-txn" under the same prefix
            return topic_id
    return None


def _list_offset(address: str, timestamp: int) -> tuple[int, int]:
    """(offset, leader epoch) ListOffsets v9 answers for ``timestamp`` on partition 0."""
    p = _list_offsets_answer(address, timestamp)
    return p.offset, p.leader_epoch


def _list_offsets_answer(address: str, timestamp: int):
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(
        name=TOPIC, partitions=(ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=timestamp),)),))
    with WireClient(address, timeout=30) as client:
        p = client.request(LIST_OFFSETS, 9, req).topics[0].partitions[0]
    assert p.error_code == ErrorCode.none
    return p


def _fetch(address: str, offset: int):
    with WireClient(address, timeout=30) as client:
        return fetch_partition(client, TOPIC, offset)


def _settled(tc: Cluster) -> int:
    """The leader, once both replicas are in the ISR and the preferred one leads. After a broker
    restart a preferred election is asked for: the auto leader rebalance moves leadership back
    only above leader.imbalance.per.broker.percentage (10%), and one partition of the restarted
    broker's ~27 is below it unless it rejoined the ISR before the controller's first check."""
    from confluent_kafka import ElectionType, KafkaException, TopicPartition
    admin = tc.admin()

    def leader():
        p = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]
        if set(p.isrs) != set(p.replicas):
            return None
        if p.leader != p.replicas[0]:
            try:   # answered at once; the metadata shows the new leader a moment later
                admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 0)]).result(30)
            except KafkaException:
                pass
            return None
        return p.leader
    return wait_until(leader, 120, "both replicas in sync, the preferred one leading", interval=0.5)


def test_list_offsets_and_a_corrupt_remote_object(tc):
    leader = _settled(tc)
    wait_until(lambda: _local_logs(tc, leader)[0] > 0, 60, "local retention on the leader", interval=0.5)
    address = tc.leader_address(TOPIC, 0)
    rsm = _rsm(tc)
    listed = _segments(rsm, _find_topic_id(rsm))
    assert _list_offset(address, EARLIEST)[0] == 0
    local, _ = _list_offset(address, EARLIEST_LOCAL)
    tiered, epoch = wait_until(lambda: _list_offset(address, LATEST_TIERED), 30, "the store's end",
                               interval=0.5)
    assert 0 < local <= tiered + 1 and local == _local_logs(tc, leader)[0]
    assert tiered in {m.end_offset for m in _segments(rsm, listed[0].segment_id.topic_id)} and epoch >= 0

    path = tc.data_dir / "s3proxy" / "data" / _store(tc)["bucket"] / object_key("", listed[0], "log")
    original = path.read_bytes()
    path.write_bytes(original[:10] + bytes([original[10] ^ 0xFF]) + original[11:])
    try:
        answer = _fetch(address, 0)
        # Kafka's Errors.forException of a RemoteStorageException (not an ApiException): clients retry
        assert answer.error_code == ErrorCode.unknown_server_error and not answer.records
    finally:
        path.write_bytes(original)
    assert _fetch(address, 0).error_code == ErrorCode.none


def test_consumers_read_every_record_from_offset_0(tc):
    _settled(tc)
    expected = [s.value for s in make_records(800) + make_records(800, seed=2)]
    got, high = confluent_consume(tc.bootstrap, TOPIC, 1, PRODUCED)
    assert [g.offset for g in got] == list(range(PRODUCED)) and high == PRODUCED
    assert [g.value for g in got] == expected

    require_kafka()
    out = Endpoint("odradek", tc.bootstrap).tool(
        CONSOLE_CONSUMER, "--topic", TOPIC, "--partition", "0", "--offset", "earliest",
        "--max-messages", str(PRODUCED), "--timeout-ms", "60000", "--property", "print.offset=true",
        "--property", "print.value=false", timeout=180)
    assert [int(o) for o in re.findall(r"Offset:(\d+)", out.stdout)] == list(range(PRODUCED)), out.stderr[-2000:]
    _timestamps_are_found_where_kafka_finds_them(tc, got)


def _timestamps_are_found_where_kafka_finds_them(tc: Cluster, got) -> None:
    """offsets_for_times (librdkafka) and ListOffsets v9 for timestamps of records in the store and
    on the disk: the first record at or after each (the records' timestamps are not monotonic),
    its timestamp, and the leader epoch of the batch holding it (what a Fetch of it shows)."""
    from confluent_kafka import Consumer, TopicPartition
    address = tc.leader_address(TOPIC, 0)
    local, _ = _list_offset(address, EARLIEST_LOCAL)
    assert local > 10
    consumer = Consumer({"bootstrap.servers": tc.bootstrap, "group.id": f"{TOPIC}-times"})
    try:
        for k in (3, local // 2, local - 1, PRODUCED - 5):
            target = got[k].timestamp
            expected = next(g for g in got if g.timestamp >= target)
            found = consumer.offsets_for_times([TopicPartition(TOPIC, 0, target)], timeout=30)[0]
            assert found.error is None and found.offset == expected.offset, (k, local)
            answer = _list_offsets_answer(address, target)
            assert (answer.timestamp, answer.offset) == (expected.timestamp, expected.offset)
            assert answer.leader_epoch == _batch_epoch(address, expected.offset)
        later = max(g.timestamp for g in got) + 1
        assert consumer.offsets_for_times([TopicPartition(TOPIC, 0, later)], timeout=30)[0].offset == -1
    finally:
        consumer.close()


def _batch_epoch(address: str, offset: int) -> int:
    """The partition leader epoch of the batch holding ``offset``, from a Fetch (a fetch from the
    store may be answered empty while the read goes on: asked again)."""
    answer = wait_until(lambda: (a := _fetch(address, offset)).records and a, 30, f"a fetch of offset {offset}",
                        interval=0.2)
    return read_header(bytes(answer.records)).partition_leader_epoch


def test_a_follower_behind_the_leaders_local_log_start_catches_up(tc):
    admin = tc.admin()

    def isr() -> set[int]:
        return set(admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0].isrs)
    leader = _settled(tc)
    replicas = set(admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0].replicas)
    follower = (replicas - {leader}).pop()
    tc.run("kill", str(follower))
    try:
        end, _ = _list_offset(tc.leader_address(TOPIC, 0), -1)
        confluent_produce(tc.bootstrap, TOPIC, make_records(800, seed=3), acks="1", **SMALL_BATCHES)
        wait_until(lambda: _local_logs(tc, leader)[0] > end, 90, "the leader's local log start past the follower",
                   interval=0.5)
    finally:
        tc.run("start", str(follower))
    wait_until(lambda: _local_logs(tc, follower) and _local_logs(tc, follower)[0] > end, 90,
               "the follower rebuilt from the store", interval=0.5)
    wait_until(lambda: isr() == replicas, 120, "the follower back in the ISR", interval=0.5)
    leader_end, _ = _list_offset(tc.leader_address(TOPIC, 0), -1)
    assert leader_end == end + 800
    rebuilds = _scrape(tc.status()["metrics_url"][f"broker-{follower}"])   # counted since its restart
    key = (("topic", TOPIC),)
    assert rebuilds[(BTM + "buildremotelogauxstaterequests_total", key)] - \
        rebuilds[(BTM + "buildremotelogauxstateerrors_total", key)] >= 1


METRICS_TOPIC = "metrics-tiered"   # not under the store prefix "tiered-" of TOPIC
BTM = "kafka_server_brokertopicmetrics_"


def _scrape(url: str) -> dict[tuple[str, tuple], float]:
    """A broker's /metrics, as {(sample name, sorted label pairs): value}."""
    text = httpx.get(url, timeout=10).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _scrape_all(tc: Cluster) -> list[dict[tuple[str, tuple], float]]:
    return [_scrape(url) for name, url in tc.status()["metrics_url"].items() if name.startswith("broker-")]


def _topic_sum(scrapes, name: str) -> float:
    """``name{topic=METRICS_TOPIC}`` summed over the brokers (0 where a broker has none)."""
    return sum(s.get((BTM + name, (("topic", METRICS_TOPIC),)), 0) for s in scrapes)


def test_metrics_and_the_console_show_what_is_local_and_remote(tc):
    tc.create_topic(METRICS_TOPIC, replication_factor=2, config=CONFIG)
    confluent_produce(tc.bootstrap, METRICS_TOPIC, make_records(600, seed=4), acks="all", **SMALL_BATCHES)
    rsm = _rsm(tc)
    topic_id = wait_until(lambda: _find_topic_id(rsm, METRICS_TOPIC), 90, "the first copy", interval=0.5)

    def copied():
        scrapes = _scrape_all(tc)
        listed = rsm.list_log_segments(topic_id, METRICS_TOPIC, 0)
        succeeded = _topic_sum(scrapes, "remotecopyrequests_total") - _topic_sum(scrapes, "remotecopyerrors_total")
        done = listed and _topic_sum(scrapes, "remotecopylagsegments") == 0 and succeeded == len(listed)
        return (scrapes, listed) if done else None
    scrapes, listed = wait_until(copied, 90, "every eligible segment copied", interval=0.5)
    stored = sum(m.segment_size_in_bytes for m in listed)
    assert _topic_sum(scrapes, "remotecopybytes_total") == stored > 0
    assert _topic_sum(scrapes, "remotelogsizebytes") == stored
    assert _topic_sum(scrapes, "remotelogmetadatacount") == len(listed)

    leader = tc.leader_id(METRICS_TOPIC, 0)
    local_start = wait_until(lambda: _local_start(tc, leader), 60, "local retention on the leader", interval=0.5)
    got, _ = confluent_consume(tc.bootstrap, METRICS_TOPIC, 1, 600)
    assert [g.offset for g in got] == list(range(600))
    scrapes = _scrape_all(tc)
    remote_only = sum(m.segment_size_in_bytes for m in listed if m.end_offset < local_start)
    # every batch below the local log start was served from the store at least once (a read the
    # fetch stopped waiting for is served again from the cache)
    assert _topic_sum(scrapes, "remotefetchbytes_total") >= remote_only > 0
    assert _topic_sum(scrapes, "remotefetchrequests_total") > 0
    assert _topic_sum(scrapes, "remotefetcherrors_total") == 0
    for s in scrapes:   # the all-topics series covers the topic's
        assert s[(BTM + "remotecopybytes_total", ())] >= s.get((BTM + "remotecopybytes_total", (("topic", METRICS_TOPIC),)), 0)

    cluster = httpx.get(f"{tc.gateway}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"]

    def sizes():
        p = httpx.get(f"{tc.gateway}/v3/clusters/{cluster}/topics/{METRICS_TOPIC}/offsets", timeout=10).json()["data"][0]
        return p if p["remote_size_bytes"] == stored and p["local_log_start_offset"] == _local_start(tc, leader) else None
    p = wait_until(sizes, 30, "the console's sizes", interval=0.5)
    total = p["size_bytes"] + sum(m.segment_size_in_bytes for m in listed if m.end_offset < p["local_log_start_offset"])
    assert p["remote_segments"] == len(listed) and 0 < p["size_bytes"] < total


def _local_start(tc: Cluster, broker: int) -> int | None:
    """The first offset on ``broker``'s disk for METRICS_TOPIC-0, once local retention moved it."""
    part = tc.data_dir / f"broker-{broker}" / f"{METRICS_TOPIC}-0"
    logs = sorted(int(p.stem) for p in part.glob("*.log"))
    return logs[0] if logs and logs[0] > 0 else None



TXN_TOPIC = "tiered-txn"


def test_read_committed_skips_transactions_aborted_in_the_store(tc):
    from confluent_kafka import Producer
    tc.create_topic(TXN_TOPIC, replication_factor=1, config=CONFIG)
    tc.wait_for_leaders(TXN_TOPIC, 1)
    producer = Producer({"bootstrap.servers": tc.bootstrap, "transactional.id": f"{TXN_TOPIC}-p", "linger.ms": 5,
                         "batch.size": 4000})
    producer.init_transactions(60)
    committed = []
    for t in range(24):
        values = [b"t%02d-%03d|" % (t, i) + bytes(200) for i in range(40)]
        producer.begin_transaction()
        for v in values:
            producer.produce(TXN_TOPIC, value=v, partition=0)
        if t % 3 == 1:
            producer.flush(30)             # on the log before the abort marker
            producer.abort_transaction(60)
        else:
            producer.commit_transaction(60)
            committed += values
    leader = tc.leader_id(TXN_TOPIC, 0)
    # the first eight transactions (two aborted) are in the store only
    wait_until(lambda: _local_logs(tc, leader, TXN_TOPIC)[0] > 8 * 41, 90, "local retention past 8 transactions",
               interval=0.5)
    assert _read(tc, TXN_TOPIC, "read_committed") == committed
    assert len(_read(tc, TXN_TOPIC, "read_uncommitted")) == 24 * 40


def _read(tc: Cluster, topic: str, isolation: str) -> list[bytes]:
    """Every value of partition 0 from offset 0 up to its end (the LSO for read_committed)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    consumer = Consumer({"bootstrap.servers": tc.bootstrap, "group.id": f"{topic}-{isolation}",
                         "isolation.level": isolation, "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values, deadline = [], time.monotonic() + 90
        while time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                return values
            values.append(m.value())
        raise AssertionError(f"no end of partition within 90 s ({len(values)} values)")
    finally:
        consumer.close()


BIG_TOPIC = "tiered-200mb"
BIG_SEGMENT = 8 << 20
BIG_LOCAL = 3 * BIG_SEGMENT
BIG_RECORD = 512 << 10
BIG_COUNT = 400    # 200 MB


def _big_value(i: int) -> bytes:
    return random.Random(i).randbytes(BIG_RECORD)


def test_200_mb_through_a_local_limit_of_three_segments(tc):
    from confluent_kafka import Producer
    tc.create_topic(BIG_TOPIC, replication_factor=1, config={
        "remote.storage.enable": "true", "segment.bytes": str(BIG_SEGMENT), "local.retention.bytes": str(BIG_LOCAL)})
    tc.wait_for_leaders(BIG_TOPIC, 1)
    leader = tc.leader_id(BIG_TOPIC, 0)
    producer = Producer({"bootstrap.servers": tc.bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(BIG_COUNT):
        while True:
            try:
                producer.produce(BIG_TOPIC, value=_big_value(i), key=b"%d" % i, partition=0)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(120) == 0
    # the rolled segments reach the store and leave the disk: the active one and the local limit stay
    wait_until(lambda: _local_bytes(tc, leader, BIG_TOPIC) <= BIG_LOCAL + 2 * BIG_SEGMENT, 120,
               "the leader's disk back near local.retention.bytes", interval=0.5)
    got, high = confluent_consume(tc.bootstrap, BIG_TOPIC, 1, BIG_COUNT)
    assert high == BIG_COUNT and [g.offset for g in got] == list(range(BIG_COUNT))
    assert [g.key for g in got] == [b"%d" % i for i in range(BIG_COUNT)]
    assert all(g.value == _big_value(i) for i, g in enumerate(got)), "a record read back differs"
