"""Log: one partition's ordered segments (Kafka's UnifiedLog/LocalLog, without the catch-all).

On disk a partition is the directory ``<topic>-<partition>`` holding its segments
(``<20-digit base offset>.log/.index/.timeindex``, see segment) and its
``leader-epoch-checkpoint`` (see epoch). The recovery point, high watermark and log start
offset are kept here in memory and checkpointed by the LogManager for the whole data dir.

The log is a sorted map base offset -> segment whose last segment is active. It appends
(validate, assign offsets, roll when needed, one write), reads slices of whole batches for
sendfile, looks up by timestamp, applies retention (whole segments, oldest first, never
past the high watermark), truncates (replication), and flushes.

Transactions: ``append_marker`` writes a coordinator's commit/abort marker (a control batch)
as leader; every write (leader or follower) feeds the producer state, and each aborted
transaction it completes is recorded in the ``.txnindex`` of the segment holding its marker.
``last_stable_offset`` is min(high watermark, first offset of the oldest transaction not yet
decided and replicated); ``aborted_transactions`` answers read_committed fetches. Loading
replays the batches after the last producer snapshot at or below the recovery point, which
restores the ongoing transactions and re-adds any abort missing from a ``.txnindex``.

Segments removed by retention, truncation or the cleaner's swap leave the log at once (never
read again) and their files are renamed ``.deleted``; ``purge_deleted`` closes them once
``file.delete.delay.ms`` has passed (the manager calls it every tick, before retention), so a
FetchSlice's fd stays valid at least until the next maintenance tick, and hands their files
to the manager, which unlinks them in a worker thread as Kafka's scheduler does (an unlink
frees the file's pages in the page cache: on the loop it stalled every request). Closing a log leaves the ``.deleted``
files of segments not purged yet; the loader removes them at the next start, as Kafka's does.

Not thread-safe: every method runs on the broker's one event-loop thread. The only work
done elsewhere is ``FlushPlan.run`` (fsync of log files) and the unlinking of purged files,
in worker threads.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from odradek.errors import ErrorCode, KafkaError
from odradek.records import ControlType, build_control_batch

from .checkpoint import LEADER_EPOCH_CHECKPOINT
from .config import LogConfig
from .epoch import LeaderEpochCache
from .index import TimestampOffset
from .producer_state import BatchMetadata, CompletedTxn, ProducerStateManager, snapshot_offsets, snapshot_path
from .segment import FetchSlice, LogSegment
from .txn_index import AbortedTxn
from .validator import ValidatedAppend, validate_append

__all__ = ["AppendInfo", "FlushPlan", "Log"]


def _clock_ms() -> int:
    return time.time_ns() // 1_000_000


class AppendInfo(NamedTuple):   # one per append: a NamedTuple is built in a third of a frozen dataclass's time
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int   # -1 under CreateTime
    log_start_offset: int
    records_count: int
    valid_bytes: int


@dataclass(frozen=True, slots=True)
class FlushPlan:
    """Log files to fsync (in a worker thread), after which the log is durable to ``up_to``."""

    segments: tuple[LogSegment, ...]
    up_to: int

    def run(self) -> None:
        for segment in self.segments:
            if segment.log.fd >= 0:
                segment.log.flush()


class Log:
    # Bumped whenever any log's recovery point, high watermark or log start offset moves: the
    # manager's checkpoint pass, which reads every log, is skipped while nothing moved (at
    # 10,000 idle logs that pass was a fifth of a broker's CPU).
    offsets_moved = 0

    def __init__(self, directory: Path, config: LogConfig, segments: list[LogSegment], *, topic: str,
                 partition: int, log_start_offset: int, recovery_point: int, high_watermark: int = 0) -> None:
        if not segments:
            raise ValueError("a log has at least one segment")
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.name = f"{topic}-{partition}"  # read on every maintenance tick: made once
        self.config = config
        self._segments = list(segments)
        self._bases = [s.base_offset for s in segments]
        # with tiered storage the log starts in the object store, below the local segments
        self.log_start_offset = log_start_offset if config.remote_storage_enable \
            else max(log_start_offset, segments[0].base_offset)
        self.highest_remote_offset = -1   # Kafka's highestOffsetInRemoteStorage: the remote log manager's
        self.recovery_point = min(recovery_point, self.log_end_offset)
        self.producer_state = ProducerStateManager()
        self._high_watermark = self.log_start_offset
        self.high_watermark = high_watermark
        self.leader_epochs = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)
        self._unflushed_records = 0
        self.last_flush_ms = _clock_ms()
        self._doomed: list[tuple[LogSegment, int]] = []
        self.closed = False
        self.deleted = False   # its directory renamed for deletion (moved_to)
        self._drop_snapshots_above(self.log_end_offset)   # a recovery cut the log below them
        self._rebuild_producer_state()

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, topic: str, partition: int, recovery_point: int = 0,
             log_start_offset: int = 0, high_watermark: int = 0, clean_shutdown: bool = False) -> "Log":
        """Open (creating if needed) and recover the partition directory ``directory``."""
        from .loader import LogLoader
        loaded = LogLoader(directory, config, recovery_point=recovery_point, log_start_offset=log_start_offset,
                           clean_shutdown=clean_shutdown).load()
        start = min(log_start_offset, loaded.log_start_offset) if config.remote_storage_enable \
            else loaded.log_start_offset
        return cls(directory, config, loaded.segments, topic=topic, partition=partition,
                   log_start_offset=start, recovery_point=loaded.recovery_point,
                   high_watermark=high_watermark)

    # -- state --------------------------------------------------------------------------
    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        offset = min(max(offset, self.log_start_offset), self.log_end_offset)
        if offset != self._high_watermark:
            self._high_watermark = offset
            Log.offsets_moved += 1
        self.producer_state.replicated_up_to(offset)   # followers never ask for the LSO

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @log_start_offset.setter
    def log_start_offset(self, offset: int) -> None:
        self._log_start_offset = offset
        Log.offsets_moved += 1

    @property
    def local_log_start_offset(self) -> int:
        """The first offset on this broker's disk (Kafka's localLogStartOffset): the log start
        offset, unless tiered storage holds offsets below the first local segment."""
        if not self.config.remote_storage_enable:
            return self._log_start_offset
        return max(self._log_start_offset, self._segments[0].base_offset)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @recovery_point.setter
    def recovery_point(self, offset: int) -> None:
        self._recovery_point = offset
        Log.offsets_moved += 1

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may read up to (Kafka's LSO)."""
        first = self.producer_state.first_unstable_offset(self._high_watermark)
        return self._high_watermark if first is None else max(min(first, self._high_watermark),
                                                               self.log_start_offset)

    def _new_segment(self, base_offset: int) -> LogSegment:
        c = self.config
        return LogSegment(self.dir, base_offset, index_bytes=c.segment_index_bytes,
                          index_interval_bytes=c.index_interval_bytes, segment_jitter_ms=c.segment_jitter_ms,
                          now_ms=_clock_ms())

    def _floor(self, offset: int) -> int:
        """Index of the segment whose range holds ``offset`` (0 if it is below them all)."""
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    # -- append -------------------------------------------------------------------------
    def append(self, records: memoryview | bytes | bytearray, *, leader_epoch: int,
               now_ms: int | None = None) -> AppendInfo:
        """Append a producer's batches as leader: validate all, assign offsets, write once."""
        self._check_open()
        now = _clock_ms() if now_ms is None else now_ms
        v = validate_append(records, self.config, next_offset=self.log_end_offset,
                            leader_epoch=leader_epoch, now_ms=now, topic_partition=self.name)
        duplicate = self.producer_state.check(v.batches)
        if duplicate is not None:
            return self._duplicate_info(duplicate, v)
        self.leader_epochs.assign(leader_epoch, v.first_offset)
        return self._write(v, now)

    def _duplicate_info(self, original: BatchMetadata, v: ValidatedAppend) -> AppendInfo:
        """A retried idempotent batch: Kafka answers success with the original offsets, writes nothing."""
        return AppendInfo(original.first_offset, original.last_offset, -1, -1, v.log_append_time_ms,
                          self.log_start_offset, 0, 0)

    def _rebuild_producer_state(self) -> None:
        """Producer state from the last usable ``<offset>.snapshot`` at or below the recovery point
        (above it, the log may have lost what the snapshot saw) plus the batches after it."""
        start = 0
        for offset in reversed(snapshot_offsets(self.dir)):
            if offset <= self.recovery_point and self.producer_state.load_snapshot(snapshot_path(self.dir, offset)):
                start = offset
                break
        else:
            self.producer_state.clear()
        for segment in self._segments[self._floor(start):]:
            done = self.producer_state.update(
                segment.log.read_batch(b.position, b.size) if b.is_control else b
                for b in segment.log.batches_from(0) if b.base_offset >= start)
            for txn in done:
                if txn.aborted and (txn.producer_id, txn.last_offset) not in segment.txn_index:
                    self._index_abort(segment, txn)

    def _index_abort(self, segment: LogSegment, txn: CompletedTxn) -> None:
        first = next(iter(self.producer_state.ongoing.values()), None)
        lso = txn.last_offset + 1 if first is None or first > txn.last_offset else first
        segment.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))

    def _drop_snapshots_above(self, offset: int) -> None:
        for stale in (o for o in snapshot_offsets(self.dir) if o > offset):
            snapshot_path(self.dir, stale).unlink(missing_ok=True)

    def _drop_snapshots_below(self, offset: int) -> None:
        """Kafka deletes a deleted segment's producer snapshot: only those at/after the log start stay."""
        for stale in (o for o in snapshot_offsets(self.dir) if o < offset):
            snapshot_path(self.dir, stale).unlink(missing_ok=True)

    def append_as_follower(self, records: memoryview | bytes | bytearray, *, now_ms: int | None = None) -> AppendInfo:
        """Append batches fetched from the leader, keeping their offsets and epochs."""
        self._check_open()
        now = _clock_ms() if now_ms is None else now_ms
        v = validate_append(records, self.config, next_offset=self.log_end_offset, leader_epoch=-1,
                            now_ms=now, assign_offsets=False)
        for batch in v.batches:
            self.leader_epochs.assign(batch.partition_leader_epoch, batch.base_offset)
        return self._write(v, now)

    def append_marker(self, control_type: ControlType, producer_id: int, producer_epoch: int,
                      coordinator_epoch: int, *, leader_epoch: int, now_ms: int | None = None) -> AppendInfo:
        """Append a transaction coordinator's commit/abort marker as leader (WriteTxnMarkers).

        INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED for a stale producer or
        coordinator epoch, as Kafka's ProducerAppendInfo checks a COORDINATOR-origin append.
        """
        self._check_open()
        now = _clock_ms() if now_ms is None else now_ms
        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        batch = build_control_batch(control_type, producer_id, producer_epoch, coordinator_epoch,
                                    base_offset=self.log_end_offset, partition_leader_epoch=leader_epoch,
                                    now_ms=now)
        v = validate_append(batch, self.config, next_offset=self.log_end_offset, leader_epoch=-1,
                            now_ms=now, assign_offsets=False)
        self.leader_epochs.assign(leader_epoch, v.first_offset)
        return self._write(v, now)

    def aborted_transactions(self, start: int, upper: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [``start``, ``upper``) (a read_committed fetch),
        searched from the segment holding ``start`` until an entry's LSO reaches ``upper``."""
        found: list[AbortedTxn] = []
        for segment in self._segments[self._floor(start):]:
            entries, complete = segment.txn_index.collect(start, upper)
            found += entries
            if complete:
                break
        return found

    def _write(self, v: ValidatedAppend, now: int) -> AppendInfo:
        segment = self._maybe_roll(v.size, v.max_timestamp, v.last_offset, now)
        segment.append(v.batches, v.pieces)
        for txn in self.producer_state.update(v.batches):
            if txn.aborted:
                self._index_abort(segment, txn)
        self._unflushed_records += v.records_count
        if self._unflushed_records >= self.config.flush_messages:
            self.flush()
        return AppendInfo(v.first_offset, v.last_offset, v.max_timestamp, v.offset_of_max_timestamp,
                          v.log_append_time_ms, self.log_start_offset, v.records_count, v.size)

    def _maybe_roll(self, size: int, max_timestamp: int, last_offset: int, now: int) -> LogSegment:
        active = self.active_segment
        if active.should_roll(size=size, max_timestamp=max_timestamp, last_offset=last_offset, now_ms=now,
                              segment_bytes=self.config.segment_bytes, segment_ms=self.config.max_segment_ms):
            return self.roll()
        return active

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
        active = self.active_segment
        if active.size == 0:
            return active
        active.on_become_inactive()
        segment = self._new_segment(self.log_end_offset)
        self._segments.append(segment)
        self._bases.append(segment.base_offset)
        self.producer_state.write_snapshot(self.dir, segment.base_offset)
        return segment

    # -- read ---------------------------------------------------------------------------
    def _check_range(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise KafkaError(ErrorCode.offset_out_of_range,
                             f"offset {offset} is out of range for {self.name}: log start "
                             f"{self.log_start_offset}, log end {self.log_end_offset}")

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> FetchSlice:
        """Whole batches from the one holding ``offset``, within one segment, up to ``max_bytes``."""
        self._check_open()
        self._check_range(offset)
        if self.config.remote_storage_enable and offset < self.local_log_start_offset:   # in the store only
            raise KafkaError(ErrorCode.offset_out_of_range,
                             f"offset {offset} of {self.name} is in remote storage only (local log start "
                             f"{self.local_log_start_offset}): Fetch reads it through replication.remote_fetch")
        empty = FetchSlice(-1, 0, 0, offset, offset)
        if offset == self.log_end_offset or (max_offset is not None and offset >= max_offset):
            return empty
        for segment in self._segments[self._floor(offset):]:
            found = segment.read(offset, max_bytes, max_offset, min_one_batch)
            if found is not None:
                return found
        return empty

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record with a timestamp >= ``timestamp`` (ListOffsets), or None."""
        for segment in self._segments:
            if segment.max_timestamp_so_far >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    def latest_timestamp(self) -> TimestampOffset:
        """The record with the largest timestamp (ListOffsets MAX_TIMESTAMP); (-1, -1) if none."""
        best = max(self._segments, key=lambda s: s.max_timestamp_so_far)
        return best.max_timestamp_record()

    def end_offset_for_epoch(self, epoch: int):
        return self.leader_epochs.end_offset_for(epoch, self.log_end_offset)

    # -- retention and deletion -----------------------------------------------------------
    def _retention(self) -> tuple[int, int]:
        """(ms, bytes) this disk keeps: local.retention.* under tiered storage, else retention.*."""
        c = self.config
        return c.local_retention if c.remote_storage_enable else (c.retention_ms, c.retention_bytes)

    def _uploaded(self, seg: LogSegment, nxt: LogSegment | None) -> bool:
        """Under tiered storage a segment leaves the disk by local retention only once the
        object store holds all of it (Kafka's isSegmentEligibleForDeletion), whatever the store's state."""
        upper = nxt.base_offset if nxt is not None else self.log_end_offset
        return not self.config.remote_storage_enable or upper - 1 <= self.highest_remote_offset

    def apply_retention(self, now_ms: int) -> int:
        """Delete old segments by log start offset, retention.ms and retention.bytes (under tiered
        storage: local.retention.*, uploaded segments only); return how many."""
        self._check_open()
        if len(self._segments) == 1 and self._single_segment_kept(now_ms):
            return 0
        deleted = self._delete_old_segments(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset, now_ms)
        if not self.config.delete_enabled:
            return deleted
        retention_ms, retention_bytes = self._retention()
        if retention_ms >= 0:
            deleted += self._delete_old_segments(
                lambda seg, nxt: now_ms - seg.largest_timestamp > retention_ms and self._uploaded(seg, nxt), now_ms)
        if retention_bytes >= 0:
            excess = [self.size - retention_bytes]

            def over(seg: LogSegment, nxt: LogSegment | None) -> bool:
                if excess[0] - seg.size >= 0 and self._uploaded(seg, nxt):
                    excess[0] -= seg.size
                    return True
                return False
            deleted += self._delete_old_segments(over, now_ms)
        return deleted

    def _single_segment_kept(self, now_ms: int) -> bool:
        """What the rules below decide for a log of one segment, without running them (most
        logs of a broker with thousands of idle partitions, every maintenance tick): the log start
        rule needs a next segment, an empty one is never deleted, retention.bytes deletes it only
        at 0, retention.ms once expired."""
        (retention_ms, retention_bytes), segment = self._retention(), self._segments[0]
        return segment.size == 0 or (retention_bytes != 0 and (
            retention_ms < 0 or now_ms - segment.largest_timestamp <= retention_ms))

    def _delete_old_segments(self, predicate, now: int) -> int:
        deletable: list[LogSegment] = []
        for i, segment in enumerate(self._segments):
            nxt = self._segments[i + 1] if i + 1 < len(self._segments) else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            if upper > self._high_watermark or (nxt is None and segment.size == 0):
                break
            if not predicate(segment, nxt):
                break
            deletable.append(segment)
        if not deletable:
            return 0
        if len(deletable) == len(self._segments):
            self.roll()
        self._remove_segments(deletable, now)
        if not self.config.remote_storage_enable:   # else only the local log start moves
            self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
            self.leader_epochs.truncate_from_start(self.log_start_offset)
        self._drop_snapshots_below(self.local_log_start_offset)
        return len(deletable)

    def _remove_segments(self, segments: list[LogSegment], now: int) -> None:
        gone = {id(s) for s in segments}
        self._segments = [s for s in self._segments if id(s) not in gone]
        self._bases = [s.base_offset for s in self._segments]
        for segment in segments:
            segment.mark_deleted()
            self._doomed.append((segment, now + self.config.file_delete_delay_ms))

    def replace_segment(self, old: LogSegment, new: LogSegment | None, now_ms: int) -> None:
        """The cleaner's swap: ``new`` (same base offset, or None when emptied) takes ``old``'s place."""
        if old is self.active_segment:
            raise ValueError("the active segment is never replaced")
        at = self._segments.index(old)
        self._remove_segments([old], now_ms)
        if new is not None:
            self._segments.insert(at, new)
            self._bases.insert(at, new.base_offset)

    def purge_deleted(self, now_ms: int, *, force: bool = False) -> list[Path]:
        """Close the segments whose deletion delay has passed; return their files, for the
        caller to unlink off the event loop."""
        if not self._doomed:
            return []
        due = [s for s, t in self._doomed if force or t <= now_ms]
        self._doomed = [(s, t) for s, t in self._doomed if not (force or t <= now_ms)]
        for segment in due:
            segment.close()
        return [path for segment in due for path in segment.files()]

    def increment_log_start_offset(self, offset: int) -> None:
        """DeleteRecords: move the log start up to ``offset`` (at most the high watermark)."""
        if offset > self._high_watermark:
            raise KafkaError(ErrorCode.offset_out_of_range,
                             f"cannot move the log start of {self.name} to {offset} past the high watermark")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epochs.truncate_from_start(offset)

    def truncate_to(self, offset: int, *, now_ms: int | None = None) -> bool:
        """Drop every offset >= ``offset`` (a follower's divergent tail); True if anything went."""
        self._check_open()
        now = _clock_ms() if now_ms is None else now_ms
        if offset < 0:
            raise ValueError(f"cannot truncate {self.name} to a negative offset")
        if offset >= self.log_end_offset:
            return False
        if offset < self.log_start_offset or offset <= self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset, now_ms=now)
            return True
        later = [s for s in self._segments if s.base_offset >= offset]
        self._remove_segments(later, now)
        self.active_segment.truncate_to(offset)
        self.active_segment.resize_indexes(self.config.segment_index_bytes)
        self._after_truncation(offset)
        return True

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int | None = None) -> None:
        """Delete every segment and start empty at ``offset``."""
        now = _clock_ms() if now_ms is None else now_ms
        old = list(self._segments)
        self._segments, self._bases = [], []
        self._remove_segments(old, now)
        segment = self._new_segment(offset)
        self._segments, self._bases = [segment], [offset]
        self.log_start_offset = offset
        self.leader_epochs.clear()
        self._after_truncation(offset)

    def _after_truncation(self, offset: int) -> None:
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.high_watermark = min(self._high_watermark, self.log_end_offset)
        self.leader_epochs.truncate_from_end(self.log_end_offset)
        self._drop_snapshots_above(self.log_end_offset if self.log_end_offset > self.log_start_offset else -1)
        self._rebuild_producer_state()

    # -- flush, config, close ---------------------------------------------------------------
    def flush(self, up_to: int | None = None) -> None:
        """fsync every segment holding offsets in [recovery point, ``up_to``) (default: all)."""
        plan = self._plan(self.log_end_offset if up_to is None else up_to)
        if plan is not None:
            plan.run()
            self.flushed(plan)

    def _plan(self, up_to: int) -> FlushPlan | None:
        if up_to <= self.recovery_point:
            return None
        first = self._floor(self.recovery_point)
        segments = tuple(s for s in self._segments[first:] if s.base_offset < up_to)
        return FlushPlan(segments, up_to)

    def flush_plan(self, now_ms: int) -> FlushPlan | None:
        """What the manager should fsync now: rolled segments not yet flushed, or all after flush.ms."""
        if now_ms - self.last_flush_ms >= self.config.flush_ms:
            self.last_flush_ms = now_ms
            return self._plan(self.log_end_offset)
        return self._plan(self.active_segment.base_offset)

    def flushed(self, plan: FlushPlan) -> None:
        """Record that ``plan`` ran: indexes flushed, recovery point moved."""
        for segment in plan.segments:
            if segment.log.fd >= 0:
                segment.offset_index.flush()
                segment.time_index.flush()
                segment.txn_index.flush()
        if plan.up_to >= self.log_end_offset:
            self._unflushed_records = 0
            self.last_flush_ms = _clock_ms()
        self.recovery_point = max(self.recovery_point, min(plan.up_to, self.log_end_offset))

    def update_config(self, config: LogConfig) -> None:
        """New settings apply from the next append (and to the next segments' indexes)."""
        self.config = config
        self.active_segment.index_interval_bytes = config.index_interval_bytes

    def _check_open(self) -> None:
        if self.closed:
            raise KafkaError(ErrorCode.not_leader_or_follower, f"the log of {self.name} is closed")

    def moved_to(self, directory: Path) -> None:
        """The partition directory was renamed to ``directory`` (the log was deleted)."""
        self.dir = directory
        self.deleted = True
        self.leader_epochs.path = directory / self.leader_epochs.path.name
        for segment in (*self._segments, *(s for s, _ in self._doomed)):
            segment.moved_to(directory)

    def close(self) -> None:
        """Close every file (without fsync: call flush() first for a clean shutdown); the
        ``.deleted`` files not purged yet stay for the loader (or the deleted log's directory)."""
        if self.closed:
            return
        self.purge_deleted(0, force=True)
        if not self.deleted and self.dir.exists() and self._snapshot_worth_taking():
            self.producer_state.write_snapshot(self.dir, self.log_end_offset)
        for segment in self._segments:
            segment.close()
        self.closed = True

    def _snapshot_worth_taking(self) -> bool:
        """Kafka's takeSnapshot skips an offset already snapshotted and a log with nothing in it:
        closing 10,000 idle partitions then costs no fsync each."""
        empty = self.log_end_offset == self.log_start_offset and not self.producer_state.producers
        return not empty and not snapshot_path(self.dir, self.log_end_offset).exists()

    def __repr__(self) -> str:
        return (f"Log({self.name}, start={self.log_start_offset}, end={self.log_end_offset}, "
                f"segments={len(self._segments)})")
