"""Fetch v13-16 and Produce v10-11 without a broker: topic ids resolved to names and back
(KIP-516: unknown ids, a session over a recreated topic), KIP-951's leader hints encoded and
decoded with kio's schemas as a client reads them. ZStandard with old versions (KIP-110): a ZSTD
batch in Produce v3-v6, a Fetch v4-v9 of a topic configured zstd."""

from __future__ import annotations

import datetime
import uuid
from types import SimpleNamespace

from kio.schema.fetch.v16.request import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic

from odradek.broker.handlers import fetch as fetch_handler
from odradek.broker.handlers.fetch_ids import by_name, inconsistent
from odradek.broker.handlers import produce as produce_handler
from odradek.broker.handlers.leader_hints import Hints
from odradek.broker.handlers.produce_encoding import PartitionProduceResponse, ProduceResponse, TopicProduceResponse
from odradek.broker.replication.fetch_session import FetchSessionCache
from odradek.broker.replication.read import PartitionRead, fetcher_id
from odradek.cluster.model import BrokerInfo, PartitionState, TopicMetadata
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import encode_response
from odradek.records import Compression, Record, build_batch
from tests.support.kafka_wire import WireClient

OLD, NEW, NOBODY = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()


def _ctx(topic_id: uuid.UUID, leader: int = 2):
    topics = {"t": TopicMetadata("t", str(topic_id), tuple(
        PartitionState(p, (leader,), leader, 7, (leader,)) for p in range(2)))}
    brokers = [BrokerInfo(b, f"h{b}", 9090 + b, "", endpoints=(("PLAINTEXT", f"h{b}", 9090 + b),)) for b in (1, 2)]
    replicas = SimpleNamespace(topic=topics.get, live_brokers=lambda: brokers,
                               topic_by_id=lambda tid: next((t for t in topics.values() if t.topic_id == tid), None))
    return SimpleNamespace(replicas=replicas, fetch_sessions=FetchSessionCache())


def _request(session_id, epoch, topics=(), forgotten=()):
    return FetchRequest(max_wait=datetime.timedelta(0), min_bytes=1, session_id=session_id, session_epoch=epoch,
                        topics=tuple(FetchTopic(topic_id=tid, partitions=tuple(
                            FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1024) for p in parts))
                                     for tid, parts in topics),
                        forgotten_topics_data=tuple(ForgottenTopic(topic_id=tid, partitions=parts)
                                                    for tid, parts in forgotten))


def _context(ctx, req):
    return ctx.fetch_sessions.context(16, by_name(ctx, 16, req), False, 0)


def test_ids_resolve_to_names_and_unknown_ones_are_set_apart():
    ctx = _ctx(OLD)
    named = by_name(ctx, 16, _request(0, 0, [(OLD, (0, 1)), (NOBODY, (3,))]))
    assert [(t.topic, t.topic_id, [p.partition for p in t.partitions]) for t in named.topics] == [("t", OLD, [0, 1])]
    assert named.unknown == ((NOBODY, (3,)),)
    assert fetcher_id(_request(0, 0)) == -1, "v15+: the replica id is in ReplicaState"


def test_a_session_over_a_recreated_topic_is_inconsistent_until_its_fetcher_replaces_the_id():
    ctx = _ctx(OLD)
    full = _context(ctx, _request(0, 0, [(OLD, (0, 1))]))
    sid = full.respond([], 0)[0]
    assert sid and ctx.fetch_sessions.sessions[sid].ids == {"t": OLD}
    ctx.replicas = _ctx(NEW).replicas   # deleted and recreated under its name
    idle = _context(ctx, _request(sid, 1))
    assert idle.uses_topic_ids
    assert inconsistent(ctx, idle) == {"t": ErrorCode.inconsistent_topic_id}
    # Kafka's Java client replaces the partitions: added under the new id, forgotten under the old one
    replaced = _context(ctx, _request(sid, 2, [(NEW, (0, 1))], forgotten=[(OLD, (0, 1))]))
    session = ctx.fetch_sessions.sessions[sid]
    assert replaced.error == ErrorCode.none and session.ids == {"t": NEW} and set(session.topics["t"]) == {0, 1}
    assert inconsistent(ctx, replaced) == {}
    # a full request naming the old id: it names no topic now
    assert by_name(ctx, 16, _request(0, 0, [(OLD, (0,))])).unknown == ((OLD, (0,)),)


def _decoded(version: int, pieces):
    frame = b"".join(pieces)[4:]
    return WireClient.decode(ApiKey.FETCH, version, frame)


