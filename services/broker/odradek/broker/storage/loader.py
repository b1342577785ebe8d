"""LogLoader: open one partition directory, after a clean shutdown or a crash (Kafka's LogLoader).

Reads the files segment and index describe, in this order:
1. removes leftovers of interrupted operations: ``*.deleted`` (deletion scheduled but not
   done), ``*.swap`` (a finished compaction whose swap was cut: renamed over the old
   segment, see cleaner; one that is not whole valid batches is dropped), ``*.cleaned`` (an unfinished compaction: the originals are still
   there, so a ``.cleaned`` file is dropped), ``*.tmp`` (half-written checkpoints),
   and index files whose ``.log`` is gone;
2. opens every segment; one with a missing index, or an index that fails its sanity check,
   is recovered (its batches re-validated, both indexes rebuilt from the log);
3. after an unclean shutdown, recovers every segment from the one holding the recovery
   point onwards, verifying each batch's CRC-32C and offsets; at the first bad or torn
   batch the segment is truncated there and every later segment is deleted;
4. makes sure one (active) segment exists, at the log start offset when the log is empty
   or ends below it.

Runs before the log is published: the manager may load several partitions in worker
threads, each loader touching only its own directory.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from odradek.records import RecordBatch

from .config import LogConfig
from .file_records import FileRecords
from .index import CorruptIndex
from .segment import LogSegment, segment_path
from .validator import check_stored_batch

__all__ = ["LoadedLog", "LogLoader"]

log = logging.getLogger(__name__)

TEMP_SUFFIXES = (".deleted", ".cleaned", ".swap", ".tmp")
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex")


@dataclass(slots=True)
class LoadedLog:
    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int


def _check(batch: RecordBatch) -> None:
    check_stored_batch(batch)


def _whole_and_valid(path: Path) -> bool:
    records = FileRecords(path)
    try:
        return records.size > 0 and records.valid_prefix(lambda batch, _: _check(batch)) == records.size
    finally:
        records.close()


def _base_offset(path: Path) -> int | None:
    stem = path.name.split(".", 1)[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


class LogLoader:
    def __init__(self, directory: Path, config: LogConfig, *, recovery_point: int, log_start_offset: int,
                 clean_shutdown: bool) -> None:
        self.dir = directory
        self.config = config
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self.clean_shutdown = clean_shutdown
        self.recovered: dict[int, int] = {}  # base offset of a re-validated segment -> bytes cut

    def load(self) -> LoadedLog:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._remove_temp_files()
        segments = self._load_segments()
        if not self.clean_shutdown:
            segments = self._recover(segments)
        if segments and segments[-1].next_offset < self.log_start_offset:
            log.warning("%s ends at %d, below its log start offset %d: starting empty there",
                        self.dir.name, segments[-1].next_offset, self.log_start_offset)
            for segment in segments:
                segment.delete()
            segments = []
        if not segments:
            segments = [self._segment(self.log_start_offset)]
        for segment in segments[:-1]:
            segment.on_become_inactive()
        segments[-1].release_indexes()   # mapped again by its first append or lookup
        log_end = segments[-1].next_offset
        return LoadedLog(segments, max(self.log_start_offset, segments[0].base_offset),
                         log_end if self.clean_shutdown else min(self.recovery_point, log_end))

    def _segment(self, base_offset: int) -> LogSegment:
        c = self.config
        return LogSegment(self.dir, base_offset, index_bytes=c.segment_index_bytes,
                          index_interval_bytes=c.index_interval_bytes, segment_jitter_ms=c.segment_jitter_ms)

    def _complete_swaps(self) -> None:
        """A ``.swap`` file is a finished cleaning whose swap a crash cut: finish it (Kafka does).

        The cleaner renames all three ``.cleaned`` files of a segment to ``.swap`` before it
        touches the old segment, so a ``.log.swap`` means its indexes are complete too (a
        missing one is rebuilt like any missing index).
        """
        for swap in sorted(self.dir.glob("*.log.swap")):
            base = _base_offset(swap)
            if base is None or not _whole_and_valid(swap):
                continue   # not a finished cleaning (those are fsynced before the rename): dropped below
            log.info("%s: completing the interrupted swap of cleaned segment %d", self.dir.name, base)
            for suffix in (*SEGMENT_SUFFIXES, ".txnindex"):   # a .txnindex only where an abort stayed
                pending = segment_path(self.dir, base, suffix + ".swap")
                final = segment_path(self.dir, base, suffix)
                if pending.exists():
                    pending.replace(final)
                elif suffix != ".log":
                    final.unlink(missing_ok=True)

    def _remove_temp_files(self) -> None:
        self._complete_swaps()
        for path in self.dir.iterdir():
            if path.name.endswith(TEMP_SUFFIXES):
                log.info("%s: removing leftover %s", self.dir.name, path.name)
                path.unlink(missing_ok=True)

    def _load_segments(self) -> list[LogSegment]:
        bases = sorted(b for p in self.dir.glob("*.log") if (b := _base_offset(p)) is not None)
        for path in self.dir.iterdir():
            base = _base_offset(path)
            if base is not None and path.suffix in (".index", ".timeindex", ".txnindex") and base not in bases:
                log.info("%s: removing index %s without a log", self.dir.name, path.name)
                path.unlink()
        segments = []
        for base in bases:
            missing = not all(segment_path(self.dir, base, s).exists() for s in SEGMENT_SUFFIXES)
            segment = self._segment(base)
            try:
                if missing:
                    raise CorruptIndex("index file missing")
                segment.load_clean()
            except CorruptIndex as e:
                log.warning("%s: rebuilding the indexes of segment %d (%s)", self.dir.name, base, e)
                self._recover_segment(segment)
            segments.append(segment)
        return segments

    def _recover_segment(self, segment: LogSegment) -> int:
        truncated = segment.recover(_check)
        self.recovered[segment.base_offset] = truncated
        if truncated:
            log.warning("%s: truncated %d invalid bytes at the end of segment %d (log end now %d)",
                        self.dir.name, truncated, segment.base_offset, segment.next_offset)
        return truncated

    def _recover(self, segments: list[LogSegment]) -> list[LogSegment]:
        """Re-validate the segments past the recovery point; drop all after a bad batch."""
        bases = [s.base_offset for s in segments]
        first = max((i for i, b in enumerate(bases) if b <= self.recovery_point), default=0)
        for i in range(first, len(segments)):
            segment = segments[i]
            truncated = self.recovered.get(segment.base_offset)
            if truncated is None:
                truncated = self._recover_segment(segment)
            if truncated and i + 1 < len(segments):
                for later in segments[i + 1:]:
                    log.warning("%s: deleting segment %d after a truncated one", self.dir.name, later.base_offset)
                    later.delete()
                return segments[:i + 1]
        return segments
