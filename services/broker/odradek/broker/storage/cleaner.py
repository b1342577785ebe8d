"""LogCleaner: compaction of ``cleanup.policy=compact`` logs (Kafka's LogCleaner, one worker).

A compacted log keeps, for every key, at least its last record. The cleaner works on the
*cleanable* range of a log: its closed segments (never the active one), up to the first
segment still younger than ``min.compaction.lag.ms`` or not wholly below the high
watermark. The *dirty* part of that range starts at the log's entry in the data dir's
``cleaner-offset-checkpoint`` (the offset the last cleaning reached). A log is cleaned when
dirty bytes / cleanable bytes > ``min.cleanable.dirty.ratio``.

One cleaning (``CleaningJob.run``, in the broker's cleaner process, reading closed segments
only; plain data in and out):
1. map every key of the dirty part to its last offset (a dict: keys are small here);
2. rewrite each cleanable segment into ``<base>.log/.index/.timeindex.cleaned``, keeping a
   record when no later record of its key is in the map, and dropping a tombstone (null
   value) once its batch is older than ``delete.retention.ms``. Batches keep their base
   offset, last offset delta, timestamps and producer id/epoch/base sequence, so offsets
   keep their gaps and producer metadata survives; a batch that loses no record is copied
   byte for byte, one that loses some gets its records block rebuilt (recompressed with
   its codec) and a new CRC; a batch that loses every record is dropped;
3. fsync the ``.cleaned`` files, then rename them ``.swap``: from here the cleaning is
   complete on disk.

The swap (``CleanedLog.swap``, on the event-loop thread, which owns the Log): if the log
still holds the very segments that were cleaned, each old segment is renamed ``.deleted``
(fetches in flight keep its fd until ``file.delete.delay.ms``) and its ``.swap`` files are
renamed to the final names and take its place. After a crash the loader finishes what a
``.swap`` file records (deletes the old segment, renames the swap) and drops ``.cleaned``
files. Finally the checkpoint moves to the end of the cleaned range.
"""

from __future__ import annotations

import ctypes
import logging
import math
import mmap
import os
import struct
import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

from odradek.config import effective
from odradek.records import (_CODEC_MASK, _CONTROL, CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD, Compression,
                             RecordBatch, _read_varint, compress, decompress)
from crc32c import crc32c

from .checkpoint import OffsetCheckpointFile, fsync_dir
from .log import Log
from .segment import LogSegment, segment_path

__all__ = ["CLEANER_CHECKPOINT", "CLEANED_SUFFIX", "SWAP_SUFFIX", "CleanedLog", "CleanerSettings", "CleaningJob",
           "LogCleaner", "filter_batch", "lower_priority", "run_job"]

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_FILES = (".log", ".index", ".timeindex")
_I32, _U32 = struct.Struct(">i"), struct.Struct(">I")
_WRITE_CHUNK = 1 << 20          # the cleaned segment is written in writes of about this size


@dataclass(frozen=True, slots=True)
class CleanerSettings:
    compact: bool
    delete_retention_ms: int
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int = 2**63 - 1

    @classmethod
    def of(cls, overrides: Mapping[str, str], defaults: Mapping[str, str] | None = None) -> "CleanerSettings":
        values = effective(overrides, defaults)
        return cls("compact" in str(values["cleanup.policy"]).split(","), values["delete.retention.ms"],
                   values["min.cleanable.dirty.ratio"], values["min.compaction.lag.ms"],
                   values["max.compaction.lag.ms"])


# -- records without decoding them into objects ---------------------------------------------
def _varint(buf: bytes, p: int) -> tuple[int, int]:
    """A zigzag varint, with one- and two-byte fast paths (this scan is the cleaner's hot spot)."""
    b = buf[p]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), p + 1
    b2 = buf[p + 1]
    if b2 < 0x80:
        raw = (b & 0x7F) | (b2 << 7)
        return (raw >> 1) ^ -(raw & 1), p + 2
    return _read_varint(memoryview(buf), p)


