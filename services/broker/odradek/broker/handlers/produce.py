"""Produce: append each partition's record batch on the leader.

acks=0 gets no response; if any partition failed, the connection is closed so the client
notices, as Kafka does. acks=1 answers after the leader's write. acks=all (-1) is refused
with NOT_ENOUGH_REPLICAS when the ISR is below min.insync.replicas; otherwise, after the
write, the request is parked in the partition's purgatory until the high watermark passes
its last offset (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below the minimum
meanwhile, NOT_LEADER_OR_FOLLOWER if leadership moved), or REQUEST_TIMED_OUT at the
request's timeout.
"""

from __future__ import annotations

import asyncio
import datetime
import time

from odradek.broker.context import BrokerContext
from odradek.broker.handlers.answer import Answer
from odradek.broker.metrics.stats import FAILED_PRODUCE, remote_time
from odradek.broker.security.acl import Operation, ResourceType
from odradek.config.quotas import PRODUCER_BYTE_RATE
from odradek.broker.quotas.throttling import record_bytes
from odradek.broker.security.authorizer import allowed
from odradek.broker.security.session import current
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make
from odradek.protocol.connection import ConnectionClosed

_UTC = datetime.timezone.utc


async def produce(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.PRODUCE, header.api_version)
    results: dict[tuple[str, int], object] = {}
    waits: dict[tuple[str, int], tuple[asyncio.Future, object]] = {}
    order = []
    denied = _denied_topics(ctx, req) if ctx.authorizer is not None else {}
    for td in req.topic_data:
        for pd in td.partition_data:
            key = (td.name, pd.index)
            order.append(key)
            if td.name in denied:
                results[key] = _failure(s, pd.index, denied[td.name], None)
                continue
            try:
                info = _append(ctx, td.name, pd, req.acks)
                ctx.topic_stats.produced(td.name, info.valid_bytes, info.records_count)
                if req.acks == -1:
                    waits[key] = (ctx.replicas.replicated(td.name, pd.index, info.last_offset), info)
                else:
                    results[key] = _success(s, pd.index, info)
            except KafkaError as e:
                if ctx.replicas.topic(td.name) is not None:  # no series for names a client made up
                    ctx.topic_stats.failed(td.name, FAILED_PRODUCE)
                results[key] = _failure(s, pd.index, e.code, e.message)
    if waits:
        parked = time.monotonic()
        await _await_replication(s, waits, results, req.timeout)
        remote_time(time.monotonic() - parked)
    throttle = record_bytes(ctx.quotas, PRODUCER_BYTE_RATE, header, current().request_bytes)  # 0: no quota
    failed = any(r.error_code != ErrorCode.none for r in results.values())
    if req.acks == 0:
        if failed:
            raise ConnectionClosed("acks=0 produce failed; closing so the producer notices")
        return Answer(None, throttle)   # no response, but the connection is muted all the same
    topics: dict[str, list] = {}
    for key in order:
        topics.setdefault(key[0], []).append(results[key])
    return Answer(make(s.ProduceResponse, throttle_time=datetime.timedelta(milliseconds=throttle), responses=tuple(
        make(s.TopicProduceResponse, name=name, partition_responses=tuple(parts)) for name, parts in topics.items())),
        throttle)


def _denied_topics(ctx: BrokerContext, req) -> dict[str, ErrorCode]:
    """Topics this producer may not write to, with Kafka's code (a transactional.id it may not
    write covers every topic)."""
    names = {td.name for td in req.topic_data}
    if req.transactional_id is not None and not allowed(ctx, Operation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                        req.transactional_id):
        return dict.fromkeys(names, ErrorCode.transactional_id_authorization_failed)
    return {name: ErrorCode.topic_authorization_failed for name in names
            if not allowed(ctx, Operation.WRITE, ResourceType.TOPIC, name)}


def _append(ctx: BrokerContext, topic: str, pd, acks: int):
    if not pd.records:
        raise KafkaError(ErrorCode.invalid_record, "produce request without a record batch")
    return ctx.replicas.append(topic, pd.index, memoryview(bytearray(pd.records)), acks=acks)


async def _await_replication(s, waits, results, timeout) -> None:
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else timeout / 1000
    futures = [f for f, _ in waits.values()]
    await asyncio.wait(futures, timeout=max(seconds, 0))
    for key, (future, info) in waits.items():
        if not future.done():
            future.cancel()
            results[key] = _failure(s, key[1], ErrorCode.request_timed_out,
                                    "the high watermark did not reach the batch within the request timeout")
        elif future.result() == ErrorCode.none:
            results[key] = _success(s, key[1], info)
        else:
            results[key] = _failure(s, key[1], future.result(), None)


def _success(s, index: int, info):
    append_time = (datetime.datetime.fromtimestamp(info.log_append_time_ms / 1000, _UTC)
                   if info.log_append_time_ms >= 0 else None)
    return make(s.PartitionProduceResponse, index=index, error_code=ErrorCode.none,
                base_offset=info.first_offset, log_append_time=append_time,
                log_start_offset=info.log_start_offset, record_errors=(), error_message=None)


def _failure(s, index: int, code: ErrorCode, message: str | None):
    return make(s.PartitionProduceResponse, index=index, error_code=code, base_offset=-1,
                log_append_time=None, log_start_offset=-1, record_errors=(), error_message=message)
