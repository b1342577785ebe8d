"""Fetch semantics at the wire: long polling, byte limits (KIP-74), whole batches."""

import datetime
import threading
import time
import uuid

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from kio.schema.fetch.v16 import request as fetch16
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v10 import request as produce10

from odradek.dev.waiting import wait_until
from odradek.records import RecordBatch, iter_batches
from tests.support.kafka_wire import WireClient, batch

FETCH, PRODUCE, METADATA = 1, 0, 3
LONG_POLL_MS = 60_000   # a parked fetch's max_wait: far beyond any wake-up delay of a loaded machine


def _fetch(client, topic, offset, *, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, partition_max=1 << 20):
    req = FetchRequest(replica_id=-1, max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=min_bytes,
                       max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
                       topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
                           partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                           log_start_offset=-1, partition_max_bytes=partition_max),)),),
                       forgotten_topics_data=(), rack_id="")
    return client.request(FETCH, 12, req).responses[0].partitions[0]


def _produce(client, topic, values, partition=0):
    # Timestamped now: records from batch()'s default past the 7-day retention roll a segment
    # each, and a maintenance tick between the appends and a fetch deletes them (as Kafka would)
    records = batch(values, timestamp_ms=int(time.time() * 1000))
    req = ProduceRequest(transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=10),
                         topic_data=(TopicProduceData(name=topic, partition_data=(
                             PartitionProduceData(index=partition, records=records),)),))
    result = client.request(PRODUCE, 9, req).responses[0].partition_responses[0]
    assert result.error_code == ErrorCode.none
    return result.base_offset


def _batches(records: bytes) -> list[RecordBatch]:
    found = list(iter_batches(memoryview(records)))
    assert sum(b.size for b in found) == len(records), "a response must hold whole batches only"
    for b in found:
        b.check()
    return found


def test_long_poll_waits_for_data_then_answers(cluster):
    cluster.create_topic("long-poll", partitions=1)
    leader = cluster.leader_address("long-poll", 0)
    result = {}

    def poll():
        with WireClient(leader, timeout=LONG_POLL_MS / 1000 + 30) as c:
            started = time.monotonic()
            result["partition"] = _fetch(c, "long-poll", 0, max_wait_ms=LONG_POLL_MS)
            result["elapsed"] = time.monotonic() - started

    t = threading.Thread(target=poll)
    t.start()
    time.sleep(0.5)  # let the fetch park in the broker
    assert t.is_alive(), "an empty fetch with max_wait must wait for data"
    with WireClient(leader) as c:
        _produce(c, "long-poll", [b"wake up"])
    t.join(LONG_POLL_MS / 1000 + 30)
    part = result["partition"]
    assert part.error_code == ErrorCode.none and part.high_watermark == 1
    assert [b.base_offset for b in _batches(part.records)] == [0]
    # far below max_wait however loaded the machine: woken by the append, not by the timeout
    assert result["elapsed"] < LONG_POLL_MS / 1000 / 2, "the append must wake the parked fetch, not the timeout"


def test_empty_fetch_returns_after_max_wait(cluster):
    cluster.create_topic("idle", partitions=1)
    with WireClient(cluster.leader_address("idle", 0)) as c:
        started = time.monotonic()
        part = _fetch(c, "idle", 0, max_wait_ms=300)
        assert time.monotonic() - started >= 0.25
        assert part.error_code == ErrorCode.none and not part.records


def test_byte_limits_return_whole_batches_and_at_least_one(cluster):
    cluster.create_topic("limits", partitions=1)
    with WireClient(cluster.leader_address("limits", 0)) as c:
        for i in range(10):
            _produce(c, "limits", [bytes([i]) * 1000])
        size = len(batch([b"x" * 1000]))
        two = _batches(_fetch(c, "limits", 0, partition_max=2 * size + 10).records)
        assert [b.base_offset for b in two] == [0, 1]
        one = _batches(_fetch(c, "limits", 3, partition_max=10).records)  # KIP-74: first batch whole
        assert [b.base_offset for b in one] == [3]
        capped = _batches(_fetch(c, "limits", 0, max_bytes=3 * size + 10).records)
        assert [b.base_offset for b in capped] == [0, 1, 2]
        assert _fetch(c, "limits", 11).error_code == ErrorCode.offset_out_of_range
        assert not _fetch(c, "limits", 10).records  # at the end: empty, no error