def _records(payload: bytes, count: int) -> list[tuple[int, bytes | None, bool, int, int]]:
    """(offset delta, key, is tombstone, start, end) of each record of a records block."""
    out = []
    position = 0
    varint = _varint
    for _ in range(count):
        length, start = varint(payload, position)
        end = start + length
        p = start + 1                                   # attributes
        while payload[p] & 0x80:                        # the timestamp delta, skipped
            p += 1
        delta, p = varint(payload, p + 1)
        key_len, p = varint(payload, p)
        if key_len < 0:
            out.append((delta, None, payload[p] == 1, position, end))   # a value length -1 is byte 0x01
        else:
            out.append((delta, payload[p:p + key_len], payload[p + key_len] == 1, position, end))
        position = end
    return out


def _payload(batch: RecordBatch) -> bytes:
    payload = batch.view[HEADER_SIZE:]
    if batch.compression != Compression.NONE:
        return decompress(batch.compression, payload)
    return bytes(payload)


def filter_batch(batch: RecordBatch, keep) -> bytes | memoryview | None:
    """The batch with only the records for which ``keep(offset, key, is_tombstone)`` holds.

    The original bytes when all stay, None when none does, else a rebuilt batch with the
    same header fields (offsets, timestamps, producer metadata) but the records count.
    """
    if batch.is_control:
        return batch.view
    base, payload = batch.base_offset, _payload(batch)
    kept = [(s, e) for d, k, t, s, e in _records(payload, batch.records_count) if keep(base + d, k, t)]
    if len(kept) == batch.records_count:
        return batch.view
    if not kept:
        return None
    block = b"".join(payload[s:e] for s, e in kept)
    if batch.compression != Compression.NONE:
        block = compress(batch.compression, block)
    out = bytearray(HEADER_SIZE + len(block))
    out[:HEADER_SIZE] = batch.view[:HEADER_SIZE]
    out[HEADER_SIZE:] = block
    _I32.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    _I32.pack_into(out, 57, len(kept))
    _U32.pack_into(out, 17, crc32c(memoryview(out)[CRC_START:]))
    return out


# -- one cleaning -------------------------------------------------------------------------------
@dataclass(slots=True)
class CleanedSegment:
    old: LogSegment
    new_base: int | None        # None: every record went, the old segment just goes


@dataclass(slots=True)
class CleanedLog:
    """The result of ``LogCleaner.prepare``: swap files ready, to install on the loop thread."""

    log: Log
    segments: list[CleanedSegment]
    end_offset: int              # the checkpoint after the swap
    bytes_read: int = 0
    bytes_written: int = 0
    tombstones_due_ms: int | None = None   # when the earliest tombstone kept may go

    def swap(self, now_ms: int) -> bool:
        """Install the cleaned segments (event-loop thread); False (and cleanup) if the log moved on."""
        current = {id(s) for s in self.log.segments}
        if self.log.closed or any(id(c.old) not in current for c in self.segments):
            self.discard()
            return False
        for cleaned in self.segments:
            new = None if cleaned.new_base is None else _open_segment(self.log, cleaned.new_base, SWAP_SUFFIX)
            self.log.replace_segment(cleaned.old, new, now_ms)   # the old files become .deleted first
            if new is not None:
                for f in (new.log, new.offset_index, new.time_index):
                    f.rename(f.path.with_name(f.path.name[:-len(SWAP_SUFFIX)]))
        fsync_dir(self.log.dir)
        return True

    def discard(self) -> None:
        for cleaned in self.segments:
            if cleaned.new_base is not None:
                for suffix in _FILES:
                    segment_path(self.log.dir, cleaned.new_base, suffix + SWAP_SUFFIX).unlink(missing_ok=True)


def _open_segment(target: Log, base: int, suffix: str) -> LogSegment:
    c = target.config
    segment = LogSegment(target.dir, base, index_bytes=c.segment_index_bytes,
                         index_interval_bytes=c.index_interval_bytes, suffix=suffix)
    segment.load_clean()
    return segment


