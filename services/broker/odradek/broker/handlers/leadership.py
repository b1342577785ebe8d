"""ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments: forwarded to the
active controller (``control_plane.ELECT_LEADERS``, ``REASSIGN``, ``LIST_REASSIGNMENTS``), whose
per-partition answers carry Kafka's error codes."""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, TypeVar

from odradek.broker.context import BrokerContext
from odradek.broker.handlers.answer import ZERO
from odradek.broker.security.acl import Operation
from odradek.broker.security.authorizer import require_cluster
from odradek.cluster import control_plane as cp
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make

R = TypeVar("R", cp.PartitionResult, cp.OngoingReassignment)


def _seconds(timeout) -> float:
    return max(timeout.total_seconds(), 1.0)


def _by_topic(results: Iterable[R]) -> dict[str, list[R]]:
    grouped: dict[str, list[R]] = defaultdict(list)
    for r in results:
        grouped[r.topic].append(r)
    return grouped


def _message(r: cp.PartitionResult) -> str | None:
    return r.message if r.error != ErrorCode.none else None


async def elect_leaders(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.ELECT_LEADERS, header.api_version)
    partitions = None
    if req.topic_partitions is not None:
        partitions = tuple(cp.TopicPartition(t.topic, p) for t in req.topic_partitions for p in t.partitions)
    election = cp.ElectLeaders(getattr(req, "election_type", 0), partitions)
    try:
        require_cluster(ctx, Operation.ALTER)
        answer = await ctx.controller.call(cp.elect_leaders(election), timeout=_seconds(req.timeout))
        error, results = ErrorCode.none, answer.results
    except KafkaError as e:
        error, results = e.code, ()
    topics = tuple(make(s.ReplicaElectionResult, topic=topic, partition_result=tuple(
        make(s.PartitionResult, partition_id=r.partition, error_code=r.error, error_message=_message(r))
        for r in rs))
        for topic, rs in _by_topic(results).items())
    return make(s.ElectLeadersResponse, throttle_time=ZERO, error_code=error, replica_election_results=topics)


async def alter_partition_reassignments(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.ALTER_PARTITION_REASSIGNMENTS, header.api_version)
    reassign = cp.Reassign(tuple(
        cp.Reassignment(t.name, p.partition_index, tuple(p.replicas) if p.replicas is not None else None)
        for t in req.topics for p in t.partitions))
    try:
        require_cluster(ctx, Operation.ALTER)
        answer = await ctx.controller.call(cp.reassign(reassign), timeout=_seconds(req.timeout))
        error, message, results = ErrorCode.none, None, answer.results
    except KafkaError as e:
        error, message, results = e.code, e.message, ()
    topics = tuple(make(s.ReassignableTopicResponse, name=topic, partitions=tuple(
        make(s.ReassignablePartitionResponse, partition_index=r.partition, error_code=r.error,
             error_message=_message(r)) for r in rs))
        for topic, rs in _by_topic(results).items())
    return make(s.AlterPartitionReassignmentsResponse, throttle_time=ZERO, allow_replication_factor_change=True,
                error_code=error, error_message=message, responses=topics)


async def list_partition_reassignments(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.LIST_PARTITION_REASSIGNMENTS, header.api_version)
    try:
        require_cluster(ctx, Operation.DESCRIBE)
        answer = await ctx.controller.call(cp.list_reassignments(), timeout=_seconds(req.timeout))
        error, message, ongoing = ErrorCode.none, None, answer.reassignments
    except KafkaError as e:
        error, message, ongoing = e.code, e.message, ()
    if req.topics is not None:
        wanted = {(t.name, p) for t in req.topics for p in t.partition_indexes}
        ongoing = tuple(r for r in ongoing if (r.topic, r.partition) in wanted)
    topics = tuple(make(s.OngoingTopicReassignment, name=topic, partitions=tuple(
        make(s.OngoingPartitionReassignment, partition_index=r.partition, replicas=r.replicas,
             adding_replicas=r.adding_replicas, removing_replicas=r.removing_replicas)
        for r in rs)) for topic, rs in _by_topic(ongoing).items())
    return make(s.ListPartitionReassignmentsResponse, throttle_time=ZERO, error_code=error, error_message=message,
                topics=topics)