# -- fetch sessions (KIP-227) ------------------------------------------------------------------
def _session_fetch(client, session_id, epoch, wanted, *, forgotten=(), max_wait_ms=0, max_bytes=1 << 20):
    """A consumer's Fetch v12 in a session: ``wanted`` = {(topic, partition): fetch offset}."""
    by_topic = {}
    for (topic, partition), offset in wanted.items():
        by_topic.setdefault(topic, []).append(FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=1 << 20))
    gone = {}
    for topic, partition in forgotten:
        gone.setdefault(topic, []).append(partition)
    req = FetchRequest(replica_id=-1, max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1,
                       max_bytes=max_bytes, isolation_level=0, session_id=session_id, session_epoch=epoch,
                       topics=tuple(FetchTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
                       forgotten_topics_data=tuple(ForgottenTopic(topic=t, partitions=tuple(ps))
                                                   for t, ps in gone.items()), rack_id="")
    return client.request(FETCH, 12, req)


def _listed(response) -> dict[tuple[str, int], object]:
    return {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


def test_a_fetch_session_lists_only_partitions_with_news_and_forgets(cluster):
    cluster.create_topic("sessions", partitions=6)
    leader = cluster.leader_address("sessions", 0)
    wanted = {("sessions", p): 0 for p in range(6) if cluster.leader_address("sessions", p) == leader}
    assert len(wanted) >= 2, wanted
    with WireClient(leader) as c:
        full = _session_fetch(c, 0, 0, wanted)
        assert full.error_code == ErrorCode.none and full.session_id > 0
        assert set(_listed(full)) == set(wanted)  # a full answer lists every partition
        sid = full.session_id
        idle = _session_fetch(c, sid, 1, {}, max_wait_ms=100)
        assert idle.error_code == ErrorCode.none and idle.session_id == sid and _listed(idle) == {}
        _produce(c, "sessions", [b"news"])
        news = _session_fetch(c, sid, 2, {}, max_wait_ms=5000)
        part = _listed(news)[("sessions", 0)]
        assert set(_listed(news)) == {("sessions", 0)} and part.high_watermark == 1
        assert [b.base_offset for b in _batches(part.records)] == [0]
        moved = _session_fetch(c, sid, 3, {("sessions", 0): 1}, max_wait_ms=100)
        assert _listed(moved) == {}, "nothing new past the moved position"
        assert _session_fetch(c, sid, 3, {}).error_code == ErrorCode.invalid_fetch_session_epoch
        assert _session_fetch(c, 0x7FFFFFFE if sid != 0x7FFFFFFE else 1, 1, {}).error_code \
            == ErrorCode.fetch_session_id_not_found
        _session_fetch(c, sid, 4, {}, forgotten=[("sessions", 0)], max_wait_ms=0)
        _produce(c, "sessions", [b"unseen"])
        after = _session_fetch(c, sid, 5, {}, max_wait_ms=100)
        assert ("sessions", 0) not in _listed(after), "a forgotten partition is no longer fetched"
        sessionless = _session_fetch(c, sid, -1, {("sessions", 0): 0})  # closes the session, opens none
        assert sessionless.session_id == 0 and ("sessions", 0) in _listed(sessionless)
        assert _session_fetch(c, sid, 6, {}).error_code == ErrorCode.fetch_session_id_not_found


def test_a_session_sends_later_what_did_not_fit(cluster):
    """Records left out by max_bytes come in a later incremental answer, though nothing new
    was appended and the client names only the partitions whose position it moved."""
    cluster.create_topic("sessions-budget", partitions=6)
    leader = cluster.leader_address("sessions-budget", 0)
    keys = [("sessions-budget", p) for p in range(6) if cluster.leader_address("sessions-budget", p) == leader]
    with WireClient(leader) as c:
        for _, p in keys:
            _produce(c, "sessions-budget", [b"x" * 1000], p)
        full = _session_fetch(c, 0, 0, dict.fromkeys(keys, 0), max_bytes=10)  # the first batch only
        sent = [k for k, p in _listed(full).items() if p.records]
        got, epoch = set(sent), 1
        assert len(sent) == 1 and len(keys) >= 2
        while len(got) < len(keys):
            nxt = _session_fetch(c, full.session_id, epoch, dict.fromkeys(sent, 1), max_bytes=10, max_wait_ms=100)
            sent = [k for k, p in _listed(nxt).items() if p.records]
            assert sent, "records that did not fit are sent in a later answer"
            got, epoch = got | set(sent), epoch + 1


# -- topic ids (Fetch v13+, KIP-516) and leader hints (Fetch v16, Produce v10: KIP-951) ---------
def _topic_id(address: str, topic: str) -> uuid.UUID | None:
    """The topic's id in Metadata v12 from the broker at ``address`` (None: it has no such topic)."""
    with WireClient(address) as c:
        (t,) = c.request(METADATA, 12, MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=topic),),
                                                       allow_auto_topic_creation=False,
                                                       include_topic_authorized_operations=False)).topics
    return t.topic_id if t.error_code == ErrorCode.none else None


def _fetch_by_id(client, session_id, epoch, wanted, *, forgotten=(), max_wait_ms=0):
    """A consumer's Fetch v16: ``wanted`` = {(topic id, partition): fetch offset}."""
    by_topic: dict = {}
    for (tid, p), offset in wanted.items():
        by_topic.setdefault(tid, []).append(fetch16.FetchPartition(partition=p, fetch_offset=offset,
                                                                   partition_max_bytes=1 << 20))
    req = fetch16.FetchRequest(max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1,
                               session_id=session_id, session_epoch=epoch,
                               topics=tuple(fetch16.FetchTopic(topic_id=t, partitions=tuple(ps))
                                            for t, ps in by_topic.items()),
                               forgotten_topics_data=tuple(fetch16.ForgottenTopic(topic_id=t, partitions=tuple(ps))
                                                           for t, ps in forgotten))
    return client.request(FETCH, 16, req)


