"""One cleaning of a compacted log (Kafka's Cleaner): the key map, then the rewrite of segments.

Plain data in (``CleaningJob``: directory, segment offsets, settings), plain data out
(``CleaningDone``): it runs in the broker's cleaner process, reading closed segments only,
never the Log object the event-loop thread owns.
1. map every key of the dirty part (from ``first_dirty``) to its last offset (a dict: keys
   are small here);
2. rewrite each cleanable segment into ``<base>.log/.index/.timeindex.cleaned``, keeping a
   record when no later record of its key is in the map, and dropping a tombstone (null
   value) once its batch is older than ``delete.retention.ms``. Batches keep their base
   offset, last offset delta, timestamps and producer id/epoch/base sequence, so offsets
   keep their gaps and producer metadata survives; a batch that loses no record is copied
   byte for byte, one that loses some gets its records block rebuilt (recompressed with
   its codec) and a new CRC; a batch that loses every record is dropped, but for a
   producer's last batch, which stays as an empty batch;
3. fsync the ``.cleaned`` files, then rename them ``.swap``: from here the cleaning is
   complete on disk (the swap itself: see cleaner; after a crash: see loader).
Transactions (see cleaning_txn): aborted data stays out of the key map and is removed;
markers go by Kafka's rules; a cleaned segment's ``.txnindex`` keeps the aborts whose marker
stayed.

The batch format is ``odradek.records``'s: headers are read as ``BatchHeader`` values, keys
with ``record_keys`` (no per-record objects), kept records with ``filter_batch``.
Not thread-safe: one job per process at a time, on segments nobody else writes.
"""

from __future__ import annotations

import math
import mmap
import os
import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

from odradek.errors import KafkaError
from odradek.records import (BatchHeader, RecordBatch, empty_batch, filter_batch, iter_headers, read_control,
                             record_keys, record_offsets, records_block)

from .checkpoint import fsync_dir
from .cleaning_txn import Abort, TxnCleaning
from .segment import LogSegment, segment_path
from .txn_index import AbortedTxn

__all__ = ["CLEANED_SUFFIX", "SEGMENT_FILES", "SWAP_SUFFIX", "CleaningDone", "CleaningJob", "run_job"]

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SEGMENT_FILES = (".log", ".index", ".timeindex", ".txnindex")
_WRITE_CHUNK = 1 << 20          # the cleaned segment is written in writes of about this size


@dataclass(frozen=True, slots=True)
class CleaningDone:
    segments: list[tuple[int, int | None]]     # (old base offset, new base offset or None)
    end_offset: int
    bytes_read: int
    bytes_written: int
    tombstones_due_ms: int | None