class LogCleaner:
    """Decides which logs need cleaning; its jobs run off the loop thread (the manager: in a process)."""

    def __init__(self, data_dir: Path, io_max_bytes_per_second: float = math.inf) -> None:
        self.io_max_bytes_per_second = io_max_bytes_per_second   # Kafka's log.cleaner.io.max.bytes.per.second
        self.checkpoint_file = OffsetCheckpointFile(Path(data_dir) / CLEANER_CHECKPOINT)
        try:
            self.checkpoints = self.checkpoint_file.read()
        except Exception:  # noqa: BLE001 - a bad checkpoint only means cleaning everything again
            log.warning("ignoring a corrupt %s", CLEANER_CHECKPOINT)
            self.checkpoints = {}
        self.tombstones_due: dict[tuple[str, int], int] = {}   # when a log's kept tombstones may go

    @staticmethod
    def cleanable(target: Log, settings: CleanerSettings, now_ms: int) -> list[LogSegment]:
        """The closed segments wholly below the high watermark and older than the compaction lag."""
        segments = target.segments[:-1]
        out = []
        for i, segment in enumerate(segments):
            upper = target.segments[i + 1].base_offset
            if upper > target.high_watermark:
                break
            if settings.min_compaction_lag_ms > 0 and now_ms - segment.largest_timestamp < settings.min_compaction_lag_ms:
                break
            out.append(segment)
        return out

    def first_dirty(self, target: Log) -> int:
        return max(self.checkpoints.get((target.topic, target.partition), 0), target.log_start_offset)

    def dirty_ratio(self, target: Log, segments: list[LogSegment]) -> float:
        total = sum(s.size for s in segments)
        if not total:
            return 0.0
        first_dirty = self.first_dirty(target)
        dirty = sum(s.size for s in segments if s.next_offset > first_dirty)
        return dirty / total

    def needs_cleaning(self, target: Log, settings: CleanerSettings, now_ms: int) -> list[LogSegment]:
        if not settings.compact:
            return []
        segments = self.cleanable(target, settings, now_ms)
        if not segments:
            return []
        tombstones_due = self.tombstones_due.get((target.topic, target.partition), now_ms + 1) <= now_ms
        if (tombstones_due or self.dirty_ratio(target, segments) > settings.min_cleanable_dirty_ratio
                or self.compaction_overdue(target, segments, settings, now_ms)):
            return segments   # Kafka compares the ratio with > too, and cleans when tombstones expire (KIP-534)
        return []

    def compaction_overdue(self, target: Log, segments: list[LogSegment], settings: CleanerSettings,
                           now_ms: int) -> bool:
        """Kafka's needCompactionNow (KIP-354): a dirty segment's first batch is older than
        ``max.compaction.lag.ms``, so the log is cleaned whatever its dirty ratio."""
        first_dirty = self.first_dirty(target)
        first_timestamps = [t for s in segments if s.next_offset > first_dirty and (t := s.rolling_timestamp) > 0]
        return bool(first_timestamps) and min(first_timestamps) < now_ms - settings.max_compaction_lag_ms

    def job(self, target: Log, segments: list[LogSegment], settings: CleanerSettings, now_ms: int) -> "CleaningJob":
        """What a cleaning needs, as plain (picklable) data: it runs in the cleaner process."""
        c = target.config
        last_batches = {pid: entry.batches[-1].last_offset
                        for pid, entry in target.producer_state.producers.items() if entry.batches}
        return CleaningJob(target.dir, [(s.base_offset, s.next_offset) for s in segments], self.first_dirty(target),
                           settings.delete_retention_ms, now_ms, c.segment_index_bytes, c.index_interval_bytes,
                           last_batches, self.io_max_bytes_per_second)

    @staticmethod
    def adopt(target: Log, segments: list[LogSegment], done: "CleaningDone") -> CleanedLog:
        """The job's result bound back to the log and the segment objects it cleaned."""
        by_base = {s.base_offset: s for s in segments}
        return CleanedLog(target, [CleanedSegment(by_base[old], new) for old, new in done.segments], done.end_offset,
                          done.bytes_read, done.bytes_written, done.tombstones_due_ms)

    def prepare(self, target: Log, segments: list[LogSegment], settings: CleanerSettings,
                now_ms: int) -> CleanedLog:
        """Run a cleaning in the calling thread (tests, tools): ``.swap`` files ready to swap in."""
        return self.adopt(target, segments, self.job(target, segments, settings, now_ms).run())

    def done(self, cleaned: CleanedLog) -> None:
        """After a successful swap: the checkpoint moves to the end of the cleaned range."""
        key = (cleaned.log.topic, cleaned.log.partition)
        self.checkpoints[key] = max(self.checkpoints.get(key, 0), cleaned.end_offset)
        if cleaned.tombstones_due_ms is None:
            self.tombstones_due.pop(key, None)
        else:
            self.tombstones_due[key] = cleaned.tombstones_due_ms
        self.write_checkpoint()

    def forget(self, topic: str, partition: int | None = None) -> None:
        for key in [k for k in self.checkpoints if k[0] == topic and partition in (None, k[1])]:
            del self.checkpoints[key]
            self.tombstones_due.pop(key, None)

    def write_checkpoint(self) -> None:
        self.checkpoint_file.write(self.checkpoints)

    def clean_now(self, target: Log, settings: CleanerSettings, now_ms: int, *, force: bool = False) -> CleanedLog | None:
        """Prepare and swap in the calling thread (tests, tools); None if nothing is due."""
        segments = self.cleanable(target, settings, now_ms) if force else self.needs_cleaning(target, settings, now_ms)
        if not segments:
            return None
        cleaned = self.prepare(target, segments, settings, now_ms)
        if cleaned.swap(now_ms):
            self.done(cleaned)
        return cleaned


