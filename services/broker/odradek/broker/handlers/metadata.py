"""Metadata and DescribeCluster: what clients learn about the cluster.

The controller is a service of its own, not a broker; clients send admin requests to the
``controller_id`` that Metadata names, so we name the lowest live broker id: every broker
forwards admin requests to the active controller.
"""

from __future__ import annotations

import asyncio
import uuid

from kio.static.constants import uuid_zero

from odradek.broker.context import BrokerContext
from odradek.broker.handlers.answer import ZERO
from odradek.broker.metadata_cache import EncodedMetadataResponse, EncodedTopics, encode_topic
from odradek.broker.security.acl import Operation, ResourceType
from odradek.broker.security.authorizer import OPERATIONS_OMITTED, allowed, authorized_operations
from odradek.broker.security.session import current
from odradek.cluster import control_plane as cp
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make
from odradek.topics import is_internal

_AUTO_CREATE_TIMEOUT = 5.0


def controller_id(ctx: BrokerContext) -> int:
    live = ctx.replicas.live_brokers()
    return live[0].id if live else -1


async def metadata(ctx: BrokerContext, header, req):
    version = header.api_version
    s = Schemas(ApiKey.METADATA, version)
    cache = ctx.metadata_cache.topics(ctx.replicas.metadata)
    if req.topics is None:
        names = cache.names
        if ctx.authorizer is not None:  # as Kafka: topics the principal may not describe are left out
            names = [n for n in names if allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, n, log_denied=False)]
    else:
        names = [t.name if t.name is not None else _name_of(ctx, t.topic_id) for t in req.topics]
    allow_auto = getattr(req, "allow_auto_topic_creation", True)
    with_ops = getattr(req, "include_topic_authorized_operations", False)
    topics = tuple([await _encoded_topic(ctx, s, cache, version, name, allow_auto, with_ops) for name in names])
    brokers = tuple(make(s.MetadataResponseBroker, node_id=b.id, host=host, port=port, rack=b.rack)
                    for b, host, port in live_endpoints(ctx))
    head = make(s.MetadataResponse, throttle_time=ZERO, brokers=brokers, cluster_id=ctx.cluster_id,
                controller_id=controller_id(ctx), topics=(),
                cluster_authorized_operations=authorized_operations(
                    ctx, ResourceType.CLUSTER, wanted=getattr(req, "include_cluster_authorized_operations", False)))
    return EncodedMetadataResponse(head, topics, version)


def live_endpoints(ctx: BrokerContext):
    """Live brokers with their address on the listener this request came in on (as Kafka: a
    broker without that listener is left out)."""
    listener = current().listener
    for b in ctx.replicas.live_brokers():
        address = b.endpoint(listener)
        if address is not None:
            yield b, *address


def _name_of(ctx: BrokerContext, topic_id) -> str | None:
    meta = ctx.replicas.topic_by_id(str(topic_id))
    return meta.name if meta else None


async def _encoded_topic(ctx: BrokerContext, s, cache: EncodedTopics, version: int, name: str | None,
                         allow_auto: bool, with_ops: bool) -> bytes:
    """The topic's entry: from the snapshot's cache unless it carries an error or the principal's
    operations, which are encoded for this request alone."""
    if name is not None and not allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, name):
        return encode_topic(_no_topic(s, name, ErrorCode.topic_authorization_failed))
    meta = ctx.replicas.topic(name) if name else None
    if meta is None:
        return encode_topic(_no_topic(s, name, await _missing_topic_error(ctx, name, allow_auto)))
    if with_ops:
        return encode_topic(_topic(ctx, s, meta, authorized_operations(ctx, ResourceType.TOPIC, meta.name)))
    return cache.entry(version, meta.name, lambda: _topic(ctx, s, meta, OPERATIONS_OMITTED))


def _topic(ctx: BrokerContext, s, meta, operations: int):
    partitions = tuple(_partition(ctx, s, p) for p in meta.partitions)
    return make(s.MetadataResponseTopic, error_code=ErrorCode.none, name=meta.name,
                topic_id=uuid.UUID(meta.topic_id), is_internal=is_internal(meta.name),
                partitions=partitions, topic_authorized_operations=operations)


def _no_topic(s, name: str | None, error: ErrorCode):
    return make(s.MetadataResponseTopic, error_code=error, name=name, topic_id=uuid_zero, is_internal=False,
                partitions=(), topic_authorized_operations=OPERATIONS_OMITTED)


def _partition(ctx: BrokerContext, s, p):
    live = ctx.replicas.is_live
    error = ErrorCode.none if p.leader >= 0 and live(p.leader) else ErrorCode.leader_not_available
    return make(s.MetadataResponsePartition, error_code=error, partition_index=p.partition,
                leader_id=p.leader if live(p.leader) else -1, leader_epoch=p.leader_epoch,
                replica_nodes=p.replicas, isr_nodes=p.isr,
                offline_replicas=tuple(r for r in p.replicas if not live(r)))


async def _missing_topic_error(ctx: BrokerContext, name: str | None, allow_auto: bool) -> ErrorCode:
    """Kafka's answer for a topic it doesn't have, creating it if auto-creation applies."""
    if name is None or not (allow_auto and ctx.config.auto_create_topics):
        return ErrorCode.unknown_topic_or_partition
    if not (allowed(ctx, Operation.CREATE, ResourceType.CLUSTER)
            or allowed(ctx, Operation.CREATE, ResourceType.TOPIC, name)):
        return ErrorCode.topic_authorization_failed
    try:
        await ctx.controller.call(cp.create_topic(cp.CreateTopic(name)), timeout=_AUTO_CREATE_TIMEOUT)
    except KafkaError as e:
        if e.code == ErrorCode.invalid_topic_exception:
            return ErrorCode.invalid_topic_exception
    except asyncio.CancelledError:
        raise
    # Created (or being created): clients retry until the leader is known, as with Kafka.
    return ErrorCode.leader_not_available


async def describe_cluster(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.DESCRIBE_CLUSTER, header.api_version)
    brokers = tuple(make(s.DescribeClusterBroker, broker_id=b.id, host=host, port=port, rack=b.rack)
                    for b, host, port in live_endpoints(ctx))
    return make(s.DescribeClusterResponse, throttle_time=ZERO, error_code=ErrorCode.none,
                error_message=None, endpoint_type=1, cluster_id=ctx.cluster_id,
                controller_id=controller_id(ctx), brokers=brokers,
                cluster_authorized_operations=authorized_operations(
                    ctx, ResourceType.CLUSTER, wanted=req.include_cluster_authorized_operations))

