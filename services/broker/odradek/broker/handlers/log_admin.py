"""DeleteRecords (21), DescribeLogDirs (35) and DescribeProducers (61): what Kafka's
``kafka-delete-records``, ``kafka-log-dirs`` and ``kafka-transactions describe-producers`` ask
a partition's leader (or, for log dirs, each broker) about its logs.

DeleteRecords moves the leader's log start offset (the next maintenance tick deletes the whole
segments below it); followers follow it from the ``log_start_offset`` of Fetch responses and
report theirs in Fetch requests. The answer waits in the partition's purgatory (the replica
manager's ``delete_records``, Kafka's DelayedDeleteRecords) until the *low watermark* — the
smallest log start offset of the leader and its live followers — reaches the requested
offset, or the request's timeout passes (REQUEST_TIMED_OUT).
"""

from __future__ import annotations

import asyncio
import os

from odradek.broker.context import BrokerContext
from odradek.broker.handlers.answer import ZERO
from odradek.broker.security.acl import Operation, ResourceType
from odradek.broker.security.authorizer import allowed
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make


# -- DeleteRecords -----------------------------------------------------------------------------
async def delete_records(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.DELETE_RECORDS, header.api_version)
    timeout = max(req.timeout.total_seconds(), 0.0)
    topics = []
    for t in req.topics:
        results = await asyncio.gather(*(_delete_one(ctx, t.name, p.partition_index, p.offset, timeout)
                                         for p in t.partitions))
        topics.append(make(s.DeleteRecordsTopicResult, name=t.name, partitions=tuple(
            make(s.DeleteRecordsPartitionResult, partition_index=p.partition_index, low_watermark=low, error_code=err)
            for p, (low, err) in zip(t.partitions, results))))
    return make(s.DeleteRecordsResponse, throttle_time=ZERO, topics=tuple(topics))


async def _delete_one(ctx: BrokerContext, topic: str, partition: int, offset: int,
                      timeout: float) -> tuple[int, ErrorCode]:
    if not allowed(ctx, Operation.DELETE, ResourceType.TOPIC, topic):
        return -1, ErrorCode.topic_authorization_failed
    try:
        deleted = ctx.replicas.delete_records(topic, partition, offset)
    except KafkaError as e:
        return -1, e.code
    try:
        return await asyncio.wait_for(deleted, timeout)
    except asyncio.TimeoutError:
        return -1, ErrorCode.request_timed_out


# -- DescribeLogDirs ---------------------------------------------------------------------------
async def describe_log_dirs(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.DESCRIBE_LOG_DIRS, header.api_version)
    if not allowed(ctx, Operation.DESCRIBE, ResourceType.CLUSTER):
        return make(s.DescribeLogDirsResponse, throttle_time=ZERO, error_code=ErrorCode.cluster_authorization_failed,
                    results=())
    logs = ctx.replicas.logs
    data_dir = logs.data_dir.resolve()
    if logs.failures.offline:
        result = make(s.DescribeLogDirsResult, error_code=ErrorCode.kafka_storage_error, log_dir=str(data_dir),
                      topics=(), total_bytes=-1, usable_bytes=-1)
        return make(s.DescribeLogDirsResponse, throttle_time=ZERO, error_code=ErrorCode.none, results=(result,))
    wanted = None if req.topics is None else {t.topic: set(t.partitions) for t in req.topics}
    by_topic: dict[str, list] = {}
    for lg in sorted(logs.logs(), key=lambda lg: (lg.topic, lg.partition)):
        if wanted is not None and lg.partition not in wanted.get(lg.topic, ()):
            continue
        by_topic.setdefault(lg.topic, []).append(make(
            s.DescribeLogDirsPartition, partition_index=lg.partition, partition_size=lg.size,
            offset_lag=max(lg.high_watermark - lg.log_end_offset, 0), is_future_key=False))
    total, usable = _disk(data_dir)
    topics = tuple(make(s.DescribeLogDirsTopic, name=name, partitions=tuple(parts)) for name, parts in by_topic.items())
    result = make(s.DescribeLogDirsResult, error_code=ErrorCode.none, log_dir=str(data_dir), topics=topics,
                  total_bytes=total, usable_bytes=usable)
    return make(s.DescribeLogDirsResponse, throttle_time=ZERO, error_code=ErrorCode.none, results=(result,))


def _disk(path) -> tuple[int, int]:
    """(total, usable) bytes of the file system holding ``path``, as Kafka reports them (v4)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


# -- DescribeProducers -------------------------------------------------------------------------
async def describe_producers(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.DESCRIBE_PRODUCERS, header.api_version)
    topics = []
    for t in req.topics:
        read = allowed(ctx, Operation.READ, ResourceType.TOPIC, t.name)
        topics.append(make(s.TopicResponse, name=t.name, partitions=tuple(
            _producers_of(ctx, s, t.name, p, read) for p in t.partition_indexes)))
    return make(s.DescribeProducersResponse, throttle_time=ZERO, topics=tuple(topics))


def _producers_of(ctx: BrokerContext, s, topic: str, partition: int, read: bool):
    def failed(code: ErrorCode, message: str | None = None):
        return make(s.PartitionResponse, partition_index=partition, error_code=code, error_message=message,
                    active_producers=())
    if not read:
        return failed(ErrorCode.topic_authorization_failed)
    try:
        lp = ctx.replicas.leader(topic, partition)
    except KafkaError as e:
        return failed(e.code, e.message)
    producers = tuple(make(s.ProducerState, producer_id=pid, producer_epoch=entry.epoch, last_sequence=entry.last_seq,
                           last_timestamp=entry.last_timestamp, coordinator_epoch=entry.coordinator_epoch,
                           current_txn_start_offset=entry.txn_first_offset)
                      for pid, entry in sorted(lp.log.producer_state.producers.items()))
    return make(s.PartitionResponse, partition_index=partition, error_code=ErrorCode.none, error_message=None,
                active_producers=producers)


TABLE = {
    ApiKey.DELETE_RECORDS: (0, 2, delete_records),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4, describe_log_dirs),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0, describe_producers),
}
