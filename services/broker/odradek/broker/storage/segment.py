"""LogSegment: one ``.log`` file and its two indexes (Kafka's LogSegment).

On disk, in the partition directory, three files named by the segment's base offset
(20 digits, zero-padded): ``00000000000000000042.log`` (record batches, see file_records),
``.index`` and ``.timeindex`` (see index), and ``.txnindex`` when a transaction was aborted in
it (see txn_index). A segment scheduled for deletion gets a
``.deleted`` suffix on all of them and is closed and unlinked later (unlinked in a worker
thread, see manager), so that a fetch that was handed its fd can still send from it.

The segment appends batches, indexes one batch every ``index.interval.bytes``, translates
an offset to a file position, serves slices of whole batches, looks up by timestamp,
truncates, and recovers itself (re-validating every batch and rebuilding both indexes).
Not thread-safe: one event-loop thread owns it (the loader may use it from a worker
thread before the log is published).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from odradek.errors import ErrorCode, KafkaError
from odradek.records import LOG_OVERHEAD, BatchHeader, RecordBatch, TimestampType, iter_records

from .file_records import BatchLocation, FileRecords
from .index import CorruptIndex, OffsetIndex, TimeIndex, TimestampOffset
from .txn_index import TransactionIndex

__all__ = ["DELETED_SUFFIX", "FetchSlice", "LogSegment", "segment_path"]

DELETED_SUFFIX = ".deleted"
INT_MAX = 2**31 - 1


def segment_path(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / f"{base_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class FetchSlice:
    """``size`` bytes of whole batches at ``position`` of file ``fd`` (for sendfile).

    ``first_offset`` is the base offset of the first batch, ``next_offset`` the offset after
    the last one. ``size == 0`` (and ``fd == -1``) when there is nothing to send.
    """

    fd: int
    position: int
    size: int
    first_offset: int
    next_offset: int

    def read(self) -> bytes:
        """The bytes themselves (a copy: for tests and tools, not the fetch path)."""
        return os.pread(self.fd, self.size, self.position) if self.size else b""


class LogSegment:
    def __init__(self, directory: Path, base_offset: int, *, index_bytes: int,
                 index_interval_bytes: int, segment_jitter_ms: int = 0, now_ms: int = 0,
                 suffix: str = "") -> None:
        self.base_offset = base_offset
        self.log = FileRecords(segment_path(directory, base_offset, ".log" + suffix))
        self.offset_index = OffsetIndex(segment_path(directory, base_offset, ".index" + suffix),
                                        base_offset, index_bytes)
        self.time_index = TimeIndex(segment_path(directory, base_offset, ".timeindex" + suffix),
                                    base_offset, index_bytes)
        self.txn_index = TransactionIndex(segment_path(directory, base_offset, ".txnindex" + suffix))
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = random.randrange(segment_jitter_ms) if segment_jitter_ms > 0 else 0
        self.created_ms = now_ms
        self._bytes_since_index = 0
        self.max_timestamp_so_far = -1
        self.offset_of_max_timestamp = base_offset
        self.next_offset = base_offset
        self._first_batch_timestamp: int | None = None
        # the last batch appended: a read at the tail (a follower's or a consumer's woken fetch)
        # finds it without the index lookup and the pread scan from the indexed position
        self._last: BatchLocation | None = None
        self.deleted = False

    # -- loading ----------------------------------------------------------------------
    def load_clean(self) -> None:
        """Read what the segment needs to know from a flushed, cleanly closed segment.

        Raises CorruptIndex when an index does not describe this log: rebuild with recover().
        """
        self.offset_index.sanity_check()
        self.time_index.sanity_check()
        last = self.offset_index.lookup(2**63 - 1)
        first_scanned = next(self.log.batches_from(last.position), None)
        if self.offset_index.entries and (first_scanned is None or first_scanned.last_offset != last.offset):
            raise CorruptIndex(f"{self.offset_index.path}: its last entry {last} is not a batch of the log")
        self.max_timestamp_so_far, self.offset_of_max_timestamp = self.time_index.last_entry()
        if self.max_timestamp_so_far < 0:
            self.offset_of_max_timestamp = self.base_offset
        for batch in self.log.batches_from(last.position):
            self.next_offset = batch.next_offset
            if batch.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far, self.offset_of_max_timestamp = batch.max_timestamp, batch.last_offset
        if self.time_index.entries and self.time_index.last_entry().offset >= self.next_offset:
            raise CorruptIndex(f"{self.time_index.path} points past the end of its log")

    def recover(self, check: Callable[[RecordBatch], None]) -> int:
        """Re-validate every batch with ``check``, rebuild the indexes, cut a bad tail.

        Returns the number of bytes truncated.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self._bytes_since_index = 0
        self.max_timestamp_so_far, self.offset_of_max_timestamp = -1, self.base_offset
        self.next_offset = self.base_offset
        self._first_batch_timestamp = None
        self._last = None

        def visit(batch: RecordBatch, position: int) -> None:
            check(batch)
            if batch.base_offset < self.next_offset or batch.last_offset - self.base_offset > INT_MAX:
                raise KafkaError(ErrorCode.corrupt_message, f"batch offset {batch.base_offset} out of order")
            self._index_batch(batch, position)

        valid = self.log.valid_prefix(visit)
        removed = self.log.truncate_to(valid)
        self.txn_index.truncate_to(self.next_offset)
        return removed

    # -- appending --------------------------------------------------------------------
    def _index_batch(self, batch: RecordBatch | BatchHeader, position: int) -> None:
        # each field read once (a RecordBatch's are struct reads, a BatchHeader's properties calls)
        base, max_timestamp = batch.base_offset, batch.max_timestamp
        last, size = base + batch.last_offset_delta, batch.batch_length + LOG_OVERHEAD
        if max_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far, self.offset_of_max_timestamp = max_timestamp, last
        if self._bytes_since_index > self.index_interval_bytes:
            if not self.offset_index.is_full:
                self.offset_index.append(last, position)
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += size
        self.next_offset = last + 1
        self._last = BatchLocation(base, last, position, size)

    def append(self, batches: list[RecordBatch] | list[BatchHeader], data: memoryview | list) -> None:
        """Write ``data`` (exactly the given batches, in order; or its pieces: a leader's stamped
        headers and records) with one write."""
        start = self.log.append(data)
        first = batches[0].position
        for batch in batches:
            self._index_batch(batch, start + batch.position - first)

    def should_roll(self, *, size: int, max_timestamp: int, last_offset: int, now_ms: int,
                    segment_bytes: int, segment_ms: int) -> bool:
        """Kafka's rules: size, age (by the first batch's timestamp), full index, offset overflow."""
        if self.log.size == 0:
            return False
        waited = (max_timestamp - self.rolling_timestamp if self.rolling_timestamp >= 0
                  else now_ms - self.created_ms)
        return (self.log.size > segment_bytes - size
                or waited > segment_ms - self.roll_jitter_ms
                or self.offset_index.is_full or self.time_index.is_full
                or last_offset - self.base_offset > INT_MAX)

    @property
    def rolling_timestamp(self) -> int:
        """The max timestamp of the segment's first batch (-1 when empty or unknown)."""
        if self._first_batch_timestamp is None:
            first = next(self.log.batches_from(0), None)
            if first is None:
                return -1
            self._first_batch_timestamp = first.max_timestamp
        return self._first_batch_timestamp

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def on_become_inactive(self) -> None:
        """The segment stops being active: record its max timestamp, trim and unmap the indexes
        (a later read maps them again)."""
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp,
                                     skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.release_indexes()

    def release_indexes(self) -> None:
        """Unmap both indexes until their next use (an idle segment holds only its log's fd)."""
        self.offset_index.release()
        self.time_index.release()

    # -- reading ----------------------------------------------------------------------
    @property
    def size(self) -> int:
        return self.log.size

    @property
    def largest_timestamp(self) -> int:
        """For retention: the largest batch timestamp, else the file's modification time."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return int(os.fstat(self.log.fd).st_mtime * 1000)

    def translate_offset(self, offset: int) -> BatchLocation | None:
        """The batch holding ``offset`` (or the first after it), found from the index."""
        last = self._last
        if last is not None and last.base_offset <= offset <= last.last_offset:
            return last
        return self.log.search_for_offset(offset, self.offset_index.lookup(offset).position)

    def read(self, offset: int, max_bytes: int, max_offset: int | None,
             min_one_batch: bool) -> FetchSlice | None:
        """Whole batches from the one holding ``offset``; None if the segment has none."""
        start = self.translate_offset(offset)
        if start is None:
            return None
        limit = self.next_offset if max_offset is None else min(max_offset, self.next_offset)
        if start.base_offset >= limit:
            return FetchSlice(-1, 0, 0, offset, offset)
        if limit == self.next_offset and self.log.size - start.position <= max_bytes:
            return FetchSlice(self.log.fd, start.position, self.log.size - start.position,
                              start.base_offset, self.next_offset)
        end, next_offset = self._whole_batches_end(start, min(self._end_of(limit), start.position + max_bytes))
        if end > start.position:
            return FetchSlice(self.log.fd, start.position, end - start.position, start.base_offset, next_offset)
        if min_one_batch:
            return FetchSlice(self.log.fd, start.position, start.size, start.base_offset, start.last_offset + 1)
        return FetchSlice(-1, 0, 0, offset, offset)

    def _end_of(self, limit: int) -> int:
        """Where the batches that start at or past offset ``limit`` begin (a batch holding it is before)."""
        if limit >= self.next_offset:
            return self.log.size
        at = self.translate_offset(limit)
        if at is None:
            return self.log.size
        return at.position + at.size if at.base_offset < limit else at.position

    def _whole_batches_end(self, start: BatchLocation, stop: int) -> tuple[int, int]:
        """(end position, next offset) of the batches from ``start`` that end by ``stop``: the
        scan starts from the index, near ``stop``, not at ``start`` (one ``pread`` per batch
        header: an 8 MiB fetch of 256 KiB batches read 32 of them), and is (start position,
        its base offset) when not even the first fits."""
        end, next_offset = start.position, start.base_offset
        for batch in self.log.batches_from(max(start.position, self.offset_index.position_before(stop)), stop):
            end, next_offset = batch.position + batch.size, batch.next_offset
        return end, next_offset

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> TimestampOffset | None:
        """The first record at or after ``starting_offset`` with a timestamp >= ``timestamp``."""
        from_index = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(from_index.offset, starting_offset)).position
        for header in self.log.batches_from(position):
            if header.max_timestamp >= timestamp and header.last_offset >= starting_offset:
                batch = self.log.read_batch(header.position, header.size)
                for record in iter_records(batch):
                    if record.timestamp >= timestamp and record.offset >= starting_offset:
                        return TimestampOffset(record.timestamp, record.offset)
        return None

    def max_timestamp_record(self) -> TimestampOffset:
        """The first record holding the segment's largest timestamp (ListOffsets MAX_TIMESTAMP)."""
        if self.max_timestamp_so_far < 0:
            return TimestampOffset(-1, -1)
        location = self.translate_offset(self.offset_of_max_timestamp)
        if location is not None:
            batch = self.log.read_batch(location.position, location.size)
            if batch.timestamp_type == TimestampType.LOG_APPEND_TIME:
                return TimestampOffset(batch.max_timestamp, batch.base_offset)
            for record in iter_records(batch):
                if record.timestamp == batch.max_timestamp:
                    return TimestampOffset(record.timestamp, record.offset)
        return TimestampOffset(self.max_timestamp_so_far, self.offset_of_max_timestamp)

    # -- truncating, flushing, closing --------------------------------------------------
    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= ``offset``; return the bytes removed."""
        location = self.translate_offset(offset)
        if location is None:
            return 0
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        removed = self.log.truncate_to(location.position)
        self._last = None
        self.txn_index.truncate_to(offset)
        self._bytes_since_index = 0
        self.next_offset = max(self.base_offset, location.base_offset)
        self._first_batch_timestamp = None
        self.max_timestamp_so_far, self.offset_of_max_timestamp = self.time_index.last_entry()
        if self.max_timestamp_so_far < 0:
            self.offset_of_max_timestamp = self.base_offset
        for batch in self.log.batches_from(self.offset_index.lookup(offset).position):
            if batch.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far, self.offset_of_max_timestamp = batch.max_timestamp, batch.last_offset
        return removed

    def flush(self) -> None:
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def mark_deleted(self) -> None:
        """Rename the three files with a ``.deleted`` suffix; they stay open until delete()."""
        if not self.deleted:
            for f in (self.log, self.offset_index, self.time_index, self.txn_index):
                f.rename(f.path.with_name(f.path.name + DELETED_SUFFIX))
            self.deleted = True

    def moved_to(self, directory: Path) -> None:
        """Its directory was renamed (a deleted partition's): the files are found there now
        (Kafka's updateParentDir; the lazily mapped indexes open theirs by path)."""
        for f in (self.log, self.offset_index, self.time_index, self.txn_index):
            f.path = directory / f.path.name

    def close(self) -> None:
        if not self.deleted and self.log.fd >= 0:
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp,
                                         skip_full_check=True)
        self.offset_index.close()
        self.time_index.close()
        self.log.close()

    def files(self) -> list[Path]:
        """Its files' paths (wherever they are now; the ``.txnindex`` may not exist)."""
        return [self.log.path, self.offset_index.path, self.time_index.path, self.txn_index.path]

    def delete(self) -> None:
        """Close and unlink the files."""
        self.close()
        for path in self.files():
            path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, next_offset={self.next_offset})"