# -- the cleaning itself: plain data in, plain data out (runs in the cleaner process) ---------------
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

    def run(self) -> CleaningDone:
        """Build the key map and write every cleaned segment as ``.swap`` files."""
        files = [_SegmentBytes.open(self.directory, base) for base, _ in self.segments]
        state = _Progress(_Throttle(self.io_max_bytes_per_second))
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
            for header, position in data.batches():
                state.throttle.spend(header[1])
                state.read += header[1] + LOG_OVERHEAD
                base, count = header[0], header[12]
                if header[5] & _CONTROL or base + header[6] < first_dirty:
                    continue
                keys, special = _scan_keys(data.payload(header, position), count)
                offsets = range(base, base + count) if header[6] == count - 1 else _offsets(data, header, position)
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
        for suffix in _FILES:   # a leftover of an earlier, abandoned cleaning
            segment_path(self.directory, base, suffix + CLEANED_SUFFIX).unlink(missing_ok=True)
        out = _CleanedWriter(self, base)
        for header, position in data.batches():
            kept = self._clean_batch(header, data, position, last_offsets, survivors, irregular, state)
            if kept is not None:
                state.throttle.spend(len(kept))
                out.add(kept)
                state.written += len(kept)
        return out.finish()

    def _clean_batch(self, header: tuple, data: "_SegmentBytes", position: int, last_offsets: dict,
                     survivors: list[int], irregular: set[int], state: "_Progress") -> bytes | memoryview | None:
        base, last = header[0], header[0] + header[6]
        count, producer_id = header[12], header[9]
        retain = producer_id >= 0 and self.producer_last_offsets.get(producer_id) == last
        if header[5] & _CONTROL:
            return data.view(position, header)
        if count == 0:                 # an empty batch kept earlier: only while it is still the producer's last
            return data.view(position, header) if retain else None
        if base >= self.first_dirty and base not in irregular:
            # every key of this batch is in the map: a record stays iff the map points at it
            left = bisect_right(survivors, last) - bisect_left(survivors, base)
            if left == count:
                return data.view(position, header)
            if left == 0:
                return _empty_batch(header) if retain else None
        horizon = self.now_ms - self.delete_retention_ms
        expired = header[8] < horizon
        due = header[8] + self.delete_retention_ms + 1

        def keep(offset: int, key: bytes | None, tombstone: bool) -> bool:
            if key is not None and last_offsets.get(key, offset) > offset:
                return False
            if tombstone and not expired:
                state.tombstones_due_ms = min(state.tombstones_due_ms or due, due)
            return not (tombstone and expired)
        kept = filter_batch(RecordBatch(data.view(position, header)), keep)
        return _empty_batch(header) if kept is None and retain else kept


