"""What the remote log manager decides for one partition (KIP-405), as functions of its local
log and the segments the object store holds: which remote segments belong to this replica's
history, which rolled segment to copy next and with which metadata, which remote segments
remote retention deletes.

The store's manifests are the remote metadata (docs/tiered-storage.md, Remote metadata): a
leader lists them and keeps those within its leader-epoch lineage (Kafka's
RemoteLogManager.isRemoteSegmentWithinLeaderEpochs), so that a segment copied by a deposed
leader from a history that diverged (an unclean election) is never counted as uploaded.

Reads the log's state (event-loop thread); builds immutable values for the worker threads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Sequence

from .checkpoint import VERSION
from .epoch import EpochEntry
from .log import Log
from .producer_state import snapshot_path
from .remote_metadata import LogSegmentData, RemoteLogSegmentId, RemoteLogSegmentMetadata
from .segment import LogSegment, segment_path

__all__ = ["copy_candidates", "expired", "in_lineage", "lineage", "next_copy", "segment_data", "segment_metadata"]


def in_lineage(segment: RemoteLogSegmentMetadata, epochs: Sequence[EpochEntry], log_end_offset: int) -> bool:
    """Whether ``segment`` is part of the history the leader-epoch cache ``epochs`` describes:
    each of its epochs starts where the cache says (its first epoch: at or after, a segment
    begins mid-epoch), and it ends before its last epoch ended here. Epochs older than the
    cache's first (history below the log start) are taken as they are."""
    ordered = sorted(segment.segment_leader_epochs.items())
    if not ordered or not epochs:
        return False
    starts = {e.epoch: e.start_offset for e in epochs}
    for i, (epoch, start) in enumerate(ordered):
        if epoch < epochs[0].epoch:
            continue
        if epoch not in starts or (start < starts[epoch] if i == 0 else start != starts[epoch]):
            return False
    last = ordered[-1][0]
    if last < epochs[0].epoch:
        return True
    later = [e.start_offset for e in epochs if e.epoch > last]
    return segment.end_offset < (later[0] if later else log_end_offset)


def lineage(listed: Sequence[RemoteLogSegmentMetadata], log: Log) -> list[RemoteLogSegmentMetadata]:
    """The listed segments that are this replica's history, by start offset."""
    epochs = log.leader_epochs.entries
    return sorted((m for m in listed if in_lineage(m, epochs, log.log_end_offset)),
                  key=lambda m: (m.start_offset, m.end_offset))


def copy_candidates(log: Log, remote: Sequence[RemoteLogSegmentMetadata]) -> Iterator[tuple[LogSegment, int]]:
    """The rolled segments holding offsets the store lacks whose every offset is below the last
    stable offset (so below the high watermark), oldest first, each with its end offset (the next
    segment's base - 1, as Kafka's): what the leader copies, and Kafka's RemoteCopyLag."""
    copied_up_to = max((m.end_offset for m in remote), default=-1)
    bound = log.last_stable_offset
    segments = log.segments
    for segment, nxt in zip(segments, segments[1:]):
        end = nxt.base_offset - 1
        if end <= copied_up_to or segment.size == 0:
            continue
        if nxt.base_offset > bound:
            return
        yield segment, end


def next_copy(log: Log, remote: Sequence[RemoteLogSegmentMetadata]) -> tuple[LogSegment, int] | None:
    """The oldest of ``copy_candidates``; None when there is none to copy now."""
    return next(copy_candidates(log, remote), None)


def segment_metadata(log: Log, segment: LogSegment, end_offset: int, topic_id: str, broker_id: int,
                     now_ms: int) -> RemoteLogSegmentMetadata:
    """Kafka's RemoteLogSegmentMetadata of a copy: a new segment id, the leader epochs the
    segment's offsets span (each from where it starts in the segment)."""
    return RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate(topic_id, log.topic, log.partition), segment.base_offset, end_offset,
        segment.largest_timestamp, broker_id, now_ms, segment.size,
        _epochs_within(log.leader_epochs.entries, segment.base_offset, end_offset))


def _epochs_within(entries: Sequence[EpochEntry], first: int, last: int) -> dict[int, int]:
    out = {}
    for i, e in enumerate(entries):
        ends = entries[i + 1].start_offset if i + 1 < len(entries) else None
        if e.start_offset <= last and (ends is None or ends > first):
            out[e.epoch] = max(e.start_offset, first)
    return out


def segment_data(log: Log, segment: LogSegment, end_offset: int) -> LogSegmentData:
    """The files a copy uploads: the segment's, the producer snapshot taken where it ends (empty
    if retention took it) and the leader-epoch checkpoint up to its end."""
    d, base = log.dir, segment.base_offset
    txn = segment_path(d, base, ".txnindex")
    snapshot = snapshot_path(d, end_offset + 1)
    epochs = [e for e in log.leader_epochs.entries if e.start_offset <= end_offset]
    checkpoint = f"{VERSION}\n{len(epochs)}\n" + "".join(f"{e.epoch} {e.start_offset}\n" for e in epochs)
    return LogSegmentData(
        log_segment=segment_path(d, base, ".log"), offset_index=segment_path(d, base, ".index"),
        time_index=segment_path(d, base, ".timeindex"),
        transaction_index=txn if _nonempty(txn) else None,
        producer_snapshot_index=snapshot if snapshot.exists() else b"",  # type: ignore[arg-type]
        leader_epoch_index=checkpoint.encode())


def _nonempty(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False


def expired(log: Log, remote: Sequence[RemoteLogSegmentMetadata], now_ms: int) -> list[RemoteLogSegmentMetadata]:
    """The oldest remote segments remote retention deletes (Kafka's RLMExpirationTask): those
    below the log start offset, then by retention.ms (their largest timestamp), then by
    retention.bytes over the remote-only bytes plus the local log; stops at the first kept."""
    config = log.config
    local_start = log.local_log_start_offset
    total = log.size + sum(m.segment_size_in_bytes for m in remote if m.end_offset < local_start)
    excess = total - config.retention_bytes if config.retention_bytes >= 0 and config.delete_enabled else -1
    out = []
    for m in remote:
        by_time = config.delete_enabled and config.retention_ms >= 0 and now_ms - m.max_timestamp_ms > config.retention_ms
        by_size = m.end_offset < local_start and excess >= m.segment_size_in_bytes
        if not (m.end_offset < log.log_start_offset or by_time or by_size):
            break
        out.append(m)
        if m.end_offset < local_start:
            excess -= m.segment_size_in_bytes
    return out
