"""ListOffsets by timestamp below the local log start (Kafka's RemoteLogManager.findOffsetByTimestamp,
KIP-405): a topic with remote.storage.enable is searched in the object store first, from the log
start offset, and on this broker's disk (from the local log start) only if the store has no record
at or after the target timestamp, as Kafka's UnifiedLog.fetchOffsetByTimestamp does.

- ``first_candidate``: the first remote segment, in the reading replica's leader-epoch lineage
  (``remote_log_plan.lineage``), whose largest timestamp is at or above the target and whose end is
  at or past the starting offset. Kafka visits the segments epoch by epoch from the epoch of the
  starting offset, each epoch's by start offset; within one lineage that is the order of start
  offsets, which is the order used here.
- ``search_segment``: in that segment, the remote time index gives the last entry at or below the
  target (its offset, at least the starting offset), the remote offset index the position to scan
  from; then the first record with a timestamp at or above the target and an offset at or past the
  starting offset, with its batch's partition leader epoch (-1 when it has none), as Kafka's
  lookupTimestamp answers.

Bytes and indexes come through the ``RemoteLogReader`` (its verified, cached chunks and index
objects). ``search_segment`` blocks: it runs in the reader's worker threads; ``find_offset_by_timestamp``
is the event loop's entry.
"""

from __future__ import annotations

import asyncio
from typing import NamedTuple, Sequence

from odradek.records import HEADER_SIZE, LOG_OVERHEAD, RecordBatch, iter_records, read_header

from .index import TimeIndex
from .log import Log
from .remote_metadata import IndexType, RemoteLogSegmentMetadata
from .remote_read import RemoteLogReader, index_position

__all__ = ["TimestampAndOffset", "find_offset_by_timestamp", "first_candidate", "search_segment",
           "time_index_offset"]

_TIME_ENTRY = TimeIndex.ENTRY    # timestamp, relative offset: the remote index is the local one's copy


class TimestampAndOffset(NamedTuple):
    """Kafka's FileRecords.TimestampAndOffset: a record found by timestamp."""
    timestamp: int
    offset: int
    leader_epoch: int    # its batch's partition leader epoch; -1 if none


def first_candidate(remote: Sequence[RemoteLogSegmentMetadata], timestamp: int,
                    starting_offset: int) -> RemoteLogSegmentMetadata | None:
    """The first remote segment (by start offset) that may hold a record at ``timestamp`` or later."""
    for m in sorted(remote, key=lambda m: m.start_offset):
        if m.max_timestamp_ms >= timestamp and m.end_offset >= starting_offset:
            return m
    return None


def time_index_offset(index: bytes, base_offset: int, timestamp: int) -> int:
    """The offset of the last time-index entry with a timestamp at or below ``timestamp`` (the
    segment's base offset if none); entries end at the first that does not increase (the unused,
    zeroed tail of an index copied while pre-allocated)."""
    found, last = base_offset, None
    for i in range(0, len(index) - _TIME_ENTRY.size + 1, _TIME_ENTRY.size):
        ts, rel = _TIME_ENTRY.unpack_from(index, i)
        if last is not None and ts <= last:
            break
        if ts > timestamp:
            break
        found, last = base_offset + rel, ts
    return found


def search_segment(reader: RemoteLogReader, segment: RemoteLogSegmentMetadata, timestamp: int,
                   starting_offset: int) -> TimestampAndOffset | None:
    """The first record of ``segment`` at or after ``starting_offset`` with a timestamp at or above
    ``timestamp`` (worker thread)."""
    start = max(time_index_offset(reader.index(segment, IndexType.TIMESTAMP), segment.start_offset, timestamp),
                starting_offset)
    pos = index_position(reader.index(segment, IndexType.OFFSET), segment.start_offset, start)
    end = segment.segment_size_in_bytes
    while pos + HEADER_SIZE <= end:
        header = read_header(reader.log_bytes(segment, pos, pos + HEADER_SIZE))
        size = header.batch_length + LOG_OVERHEAD
        if header.max_timestamp >= timestamp and header.last_offset >= starting_offset:
            batch = RecordBatch(memoryview(reader.log_bytes(segment, pos, pos + size)))
            for record in iter_records(batch):
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    epoch = header.partition_leader_epoch
                    return TimestampAndOffset(record.timestamp, record.offset, epoch if epoch >= 0 else -1)
        pos += size
    return None


async def find_offset_by_timestamp(reader: RemoteLogReader, lg: Log, topic_id: str,
                                   timestamp: int) -> TimestampAndOffset | None:
    """The store's answer for ``timestamp`` from ``lg``'s log start offset, or None (search the
    local log then). The listing is taken again if the last one does not reach the local log
    start (segments copied since may be on the store only)."""
    remote = await reader.segments(lg, topic_id, lg.local_log_start_offset - 1)
    segment = first_candidate(remote, timestamp, lg.log_start_offset)
    if segment is None:
        return None
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(reader.executor, search_segment, reader, segment, timestamp,
                                      lg.log_start_offset)
