"""LogCleaner: when to clean which compacted log, and installing what a cleaning wrote (Kafka's
LogCleanerManager and the swap of its Cleaner).

A compacted log keeps, for every key, at least its last record. The cleaner works on the
*cleanable* range of a log: its closed segments (never the active one), up to the first
segment still younger than ``min.compaction.lag.ms`` or not wholly below the high
watermark. The *dirty* part of that range starts at the log's entry in the data dir's
``cleaner-offset-checkpoint`` (the offset the last cleaning reached). A log is cleaned when
dirty bytes / cleanable bytes > ``min.cleanable.dirty.ratio``, when a kept tombstone's
``delete.retention.ms`` has passed, or when a dirty batch is older than ``max.compaction.lag.ms``.

``BackgroundCleaner`` (the manager's, on the event-loop thread) runs one cleaning at a time
(the dirtiest due log) as a ``CleaningJob`` (see cleaning) in a process of its own at a low
priority (see priority), and swaps its result in on a later tick.

The swap (``CleanedLog.swap``, on the event-loop thread, which owns the Log): if the log
still holds the very segments that were cleaned, each old segment is renamed ``.deleted``
(fetches in flight keep its fd until ``file.delete.delay.ms``) and its ``.swap`` files are
renamed to the final names and take its place. After a crash the loader finishes what a
``.swap`` file records (deletes the old segment, renames the swap) and drops ``.cleaned``
files. Finally the checkpoint moves to the end of the cleaned range.
Not thread-safe: everything here but the job runs on the event-loop thread.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from .checkpoint import OffsetCheckpointFile, fsync_dir
from .config import LogConfig
from .cleaning import CLEANED_SUFFIX, SEGMENT_FILES, SWAP_SUFFIX, CleaningDone, CleaningJob, run_job
from .log import Log
from .priority import lower_priority
from .segment import LogSegment, segment_path

__all__ = ["CLEANER_CHECKPOINT", "CLEANED_SUFFIX", "SWAP_SUFFIX", "BackgroundCleaner", "CleanedLog",
           "CleanerSettings", "CleaningJob", "LogCleaner"]

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"


@dataclass(frozen=True, slots=True)
class CleanerSettings:
    compact: bool
    delete_retention_ms: int
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int = 2**63 - 1

    @classmethod
    def of(cls, overrides: Mapping[str, str], defaults: Mapping[str, str] | None = None) -> "CleanerSettings":
        """A log's settings, read from its typed ``LogConfig`` (the registry's parse)."""
        config = LogConfig.from_overrides(overrides, defaults)
        return cls(config.compacted, config.delete_retention_ms, config.min_cleanable_dirty_ratio,
                   config.min_compaction_lag_ms, config.max_compaction_lag_ms)


# -- installing a cleaning -------------------------------------------------------------------------
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
                for f in (new.log, new.offset_index, new.time_index, new.txn_index):
                    f.rename(f.path.with_name(f.path.name[:-len(SWAP_SUFFIX)]))
        fsync_dir(self.log.dir)
        return True

    def discard(self) -> None:
        for cleaned in self.segments:
            if cleaned.new_base is not None:
                for suffix in SEGMENT_FILES:
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
        """The closed segments wholly below the last stable offset (so below the high watermark,
        and no undecided transaction in them) and older than the compaction lag."""
        segments = target.segments[:-1]
        out = []
        stable = target.last_stable_offset
        for i, segment in enumerate(segments):
            upper = target.segments[i + 1].base_offset
            if upper > stable:
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

    def job(self, target: Log, segments: list[LogSegment], settings: CleanerSettings, now_ms: int) -> CleaningJob:
        """What a cleaning needs, as plain (picklable) data: it runs in the cleaner process."""
        c = target.config
        last_batches = {pid: entry.batches[-1].last_offset
                        for pid, entry in target.producer_state.producers.items() if entry.batches}
        aborted = tuple((t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)   # markers may lie later
                        for t in target.aborted_transactions(segments[0].base_offset, segments[-1].next_offset))
        return CleaningJob(target.dir, [(s.base_offset, s.next_offset) for s in segments], self.first_dirty(target),
                           settings.delete_retention_ms, now_ms, c.segment_index_bytes, c.index_interval_bytes,
                           last_batches, self.io_max_bytes_per_second, aborted)

    @staticmethod
    def adopt(target: Log, segments: list[LogSegment], done: CleaningDone) -> CleanedLog:
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


class BackgroundCleaner:
    """The manager's cleaner: the dirtiest due log cleaned in a low-priority process, one at a
    time, and swapped in on the event-loop thread by a later ``tend``.

    A process, not a thread: the cleaner's Python loops would otherwise hold the GIL the event
    loop needs (a thread tripled the produce p99, see docs/compaction.md).
    """

    def __init__(self, cleaner: LogCleaner, priority: str = "idle") -> None:
        self.cleaner = cleaner
        self._process = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                            initializer=lower_priority, initargs=(priority,))
        self._cleaning: tuple[Future, Log, list[LogSegment]] | None = None
        self._settings: dict[str, tuple[object, Mapping[str, str], CleanerSettings]] = {}

    def tend(self, logs: Iterable[Log], defaults: Mapping[str, str], now: int) -> None:
        """Swap in a finished cleaning (here, on the loop thread), then start the dirtiest due one.

        The cleaner process only reads closed segments and writes its own ``.cleaned``/``.swap``
        files; the Log changes only in ``swap``, which checks the segments are still there.
        """
        if self._cleaning is not None:
            future, cleaned_log, segments = self._cleaning
            if not future.done():
                return
            try:
                cleaned = self.cleaner.adopt(cleaned_log, segments, future.result())
                if cleaned.swap(now):
                    self.cleaner.done(cleaned)
                    log.info("cleaned %s: %d bytes read, %d written", cleaned.log.name, cleaned.bytes_read,
                             cleaned.bytes_written)
            except Exception:  # noqa: BLE001 - a failed cleaning leaves the log as it was
                log.exception("log cleaning failed")
            self._cleaning = None
        due = []
        for partition_log in logs:
            settings = self._settings_of(partition_log, defaults)
            segments = self.cleaner.needs_cleaning(partition_log, settings, now)
            if segments:
                due.append((self.cleaner.dirty_ratio(partition_log, segments), partition_log, segments, settings))
        if due:
            _, dirtiest, segments, settings = max(due, key=lambda d: d[0])
            job = self.cleaner.job(dirtiest, segments, settings, now)
            self._cleaning = (self._process.submit(run_job, job), dirtiest, segments)

    def _settings_of(self, partition_log: Log, defaults: Mapping[str, str]) -> CleanerSettings:
        """The log's cleaner settings, parsed again only when its config or the defaults were
        replaced (parsing every log's settings every tick was most of an idle broker's time)."""
        config = partition_log.config
        cached = self._settings.get(partition_log.name)
        if cached is None or cached[0] is not config or cached[1] is not defaults:
            cached = (config, defaults, CleanerSettings.of(config.overrides, defaults))
            self._settings[partition_log.name] = cached
        return cached[2]

    def close(self) -> None:
        """Stop the process; a cleaning cut short leaves only its own files (see loader)."""
        self._process.shutdown(wait=True, cancel_futures=True)
