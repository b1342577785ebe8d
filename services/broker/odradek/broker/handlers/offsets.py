"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3), earliest local (-4, v8+), latest
tiered (-5, v9+), or by timestamp.

With tiered storage (KIP-405, a topic with ``remote.storage.enable``), as Kafka's
UnifiedLog.fetchOffsetByTimestamp: earliest is the log start offset (in the store), earliest
local the first offset on this broker's disk (``local_log_start_offset``), latest tiered the
highest offset the store holds (``highest_remote_offset``; -1 while it holds none); the last two
with the leader epoch of that offset from the leader-epoch cache (-1 when it has none). Without
it, as Kafka with remote storage off: the local log starts where the log does (earliest local =
earliest) and nothing is tiered (latest tiered: offset -1, epoch -1).

A timestamp is looked up in the store first (``storage.remote_timestamp``, Kafka's
RemoteLogManager.findOffsetByTimestamp), then on the disk from the local log start; it answers
the record's timestamp, offset and its batch's leader epoch (MAX_TIMESTAMP: on the disk only, as
Kafka 3.9). A store that fails answers UNKNOWN_SERVER_ERROR (Kafka's Errors.forException).

Leader only; ``current_leader_epoch`` (v4+) is fenced as Kafka does. Latest is the high
watermark for clients, the last stable offset for read_committed ones (``isolation_level`` 1)
and the log end offset for a replica (``replica_id`` >= 0); an offset found by timestamp at or
past that bound is not answered (-1), as Kafka's Partition.fetchOffsetForTimestamp.
"""

from __future__ import annotations

import logging

from odradek.broker.context import BrokerContext
from odradek.broker.handlers.answer import ZERO
from odradek.broker.security.acl import Operation, ResourceType
from odradek.broker.security.authorizer import allowed
from odradek.broker.storage.remote_metadata import RemoteStorageException
from odradek.broker.storage.remote_timestamp import find_offset_by_timestamp
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make

log = logging.getLogger(__name__)

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5
READ_COMMITTED = 1


async def list_offsets(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.LIST_OFFSETS, header.api_version)
    topics = []
    for t in req.topics:
        if not allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, t.name):
            parts = tuple(make(s.ListOffsetsPartitionResponse, partition_index=p.partition_index,
                               error_code=ErrorCode.topic_authorization_failed, timestamp=-1, offset=-1,
                               leader_epoch=-1) for p in t.partitions)
        else:
            committed = getattr(req, "isolation_level", 0) == READ_COMMITTED
            parts = tuple([await _lookup(ctx, s, t.name, p, req.replica_id >= 0, committed) for p in t.partitions])
        topics.append(make(s.ListOffsetsTopicResponse, name=t.name, partitions=parts))
    return make(s.ListOffsetsResponse, throttle_time=ZERO, topics=tuple(topics))


async def _lookup(ctx: BrokerContext, s, topic: str, p, replica: bool, committed: bool):
    try:
        lp = ctx.replicas.leader(topic, p.partition_index, getattr(p, "current_leader_epoch", -1))
        if p.timestamp in (EARLIEST_LOCAL, LATEST_TIERED):
            timestamp, offset, epoch = _tiered(lp.log, p.timestamp)
        elif p.timestamp in (EARLIEST, LATEST):
            timestamp, offset = _find(lp.log, p.timestamp, replica, committed)
            epoch = lp.state.leader_epoch if offset >= 0 else -1
        else:
            timestamp, offset, epoch = await _by_timestamp(ctx, topic, lp.log, p.timestamp, replica, committed)
        return make(s.ListOffsetsPartitionResponse, partition_index=p.partition_index,
                    error_code=ErrorCode.none, timestamp=timestamp, offset=offset, leader_epoch=epoch)
    except KafkaError as e:
        return make(s.ListOffsetsPartitionResponse, partition_index=p.partition_index,
                    error_code=e.code, timestamp=-1, offset=-1, leader_epoch=-1)
    except RemoteStorageException as e:   # Kafka's Errors.forException: not an ApiException
        log.warning("%s-%d: ListOffsets %d from remote storage failed: %s", topic, p.partition_index, p.timestamp, e)
        return make(s.ListOffsetsPartitionResponse, partition_index=p.partition_index,
                    error_code=ErrorCode.unknown_server_error, timestamp=-1, offset=-1, leader_epoch=-1)


async def _by_timestamp(ctx: BrokerContext, topic: str, log_, timestamp: int, replica: bool,
                        committed: bool) -> tuple[int, int, int]:
    """(timestamp, offset, leader epoch) of the first record at or after ``timestamp`` (or of
    MAX_TIMESTAMP's record), from the store first under tiered storage; as Kafka's
    Partition.fetchOffsetForTimestamp, nothing at or past the last fetchable offset (the log end
    for a replica, else the LSO for read_committed, else the high watermark)."""
    found = None
    reader, meta = ctx.replicas.remote_reader, ctx.replicas.topic(topic)
    # with every offset still on the disk the local search answers the same, without the store
    remote = reader is not None and meta is not None and log_.config.remote_storage_enable \
        and log_.local_log_start_offset > log_.log_start_offset
    if timestamp != MAX_TIMESTAMP and remote:
        try:
            found = await find_offset_by_timestamp(reader, log_, meta.topic_id, timestamp)
        except RemoteStorageException:
            reader.forget(log_)   # the next lookup lists the store again
            raise
    if found is None:
        local = log_.latest_timestamp() if timestamp == MAX_TIMESTAMP else log_.offset_for_timestamp(timestamp)
        found = None if local is None or local.offset < 0 else (local.timestamp, local.offset, _epoch_of(log_, local.offset))
    if found is None or found[1] >= _latest(log_, replica, committed):
        return -1, -1, -1
    return tuple(found)


def _tiered(log, timestamp: int) -> tuple[int, int, int]:
    """(no timestamp, offset, its leader epoch) for EARLIEST_LOCAL and LATEST_TIERED."""
    if timestamp == EARLIEST_LOCAL:
        offset = log.local_log_start_offset
    else:
        offset = log.highest_remote_offset if log.config.remote_storage_enable else -1
    return -1, offset, _epoch_of(log, offset)


def _epoch_of(log, offset: int) -> int:
    """The leader epoch holding ``offset`` (Kafka's LeaderEpochFileCache.epochForOffset), -1 if none."""
    held = [e.epoch for e in log.leader_epochs.entries if e.start_offset <= offset] if offset >= 0 else []
    return held[-1] if held else -1


def _find(log, timestamp: int, replica: bool, committed: bool) -> tuple[int, int]:
    return -1, log.log_start_offset if timestamp == EARLIEST else _latest(log, replica, committed)


def _latest(log, replica: bool, committed: bool) -> int:
    """The last fetchable offset + 1: the log end for a replica, else the LSO for read_committed,
    else the high watermark."""
    return log.log_end_offset if replica else log.last_stable_offset if committed else log.high_watermark