def test_fetch_v16_names_topics_by_id_and_the_leader_of_a_partition_it_does_not_lead():
    ctx = _ctx(OLD, leader=2)
    header = SimpleNamespace(api_version=16, correlation_id=5)
    results = [("t", [PartitionRead(0, ErrorCode.not_leader_or_follower), PartitionRead(1, ErrorCode.none, 3, 0)]),
               (NOBODY, [PartitionRead(0, ErrorCode.unknown_topic_id)])]
    body = _decoded(16, fetch_handler._encode(ctx, header, results, ids={"t": OLD}))
    (known, unknown) = body.responses
    assert known.topic_id == OLD and unknown.topic_id == NOBODY
    assert unknown.partitions[0].error_code == ErrorCode.unknown_topic_id
    hinted, fine = known.partitions
    assert (hinted.current_leader.leader_id, hinted.current_leader.leader_epoch) == (2, 7)
    assert fine.current_leader.leader_id == -1, "only partitions answered NOT_LEADER/FENCED are hinted"
    assert [(n.node_id, n.host, n.port) for n in body.node_endpoints] == [(2, "h2", 9092)]
    v13 = _decoded(13, fetch_handler._encode(ctx, SimpleNamespace(api_version=13, correlation_id=5), results,
                                             ids={"t": OLD}))
    assert v13.responses[0].partitions[0].current_leader.leader_id == -1, "hints from v16 only"


def test_produce_v10_names_the_leader_and_its_endpoint():
    ctx = _ctx(OLD, leader=1)
    hints = Hints(ctx)
    moved = produce_handler._hinted(PartitionProduceResponse(1, ErrorCode.not_leader_or_follower), ("t", 1), hints)
    gone = produce_handler._hinted(PartitionProduceResponse(0, ErrorCode.not_leader_or_follower), ("gone", 0), hints)
    fine = produce_handler._hinted(PartitionProduceResponse(0, ErrorCode.none, 12), ("t", 0), hints)
    response = ProduceResponse(10, (TopicProduceResponse("t", (moved, fine)), TopicProduceResponse("gone", (gone,))),
                               node_endpoints=tuple(hints.node_endpoints()))
    body = WireClient.decode(ApiKey.PRODUCE, 10, bytes(encode_response(ApiKey.PRODUCE, 10, 5, response))[4:])
    (t, unknown) = body.responses
    assert [(p.current_leader.leader_id, p.current_leader.leader_epoch) for p in t.partition_responses] == \
        [(1, 7), (-1, -1)], "only partitions answered NOT_LEADER_OR_FOLLOWER are hinted"
    assert unknown.partition_responses[0].current_leader.leader_id == -1, "a leader the broker does not know"
    assert [(n.node_id, n.host, n.port) for n in body.node_endpoints] == [(1, "h1", 9091)]


def test_produce_v3_to_v6_refuses_a_zstd_first_batch_of_a_known_partition_only():
    ctx = _ctx(OLD)
    batches = {codec: produce_handler._first_batch(build_batch([Record(b"v")], compression=codec))
               for codec in (Compression.ZSTD, Compression.GZIP)}
    firsts = {("t", 0): batches[Compression.ZSTD], ("t", 1): batches[Compression.GZIP],
              ("t", 5): batches[Compression.ZSTD], ("gone", 0): batches[Compression.ZSTD], ("t", 9): None}
    results = {("t", 5): "denied before"}
    produce_handler._refuse_zstd(ctx, firsts, results)
    refused = results.pop(("t", 0))
    assert results == {("t", 5): "denied before"}, "GZIP, unknown partitions and earlier refusals are left as they are"
    assert (refused.error_code, refused.base_offset, refused.log_start_offset, refused.error_message) == \
        (ErrorCode.unsupported_compression_type, -1, -1, None)


def test_fetch_v4_to_v9_of_a_zstd_topic_hosted_here_is_refused_and_nothing_else():
    configs = {("z", 0): SimpleNamespace(compression_type="zstd"), ("p", 0): SimpleNamespace(compression_type="producer")}
    ctx = SimpleNamespace(replicas=SimpleNamespace(log_config=lambda topic, partition: configs.get((topic, partition))))
    read = [("z", [PartitionRead(0, ErrorCode.none, 7, 1, last_stable_offset=7),
                   PartitionRead(1, ErrorCode.not_leader_or_follower)]),   # no log here: answered as read
            ("p", [PartitionRead(0, ErrorCode.none, 3, 0, last_stable_offset=3)])]
    header = SimpleNamespace(api_version=9, correlation_id=5)
    body = _decoded(9, fetch_handler._encode(ctx, header, fetch_handler._refuse_zstd(ctx, read)))
    answers = [(p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset, p.aborted_transactions)
               for t in body.responses for p in t.partitions]
    assert answers == [(ErrorCode.unsupported_compression_type, -1, -1, -1, ()),
                       (ErrorCode.not_leader_or_follower, -1, -1, -1, None), (ErrorCode.none, 3, 3, 0, None)]