@dataclass(frozen=True, slots=True)
class CleaningJob:
    directory: Path
    segments: list[tuple[int, int]]             # (base offset, next offset) of the closed segments
    first_dirty: int
    delete_retention_ms: int
    now_ms: int
    index_bytes: int
    index_interval_bytes: int
    producer_last_offsets: Mapping[int, int] = field(default_factory=dict)   # producer id -> its last data offset
    io_max_bytes_per_second: float = math.inf
    aborted: tuple[Abort, ...] = ()             # the range's aborted transactions (its .txnindex entries)

    def run(self) -> CleaningDone:
        """Build the key map and write every cleaned segment as ``.swap`` files."""
        files = [_SegmentBytes.open(self.directory, base) for base, _ in self.segments]
        state = _Progress(_Throttle(self.io_max_bytes_per_second), TxnCleaning(self.aborted))
        try:
            last_offsets, irregular = self._offset_map(files, state)
            survivors = sorted(last_offsets.values())
            cleaned = [(base, self._clean_segment(base, data, last_offsets, survivors, irregular, state))
                       for (base, _), data in zip(self.segments, files)]
        finally:
            for data in files:
                data.close()
        fsync_dir(self.directory)
        return CleaningDone(cleaned, self.segments[-1][1], state.read, state.written, state.tombstones_due_ms)

    def _offset_map(self, files: list["_SegmentBytes"], state: "_Progress") -> tuple[dict, set[int]]:
        """key -> last offset over the dirty part, and the dirty batches with null keys or tombstones.

        Records are scanned for their keys only (no per-record objects); the dict is filled
        by ``update`` from (key, offset) pairs, so the last offset of a key wins.
        """
        last_offsets: dict[bytes | None, int] = {}
        irregular: set[int] = set()
        first_dirty = self.first_dirty
        for (_, next_offset), data in zip(self.segments, files):
            if next_offset <= first_dirty:
                continue
            for header in data.headers():
                state.throttle.spend(header.batch_length)
                state.read += header.size
                base, count, delta = header.base_offset, header.records_count, header.last_offset_delta
                if header.is_control or base + delta < first_dirty or (
                        header.is_transactional and state.txns.aborted_at(header.producer_id, base)):
                    continue
                block = records_block(data.buf, header)
                keys, special = record_keys(block, count)
                offsets = range(base, base + count) if delta == count - 1 else record_offsets(block, base, count)
                if base < first_dirty:   # a batch across the start of the dirty part
                    pairs = [(k, o) for k, o in zip(keys, offsets) if o >= first_dirty]
                    keys, offsets = [k for k, _ in pairs], [o for _, o in pairs]
                if special:
                    irregular.add(base)
                last_offsets.update(zip(keys, offsets))
        last_offsets.pop(None, None)   # records without a key are never compacted
        return last_offsets, irregular

    def _clean_segment(self, base: int, data: "_SegmentBytes", last_offsets: dict, survivors: list[int],
                       irregular: set[int], state: "_Progress") -> int | None:
        for suffix in SEGMENT_FILES:   # a leftover of an earlier, abandoned cleaning
            segment_path(self.directory, base, suffix + CLEANED_SUFFIX).unlink(missing_ok=True)
        out = _CleanedWriter(self, base)
        kept_aborts = len(state.txns.kept_aborts)
        for header in data.headers():
            kept = self._clean_batch(header, data, last_offsets, survivors, irregular, state)
            if kept is not None:
                state.throttle.spend(len(kept))
                out.add(kept)
                state.written += len(kept)
        return out.finish(state.txns.kept_aborts[kept_aborts:])

    def _clean_marker(self, header: BatchHeader, data: "_SegmentBytes", state: "_Progress") -> memoryview | None:
        """A control batch stays unless its transaction's data is gone and delete.retention.ms passed."""
        try:
            control_type = read_control(RecordBatch(data.view(header))).type if header.records_count else None
        except KafkaError:
            control_type = -1   # not an end-transaction marker: kept, as Kafka does
        if not state.txns.on_marker(header.producer_id, control_type, header.base_offset):
            return data.view(header)
        due = header.max_timestamp + self.delete_retention_ms + 1
        if due <= self.now_ms:
            return None
        state.tombstones_due_ms = min(state.tombstones_due_ms or due, due)
        return data.view(header)

    def _clean_batch(self, header: BatchHeader, data: "_SegmentBytes", last_offsets: dict,
                     survivors: list[int], irregular: set[int], state: "_Progress") -> bytes | memoryview | None:
        base, last, count = header.base_offset, header.last_offset, header.records_count
        producer_id = header.producer_id
        retain = producer_id >= 0 and self.producer_last_offsets.get(producer_id) == last
        if header.is_control:
            return self._clean_marker(header, data, state)
        if state.txns.on_data(producer_id, header.is_transactional, last):
            return empty_batch(header) if retain else None      # aborted data goes
        if count == 0:                 # an empty batch kept earlier: only while it is still the producer's last
            return data.view(header) if retain else None
        if base >= self.first_dirty and base not in irregular:
            # every key of this batch is in the map: a record stays iff the map points at it
            left = bisect_right(survivors, last) - bisect_left(survivors, base)
            if left == count:
                return data.view(header)
            if left == 0:
                return empty_batch(header) if retain else None
        max_timestamp = header.max_timestamp
        expired = max_timestamp < self.now_ms - self.delete_retention_ms
        due = max_timestamp + self.delete_retention_ms + 1

        def keep(offset: int, key: bytes | None, tombstone: bool) -> bool:
            if key is not None and last_offsets.get(key, offset) > offset:
                return False
            if tombstone and not expired:
                state.tombstones_due_ms = min(state.tombstones_due_ms or due, due)
            return not (tombstone and expired)
        kept = filter_batch(RecordBatch(data.view(header)), keep)
        return empty_batch(header) if kept is None and retain else kept


