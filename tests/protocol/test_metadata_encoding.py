"""Metadata responses with cached topic entries (issue 21): byte-for-byte kio's encoding.

The handler encodes each topic's entry once per applied snapshot and version and splices the
entries into the response (odradek.broker.metadata_cache); these tests compare the
result with kio's encoding of the whole response for every Metadata version, and check what
stays per request (authorized operations, errors, the throttle time) and that a new snapshot
is answered from new entries.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import uuid
from types import SimpleNamespace

import pytest
from kio.static.constants import EntityType

from bench.metadata_handler import Replicas
from odradek.broker.handlers import metadata as md
from odradek.broker.metadata_cache import EncodedMetadataResponse, MetadataCache, encode_topic
from odradek.cluster.model import BrokerInfo, ClusterMetadata, PartitionState, TopicMetadata
from odradek.errors import ErrorCode
from odradek.protocol.codec import Schemas, encode_response, make

BROKERS = tuple(BrokerInfo(id=i, host="127.0.0.1", port=9090 + i, internal_url="http://x", rack=f"r{i}")
                for i in (1, 2, 3))


def _snapshot(leader_epoch: int = 1, live=BROKERS) -> ClusterMetadata:
    topics = tuple(TopicMetadata(name=f"t-{t}", topic_id=str(uuid.UUID(int=t + 1)), partitions=tuple(
        PartitionState(partition=p, replicas=(1, 2, 3), leader=1 + p % 3, leader_epoch=leader_epoch, isr=(1, 2, 3))
        for p in range(4))) for t in range(5))
    return ClusterMetadata(cluster_id="c", controller_id="x", controller_epoch=1, brokers=live, topics=topics)


def _ctx(snapshot: ClusterMetadata):
    return SimpleNamespace(replicas=Replicas(snapshot), authorizer=None, cluster_id="c",
                           config=SimpleNamespace(auto_create_topics=False), metadata_cache=MetadataCache())


def _request(version: int, names=None, ops: bool = False):
    s = Schemas(3, version, EntityType.request)
    topics = None if names is None else tuple(make(s.MetadataRequestTopic, name=n, topic_id=uuid.UUID(int=0))
                                              for n in names)
    return make(s.MetadataRequest, topics=topics, allow_auto_topic_creation=False,
                include_cluster_authorized_operations=ops, include_topic_authorized_operations=ops)


def _answer(ctx, version: int, **kwargs):
    return asyncio.run(md.metadata(ctx, SimpleNamespace(api_version=version), _request(version, **kwargs)))


def _whole(response: EncodedMetadataResponse, topics: tuple):
    """The same response as one kio entity (what the handler built before the cache)."""
    head = response.head
    if hasattr(head, "throttle_time"):
        head = dataclasses.replace(head, throttle_time=response.throttle_time)
    return dataclasses.replace(head, topics=topics)


@pytest.mark.parametrize("version", range(0, 13))
def test_spliced_topics_are_kios_bytes(version):
    s = Schemas(3, version)
    topic = make(s.MetadataResponseTopic, error_code=ErrorCode.none, name="a", topic_id=uuid.UUID(int=7),
                 is_internal=False, topic_authorized_operations=-2147483648, partitions=tuple(
                     make(s.MetadataResponsePartition, error_code=ErrorCode.none, partition_index=p, leader_id=1,
                          leader_epoch=3, replica_nodes=(1, 2), isr_nodes=(1,), offline_replicas=(2,))
                     for p in range(3)))
    missing = make(s.MetadataResponseTopic, error_code=ErrorCode.unknown_topic_or_partition, name="b",
                   topic_id=uuid.UUID(int=0), is_internal=False, partitions=(), topic_authorized_operations=5)
    head = make(s.MetadataResponse, throttle_time=datetime.timedelta(0), cluster_id="c", controller_id=2,
                brokers=(make(s.MetadataResponseBroker, node_id=1, host="h", port=1, rack="r"),), topics=(),
                cluster_authorized_operations=12)
    for topics in ((), (topic,), (topic, missing, topic)):
        spliced = EncodedMetadataResponse(head, tuple(encode_topic(t) for t in topics), version,
                                          datetime.timedelta(milliseconds=40))
        assert encode_response(3, version, 9, spliced) == encode_response(3, version, 9, _whole(spliced, topics))


@pytest.mark.parametrize("version", [1, 9, 12])
def test_handler_answers_from_the_snapshots_entries(version):
    ctx = _ctx(_snapshot())
    first = _answer(ctx, version)
    assert len(first.topics) == 5 and _answer(ctx, version).topics[0] is first.topics[0]  # cached
    # The throttle time a quota adds (dataclasses.replace, as on any response) is encoded.
    throttled = dataclasses.replace(first, throttle_time=datetime.timedelta(milliseconds=250))
    if version >= 3:
        assert encode_response(3, version, 1, throttled) != encode_response(3, version, 1, first)
    # A new snapshot (leader epochs moved, broker 3 gone): new entries.
    ctx.replicas = Replicas(_snapshot(leader_epoch=2, live=BROKERS[:2]))
    moved = _answer(ctx, version)
    assert moved.topics[0] != first.topics[0]
    decoded = _decode(version, encode_response(3, version, 1, moved))
    partition = decoded.topics[0].partitions[2]
    assert partition.leader_id == -1 and partition.error_code == ErrorCode.leader_not_available
    if version >= 7:
        assert partition.leader_epoch == 2
    if version >= 5:
        assert partition.offline_replicas == (3,)
    assert [t.name for t in decoded.topics] == [f"t-{i}" for i in range(5)]


def test_errors_and_authorized_operations_stay_per_request():
    ctx = _ctx(_snapshot())
    named = _decode(12, encode_response(3, 12, 1, _answer(ctx, 12, names=["t-1", "nope"], ops=True)))
    assert [t.name for t in named.topics] == ["t-1", "nope"]
    assert named.topics[0].topic_authorized_operations not in (-2147483648, 0)  # every operation: no authorizer
    assert named.topics[1].error_code == ErrorCode.unknown_topic_or_partition
    plain = _decode(12, encode_response(3, 12, 1, _answer(ctx, 12, names=["t-1"])))
    assert plain.topics[0].topic_authorized_operations == -2147483648
    assert len(plain.topics[0].partitions) == 4 and plain.brokers[0].rack == "r1"


def _decode(version: int, frame: bytes):
    from kio.index import load_response_schema
    from kio.serial import entity_reader
    schema = load_response_schema(3, version)
    view = memoryview(bytes(frame))[4:]
    _, size = entity_reader(schema.__header_schema__)(view, 0)
    body, _ = entity_reader(schema)(view, size)
    return body
