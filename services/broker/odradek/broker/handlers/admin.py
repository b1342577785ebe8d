"""CreateTopics, DeleteTopics, CreatePartitions: forwarded to the active controller.

Like Kafka, the broker answers once the change is visible in its own metadata (or the
request's timeout passes: then REQUEST_TIMED_OUT, while the change still completes). What it
does not cut short is the controller's write, which makes the change durable (Kafka's
ZooKeeper writes are synchronous whatever the timeout); a timeout of 0 is answered once it is
written, as Kafka answers it once the change is triggered. Bounding that call at 1 s for a
timeout of 0 lost the 50 topics of one CreateTopics request in 2 of 4 runs at 10,000
partitions (the controller busy for 2.2 s), which librdkafka, hiding the REQUEST_TIMED_OUT a
timeout of 0 may give, reported created. The
partitions each creates or deletes count against the client's ``controller_mutation_rate``
(odradek.broker.quotas.mutation): a topic refused by a strict quota is still validated first,
so its answer is the error Kafka's checks give before the quota's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid

from kio.static.constants import uuid_zero

from odradek.broker.context import BrokerContext
from odradek.broker.handlers.answer import ZERO, Answer
from odradek.broker.handlers.configs import topic_entries
from odradek.broker.quotas.mutation import MutationQuota, ThrottlingQuotaExceeded, for_request
from odradek.broker.security.acl import Operation, ResourceType
from odradek.broker.security.authorizer import DENIED, allowed
from odradek.cluster import control_plane as cp
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make



CONTROLLER_WRITE_TIMEOUT_S = 30.0  # the controller's answer, whatever the request's timeout


async def _await_metadata(ctx: BrokerContext, done, timeout: float) -> bool:
    """Wait until ``done()`` holds for this broker's metadata, or the timeout passes; a
    timeout of 0 does not wait (Kafka answers such a request once the change is triggered)."""
    if timeout <= 0:
        return True
    deadline = time.monotonic() + timeout
    while not done():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        try:
            await asyncio.wait_for(ctx.replicas.metadata_changed.wait(), remaining)
        except asyncio.TimeoutError:
            return done()
    return True


def _seconds(timeout) -> float:
    return max(timeout.total_seconds(), 0.0)


async def create_topics(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.CREATE_TOPICS, header.api_version)
    asked = sum(len(t.assignments) or max(t.num_partitions, 0) for t in req.topics)
    if asked > cp.MAX_PARTITIONS_PER_REQUEST:  # Kafka refuses the whole request, each topic alike
        refused = KafkaError(ErrorCode.policy_violation, cp.TOO_MANY_PARTITIONS)
        return make(s.CreateTopicsResponse, throttle_time=ZERO,
                    topics=tuple(_create_failed(s, t.name, refused) for t in req.topics))
    cluster_create = allowed(ctx, Operation.CREATE, ResourceType.CLUSTER)
    quota = for_request(ctx.quotas, header)
    results = await asyncio.gather(*(
        _create_one(ctx, s, t, req, quota)
        if cluster_create or allowed(ctx, Operation.CREATE, ResourceType.TOPIC, t.name)
        else _denied(s, t.name) for t in req.topics))
    return Answer(make(s.CreateTopicsResponse, throttle_time=ZERO, topics=tuple(results)), quota.finish())


def _create_failed(s, name: str, e: KafkaError):
    return make(s.CreatableTopicResult, name=name, topic_id=uuid_zero, error_code=e.code, error_message=e.message,
                topic_config_error_code=ErrorCode.none, num_partitions=-1, replication_factor=-1, configs=None)


async def _denied(s, name: str):
    return _create_failed(s, name, KafkaError(ErrorCode.topic_authorization_failed, DENIED))


async def _throttled_unless_invalid(ctx: BrokerContext, call, throttled: ThrottlingQuotaExceeded, timeout: float):
    """A strict quota refused the change: Kafka's checks come first, so an invalid one answers
    its own error (asked of the controller with validate_only), a valid one 89."""
    await ctx.controller.call(call, timeout=max(timeout, CONTROLLER_WRITE_TIMEOUT_S))
    raise throttled


async def _create_one(ctx: BrokerContext, s, topic, req, quota: MutationQuota):
    create = cp.CreateTopic(topic.name, topic.num_partitions, topic.replication_factor,
                            {a.partition_index: tuple(a.broker_ids) for a in topic.assignments},
                            {c.name: c.value for c in topic.configs}, req.validate_only)
    timeout = _seconds(req.timeout)
    # known now unless -1 asks for the controller's default: then counted once created
    permits = 0 if req.validate_only else len(topic.assignments) or max(topic.num_partitions, 0)
    try:
        try:
            quota.admit(permits)
        except ThrottlingQuotaExceeded as throttled:
            await _throttled_unless_invalid(ctx, cp.create_topic(dataclasses.replace(create, validate_only=True)),
                                            throttled, timeout)
        try:
            created = await ctx.controller.call(cp.create_topic(create),
                                                timeout=max(timeout, CONTROLLER_WRITE_TIMEOUT_S))
        except KafkaError:
            quota.give_back(permits)
            raise
        if not permits and not req.validate_only:
            quota.record(len(created.partitions))
        if not req.validate_only and not await _await_metadata(
                ctx, lambda: ctx.replicas.topic(topic.name) is not None, timeout):
            raise KafkaError(ErrorCode.request_timed_out, "topic created; metadata not yet propagated")
    except KafkaError as e:
        return _create_failed(s, topic.name, e)
    partitions = created.partitions
    configs = None  # v5+ describes the new topic's configs
    if hasattr(s.module, "CreatableTopicConfigs"):
        configs = tuple(make(s.CreatableTopicConfigs, name=n, value=v, read_only=False, config_source=src,
                             is_sensitive=False)
                        for n, v, src in topic_entries(ctx, created.configs))
    return make(s.CreatableTopicResult, name=topic.name,
                topic_id=uuid.UUID(created.topic_id) if created.topic_id else uuid_zero,
                error_code=ErrorCode.none, error_message=None, topic_config_error_code=ErrorCode.none,
                num_partitions=len(partitions),
                replication_factor=len(partitions[0].replicas) if partitions else -1, configs=configs)


async def delete_topics(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.DELETE_TOPICS, header.api_version)
    if header.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, None) for name in req.topic_names]
    quota = for_request(ctx.quotas, header)
    results = await asyncio.gather(*(_delete_one(ctx, s, n, i, _seconds(req.timeout), quota) for n, i in wanted))
    return Answer(make(s.DeleteTopicsResponse, throttle_time=ZERO, responses=tuple(results)), quota.finish())


async def _delete_one(ctx: BrokerContext, s, name, topic_id, timeout, quota: MutationQuota):
    if name is None and topic_id is not None:
        meta = ctx.replicas.topic_by_id(str(topic_id))
        name = meta.name if meta else None
    meta = None
    try:
        if name is None:
            raise KafkaError(ErrorCode.unknown_topic_id, f"unknown topic id {topic_id}")
        if not allowed(ctx, Operation.DELETE, ResourceType.TOPIC, name):
            raise KafkaError(ErrorCode.topic_authorization_failed, DENIED)
        meta = ctx.replicas.topic(name)
        quota.admit(len(meta.partitions) if meta is not None else 0)  # unknown here: the controller answers
        await ctx.controller.call(cp.delete_topic(name), timeout=max(timeout, CONTROLLER_WRITE_TIMEOUT_S))
        if not await _await_metadata(ctx, lambda: ctx.replicas.topic(name) is None, timeout):
            raise KafkaError(ErrorCode.request_timed_out, "deletion started; metadata not yet propagated")
        error, message = ErrorCode.none, None
    except KafkaError as e:
        error, message = e.code, e.message
    return make(s.DeletableTopicResult, name=name,
                topic_id=uuid.UUID(meta.topic_id) if name and meta else (topic_id or uuid_zero),
                error_code=error, error_message=message)


async def create_partitions(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.CREATE_PARTITIONS, header.api_version)
    quota = for_request(ctx.quotas, header)
    results = await asyncio.gather(*(_grow_one(ctx, s, t, req, quota) for t in req.topics))
    return Answer(make(s.CreatePartitionsResponse, throttle_time=ZERO, results=tuple(results)), quota.finish())


async def _grow_one(ctx: BrokerContext, s, topic, req, quota: MutationQuota):
    timeout = _seconds(req.timeout)
    grow = cp.CreatePartitions(topic.count, req.validate_only)
    try:
        if not allowed(ctx, Operation.ALTER, ResourceType.TOPIC, topic.name):
            raise KafkaError(ErrorCode.topic_authorization_failed, DENIED)
        meta = ctx.replicas.topic(topic.name)
        permits = 0 if req.validate_only or meta is None else max(topic.count - len(meta.partitions), 0)
        try:
            quota.admit(permits)
        except ThrottlingQuotaExceeded as throttled:
            await _throttled_unless_invalid(ctx, cp.create_partitions(topic.name, dataclasses.replace(
                grow, validate_only=True)), throttled, timeout)
        try:
            await ctx.controller.call(cp.create_partitions(topic.name, grow),
                                      timeout=max(timeout, CONTROLLER_WRITE_TIMEOUT_S))
        except KafkaError:
            quota.give_back(permits)
            raise

        def grown() -> bool:
            meta = ctx.replicas.topic(topic.name)
            return meta is not None and len(meta.partitions) >= topic.count
        if not req.validate_only and not await _await_metadata(ctx, grown, timeout):
            raise KafkaError(ErrorCode.request_timed_out, "partitions created; metadata not yet propagated")
        error, message = ErrorCode.none, None
    except KafkaError as e:
        error, message = e.code, e.message
    return make(s.CreatePartitionsTopicResult, name=topic.name, error_code=error, error_message=message)