def run_job(job: CleaningJob) -> CleaningDone:
    """The cleaner process's entry point (a module-level function: it is pickled by name)."""
    return job.run()


class _CleanedWriter:
    """A ``.cleaned`` segment created on its first kept batch, written in chunks of ``_WRITE_CHUNK``."""

    def __init__(self, job: CleaningJob, base: int) -> None:
        self.job, self.base = job, base
        self.segment: LogSegment | None = None
        self.pending = bytearray()
        self.positions: list[int] = []

    def add(self, batch: bytes | memoryview) -> None:
        self.positions.append(len(self.pending))
        self.pending += batch
        if len(self.pending) >= _WRITE_CHUNK:
            self._write()

    def _write(self) -> None:
        if not self.positions:
            return
        if self.segment is None:
            self.segment = LogSegment(self.job.directory, self.base, index_bytes=self.job.index_bytes,
                                      index_interval_bytes=self.job.index_interval_bytes, suffix=CLEANED_SUFFIX)
        view = memoryview(bytes(self.pending))
        self.segment.append([RecordBatch(view, p) for p in self.positions], view)
        self.pending.clear()
        self.positions.clear()

    def finish(self, aborts: list[Abort]) -> int | None:
        """Record ``aborts`` in the ``.txnindex``, flush, then rename the files ``.swap``; None when
        nothing was kept."""
        self._write()
        new = self.segment
        if new is None:
            return None
        new.on_become_inactive()
        for abort in aborts:
            new.txn_index.append(AbortedTxn(*abort))
        new.flush()
        for f in (new.log, new.offset_index, new.time_index, new.txn_index):
            f.rename(f.path.with_name(f.path.name[:-len(CLEANED_SUFFIX)] + SWAP_SUFFIX))
        new.close()
        return self.base


class _Throttle:
    """Kafka's log.cleaner.io.max.bytes.per.second: sleep when read + written bytes run ahead of the rate."""

    def __init__(self, bytes_per_second: float) -> None:
        self.rate = bytes_per_second
        self.started = time.monotonic()
        self.spent = 0

    def spend(self, size: int) -> None:
        if self.rate == math.inf:
            return
        self.spent += size
        ahead = self.spent / self.rate - (time.monotonic() - self.started)
        if ahead > 0.01:
            time.sleep(ahead)


@dataclass(slots=True)
class _Progress:
    throttle: _Throttle
    txns: TxnCleaning
    read: int = 0
    written: int = 0
    tombstones_due_ms: int | None = None


class _SegmentBytes:
    """A closed segment's log, mapped read-only (never created: it may have been deleted meanwhile)."""

    def __init__(self, buf) -> None:
        self.buf = buf

    @classmethod
    def open(cls, directory: Path, base: int) -> "_SegmentBytes":
        with open(segment_path(directory, base, ".log"), "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return cls(b"")
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        buf.madvise(mmap.MADV_SEQUENTIAL)
        return cls(buf)

    def headers(self) -> Iterator[BatchHeader]:
        """The header of each whole batch."""
        return iter_headers(self.buf)

    def view(self, header: BatchHeader) -> memoryview:
        """The batch's bytes in the mapping (no copy)."""
        return memoryview(self.buf)[header.position:header.position + header.size]

    def close(self) -> None:
        if isinstance(self.buf, mmap.mmap):
            try:
                self.buf.close()
            except BufferError:   # a view still held (an error's traceback): the mapping goes with it
                pass