def _empty_batch(header: tuple) -> bytes:
    """Kafka's empty batch header: the producer's last batch keeps its offsets and sequence.

    Kafka's cleaner retains it (BatchRetention.RETAIN_EMPTY) when every record goes, so the
    producer's state (epoch, last sequence) survives compaction and a reload.
    """
    base, _, epoch, _, _, attributes, delta, _, max_ts, pid, producer_epoch, sequence, _ = header
    attributes &= ~_CODEC_MASK
    out = bytearray(HEADER.pack(base, HEADER_SIZE - LOG_OVERHEAD, epoch, 2, 0, attributes, delta, max_ts, max_ts,
                                pid, producer_epoch, sequence, 0))
    _U32.pack_into(out, 17, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


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

    def finish(self) -> int | None:
        """Flush, then rename the files ``.swap``; None when nothing was kept."""
        self._write()
        new = self.segment
        if new is None:
            return None
        new.on_become_inactive()
        new.flush()
        for f in (new.log, new.offset_index, new.time_index):
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

    def batches(self) -> Iterator[tuple[tuple, int]]:
        """(header fields, position) of each whole batch."""
        buf, position, end = self.buf, 0, len(self.buf)
        unpack = HEADER.unpack_from
        while end - position >= HEADER_SIZE:
            header = unpack(buf, position)
            size = header[1] + LOG_OVERHEAD
            if size < HEADER_SIZE or size > end - position:
                return
            yield header, position
            position += size

    def view(self, position: int, header: tuple) -> memoryview:
        return memoryview(self.buf)[position:position + header[1] + LOG_OVERHEAD]

    def payload(self, header: tuple, position: int) -> bytes:
        """The records block, decompressed."""
        block = self.buf[position + HEADER_SIZE:position + header[1] + LOG_OVERHEAD]
        codec = header[5] & _CODEC_MASK
        return bytes(decompress(Compression(codec), block)) if codec else block

    def close(self) -> None:
        if isinstance(self.buf, mmap.mmap):
            try:
                self.buf.close()
            except BufferError:   # a view still held (an error's traceback): the mapping goes with it
                pass


def _scan_keys(payload: bytes, count: int) -> tuple[list[bytes | None], bool]:
    """The key of each record (None: no key), and whether any key is null or any value a tombstone.

    Only the varints before the key are read; the record length gives the next record.
    """
    keys: list[bytes | None] = []
    append = keys.append
    special = False
    p = 0
    for _ in range(count):
        b = payload[p]                          # the record length (>= 0: zigzag is raw >> 1), inlined
        if b < 0x80:
            q, length = p + 1, b >> 1
        elif payload[p + 1] < 0x80:
            q, length = p + 2, ((b & 0x7F) | (payload[p + 1] << 7)) >> 1
        else:
            length, q = _varint(payload, p)
        p = q + length
        q += 1                                  # attributes
        while payload[q] > 0x7F:                # the timestamp delta
            q += 1
        q += 1
        while payload[q] > 0x7F:                # the offset delta
            q += 1
        q += 1
        b = payload[q]
        if b == 1:                              # key length -1 (zigzag)
            append(None)
            special = True
            continue
        if b < 0x80:
            q, key_end = q + 1, q + 1 + (b >> 1)
        else:
            key_len, q = _varint(payload, q)
            key_end = q + key_len
        append(payload[q:key_end])
        if payload[key_end] == 1:               # value length -1: a tombstone
            special = True
    return keys, special


def _offsets(data: _SegmentBytes, header: tuple, position: int) -> list[int]:
    """The offsets of a batch with gaps (an earlier cleaning removed records)."""
    base = header[0]
    return [base + delta for delta, *_ in _records(data.payload(header, position), header[12])]


def run_job(job: CleaningJob) -> CleaningDone:
    return job.run()


def lower_priority() -> None:
    """The cleaner process's initializer: yield the CPU and the disk to the broker's produce path.

    SCHED_IDLE runs the cleaner only on a CPU nothing else wants (a woken broker thread preempts
    it at once; nice 10 still took x1.5-2.3 on produce p99); the I/O class idle does the same for
    the disk. ``ODRADEK_CLEANER_PRIORITY=nice10`` restores the old setting (for the bench's A/B).
    """
    if os.environ.get("ODRADEK_CLEANER_PRIORITY") == "nice10":
        os.nice(10)
        return
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)
    _io_priority_idle()


_IOPRIO_SET = {"x86_64": 251, "aarch64": 30}      # the ioprio_set syscall, which Python does not wrap
_IOPRIO_WHO_PROCESS, _IOPRIO_CLASS_IDLE, _IOPRIO_CLASS_SHIFT = 1, 3, 13


def _io_priority_idle() -> None:
    number = _IOPRIO_SET.get(os.uname().machine)
    if number is None:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, _IOPRIO_WHO_PROCESS, 0, _IOPRIO_CLASS_IDLE << _IOPRIO_CLASS_SHIFT) != 0:
        log.warning("the cleaner keeps its I/O priority: ioprio_set failed (errno %d)", ctypes.get_errno())