def _by_id(response) -> dict:
    return {(t.topic_id, p.partition_index): p for t in response.responses for p in t.partitions}


def _other_broker(cluster, topic: str) -> tuple[int, str, str]:
    """(leader id, leader address, the address of a broker that hosts no replica of ``topic``-0)."""
    md = cluster.admin().list_topics(topic, timeout=10)
    leader = md.topics[topic].partitions[0].leader
    other = next(b for b in md.brokers.values() if b.id != leader)
    return leader, cluster.leader_address(topic, 0), f"{other.host}:{other.port}"


def test_fetch_v16_by_topic_id_and_the_leader_named_in_errors(cluster):
    cluster.create_topic("by-id", partitions=1)
    leader, address, elsewhere = _other_broker(cluster, "by-id")
    tid, nobody = _topic_id(address, "by-id"), uuid.uuid4()
    with WireClient(address) as c:
        _produce(c, "by-id", [b"a", b"b"])
        got = _by_id(_fetch_by_id(c, 0, -1, {(tid, 0): 0, (nobody, 0): 0}))
    assert got[(tid, 0)].error_code == ErrorCode.none and got[(tid, 0)].high_watermark == 2
    assert [b.base_offset for b in _batches(got[(tid, 0)].records)] == [0]
    assert got[(nobody, 0)].error_code == ErrorCode.unknown_topic_id
    host, port = address.rsplit(":", 1)
    with WireClient(elsewhere) as c:   # a broker without a replica: NOT_LEADER_OR_FOLLOWER, and who leads
        fetched = _fetch_by_id(c, 0, -1, {(tid, 0): 0})
        produced = c.request(PRODUCE, 10, produce10.ProduceRequest(
            transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=10), topic_data=(
                produce10.TopicProduceData(name="by-id", partition_data=(produce10.PartitionProduceData(
                    index=0, records=batch([b"c"], timestamp_ms=int(time.time() * 1000))),)),)))
    for response, part in ((fetched, _by_id(fetched)[(tid, 0)]),
                           (produced, produced.responses[0].partition_responses[0])):
        assert part.error_code == ErrorCode.not_leader_or_follower
        assert part.current_leader.leader_id == leader and part.current_leader.leader_epoch >= 0
        assert [(n.node_id, n.host, n.port) for n in response.node_endpoints] == [(leader, host, int(port))]


def test_a_session_is_not_fooled_by_a_recreated_topic(cluster):
    """KIP-516: a session that fetched a topic by id is answered INCONSISTENT_TOPIC_ID once the
    topic is deleted and recreated under its name, the old id UNKNOWN_TOPIC_ID, until the
    fetcher replaces the partition under the new id (as Kafka's Java client does)."""
    topic = "reborn"
    cluster.create_topic(topic, partitions=1, replication_factor=3)   # every broker hosts it
    address = cluster.leader_address(topic, 0)
    old = _topic_id(address, topic)
    with WireClient(address) as c:
        _produce(c, topic, [b"old"] * 3)
        full = _fetch_by_id(c, 0, 0, {(old, 0): 0}, max_wait_ms=30_000)   # once replicated (the HW)
        assert full.session_id > 0 and _batches(_by_id(full)[(old, 0)].records)
        admin = cluster.admin()   # kept alive until its future resolves
        admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)
        wait_until(lambda: _topic_id(address, topic) is None, 60, "the deletion reaches the broker", 0.2)
        wait_until(lambda: cluster.create_topic(topic, partitions=1, replication_factor=3) or True, 60,
                   "the topic created again (TopicExists while its deletion completes)", 0.5)
        wait_until(lambda: _topic_id(address, topic) not in (None, old), 60, "the new topic reaches the broker", 0.2)
        new = _topic_id(address, topic)
        sid = full.session_id
        stale = _by_id(_fetch_by_id(c, sid, 1, {}))
        assert stale[(old, 0)].error_code == ErrorCode.inconsistent_topic_id
        assert _by_id(_fetch_by_id(c, 0, -1, {(old, 0): 0}))[(old, 0)].error_code == ErrorCode.unknown_topic_id
        with WireClient(cluster.leader_address(topic, 0)) as leader:
            _produce(leader, topic, [b"new"])
        replaced = _by_id(_fetch_by_id(c, sid, 2, {(new, 0): 0}, forgotten=[(old, (0,))], max_wait_ms=30_000))
    assert set(replaced) == {(new, 0)} and replaced[(new, 0)].error_code == ErrorCode.none
    assert [b.base_offset for b in _batches(replaced[(new, 0)].records)] == [0]

