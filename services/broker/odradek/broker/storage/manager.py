"""LogManager: every partition log of one data directory (Kafka's LogManager).

On disk, the data directory holds one directory per partition, ``<topic>-<partition>``
(see log); the checkpoints ``recovery-point-offset-checkpoint``,
``replication-offset-checkpoint`` (high watermarks) and ``log-start-offset-checkpoint``
(see checkpoint); ``.kafka_cleanshutdown`` while the broker is stopped after a clean
shutdown (its presence at startup skips recovery; it is removed once the logs are open);
and ``<topic>-<partition>.<id>-delete`` directories of deleted topics until they are removed.

``open_all`` loads every partition (in worker threads: each loader owns one directory and
nothing is shared until all are loaded). Then everything runs on the event-loop thread:
``get_or_create`` / ``get`` / ``delete_topic`` / ``update_config`` from request handlers,
and ``run``, the maintenance task, every ``tick_seconds``: close the deleted segments and
logs whose ``file.delete.delay.ms`` has passed (their files and directories are removed in a
worker thread), retention, flushes due (rolled segments, ``flush.ms``; the fsyncs run in a
worker thread), each for up to ``MAINTAINED_PER_TICK`` logs a tick, then the log cleaner (compacted logs are cleaned one at a time in a cleaner
process and swapped in on a later tick, see cleaner), and the checkpoints
every ``checkpoint_interval_seconds`` (offsets taken on the loop, written and fsynced in a
worker thread). ``close``
flushes every log, writes the checkpoints, then the clean-shutdown marker (the files of
segments whose deletion delay has not passed stay ``.deleted``: the loader removes them at the
next start, as Kafka's scheduler drops its pending deletions). A write that fails
with an OSError takes the directory offline (``failures``, see failure): maintenance stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Mapping

from .cleaner import BackgroundCleaner, LogCleaner
from .checkpoint import (LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                         CorruptCheckpoint, OffsetCheckpointFile, fsync_dir)
from .config import LogConfig
from .failure import LogDirFailureChannel
from .log import Log

__all__ = ["CLEAN_SHUTDOWN_FILE", "LogManager"]

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"
_PARTITION_DIR = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>\d+)$")

TopicPartition = tuple[str, int]


# A maintenance tick visits at most this many logs: a broker with more takes a round of several
# ticks (40 s at 10,000 logs; Kafka checks retention every log.retention.check.interval.ms, 5
# minutes). Visiting every log every second was half of an idle broker's CPU at 10,000 logs.
MAINTAINED_PER_TICK = 250


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class LogManager:
    def __init__(self, data_dir: Path, defaults: Mapping[str, str] | None = None, *, tick_seconds: float = 1.0,
                 checkpoint_interval_seconds: float = 5.0, recovery_threads: int | None = None,
                 cleaner_priority: str = "idle") -> None:
        self.data_dir = Path(data_dir)
        self.defaults = dict(defaults or {})
        self.tick_seconds = tick_seconds
        self.checkpoint_interval_seconds = checkpoint_interval_seconds
        self.recovery_threads = recovery_threads or min(4, os.cpu_count() or 1)
        self._logs: dict[TopicPartition, Log] = {}
        self._overrides: dict[str, dict[str, str]] = {}
        self._configs: dict[str, LogConfig] = {}   # config_for's, per topic
        self._doomed_dirs: list[tuple[Log, Path, int]] = []
        self._round: list[Log] = []      # the logs of the current maintenance round...
        self._next = 0                   # ...and the first one it has yet to visit
        self._compacted: list[Log] = []  # the round's logs whose cleanup.policy compacts
        self._recovery_points = OffsetCheckpointFile(self.data_dir / RECOVERY_POINT_CHECKPOINT)
        self._high_watermarks = OffsetCheckpointFile(self.data_dir / REPLICATION_OFFSET_CHECKPOINT)
        self._log_starts = OffsetCheckpointFile(self.data_dir / LOG_START_OFFSET_CHECKPOINT)
        self._last_checkpoint = 0.0
        self._checkpointed: dict | None = None  # the offsets last written by maintain
        self._logs_changed = 0  # bumped when a log is added or removed
        self._checkpointed_at: tuple[int, int] | None = None  # (Log.offsets_moved, _logs_changed) then
        self.had_clean_shutdown = False
        self.failures = LogDirFailureChannel(self.data_dir)
        self.cleaner = LogCleaner(self.data_dir)
        self._background_cleaner = BackgroundCleaner(self.cleaner, cleaner_priority)
        self._deferring_dir_sync = 0  # inside ``creating()``: one data-directory fsync at its end
        self._dir_unsynced = False

    # -- startup ------------------------------------------------------------------------
    def _read(self, checkpoint: OffsetCheckpointFile) -> dict[TopicPartition, int]:
        try:
            return checkpoint.read()
        except CorruptCheckpoint as e:
            log.warning("ignoring %s: %s", checkpoint.path.name, e)
            return {}

    def open_all(self) -> None:
        """Load every partition directory (recovering after a crash), remove deleted ones and
        write the checkpoints; an OSError (a full disk) propagates."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        marker = self.data_dir / CLEAN_SHUTDOWN_FILE
        self.had_clean_shutdown = marker.exists()
        recovery_points = self._read(self._recovery_points)
        high_watermarks = self._read(self._high_watermarks)
        log_starts = self._read(self._log_starts)
        found: dict[TopicPartition, Path] = {}
        for path in sorted(self.data_dir.iterdir()):
            if not path.is_dir():
                continue
            if path.name.endswith(DELETE_DIR_SUFFIX):
                log.info("removing %s, a topic deleted before the last shutdown", path.name)
                shutil.rmtree(path, ignore_errors=True)
            elif (m := _PARTITION_DIR.match(path.name)) is not None:
                found[(m["topic"], int(m["partition"]))] = path

        def load(tp: TopicPartition) -> Log:
            return Log.open(found[tp], self.config_for(tp[0]), topic=tp[0], partition=tp[1],
                            recovery_point=recovery_points.get(tp, 0), log_start_offset=log_starts.get(tp, 0),
                            high_watermark=high_watermarks.get(tp, 0), clean_shutdown=self.had_clean_shutdown)

        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=self.recovery_threads, thread_name_prefix="log-loader") as pool:
            loaded = dict(zip(found, pool.map(load, found)))
        self._logs.update(loaded)
        self._logs_changed += 1
        # Recovery moved the recovery points: make them durable now, which is also where a
        # full disk shows at start-up (the caller logs it and exits) rather than at a first write.
        self.checkpoint()
        marker.unlink(missing_ok=True)
        log.info("loaded %d logs from %s in %.2fs (%s shutdown)", len(loaded), self.data_dir,
                 time.monotonic() - started, "clean" if self.had_clean_shutdown else "unclean")

    # -- partitions ---------------------------------------------------------------------
    def config_for(self, topic: str) -> LogConfig:
        """The topic's config, shared by its partitions (immutable; rebuilt when its overrides or
        the defaults change): parsing it per partition cost ~2 ms of each log's creation."""
        config = self._configs.get(topic)
        if config is None:
            config = self._configs[topic] = LogConfig.from_overrides(self._overrides.get(topic, {}), self.defaults)
        return config

    def get(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def logs(self) -> list[Log]:
        return list(self._logs.values())

    def get_or_create(self, topic: str, partition: int, overrides: Mapping[str, str] | None = None) -> Log:
        """The partition's log, created empty if absent; new ``overrides`` are applied to the topic."""
        if overrides is not None and dict(overrides) != self._overrides.get(topic, {}):
            self.update_config(topic, overrides)
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        if not _PARTITION_DIR.match(f"{topic}-{partition}"):
            raise ValueError(f"illegal topic name {topic!r}")
        directory = self.data_dir / f"{topic}-{partition}"
        created = Log.open(directory, self.config_for(topic), topic=topic, partition=partition,
                           clean_shutdown=not directory.exists())
        if self._deferring_dir_sync:
            self._dir_unsynced = True
        else:
            fsync_dir(self.data_dir)
        self._logs[(topic, partition)] = created
        self._logs_changed += 1
        log.info("created log %s", created.name)
        return created

    @contextlib.contextmanager
    def creating(self):
        """Logs created inside share one fsync of the data directory, at the end: a snapshot
        that brings 3,000 new partitions costs one directory fsync, not 3,000 (each was ~80% of
        a log's creation time)."""
        self._deferring_dir_sync += 1
        try:
            yield
        finally:
            self._deferring_dir_sync -= 1
            if not self._deferring_dir_sync and self._dir_unsynced:
                self._dir_unsynced = False
                fsync_dir(self.data_dir)

    def update_config(self, topic: str, overrides: Mapping[str, str]) -> None:
        self._overrides[topic] = dict(overrides)
        self._configs.pop(topic, None)
        config = self.config_for(topic)
        for (t, _), partition_log in self._logs.items():
            if t == topic:
                partition_log.update_config(config)

    def update_defaults(self, defaults: Mapping[str, str]) -> None:
        """New broker-wide topic defaults (a dynamic broker config change): every log's config
        is rebuilt; retention and rolling follow from the next maintenance tick."""
        if dict(defaults) == self.defaults:
            return
        self.defaults = dict(defaults)
        self._configs.clear()
        for (topic, _), partition_log in self._logs.items():
            partition_log.update_config(self.config_for(topic))

    def delete_topic(self, topic: str) -> None:
        """Take the topic's logs away now; their renamed directories go after file.delete.delay.ms."""
        for key in [k for k in self._logs if k[0] == topic]:
            self._doom(key)
        self._overrides.pop(topic, None)
        self._configs.pop(topic, None)
        fsync_dir(self.data_dir)

    def delete_partition(self, topic: str, partition: int) -> None:
        """Take one partition's log away (reassigned to other brokers), like ``delete_topic``."""
        if (topic, partition) in self._logs:
            self._doom((topic, partition))
            fsync_dir(self.data_dir)

    def _doom(self, key: TopicPartition) -> None:
        doomed = self._logs.pop(key)
        self._logs_changed += 1
        self.cleaner.forget(*key)
        target = doomed.dir.with_name(f"{doomed.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.rename(doomed.dir, target)
        doomed.moved_to(target)
        self._doomed_dirs.append((doomed, target, _now_ms() + doomed.config.file_delete_delay_ms))
        log.info("deleted log %s (directory renamed to %s)", doomed.name, target.name)

    def _due_dirs(self, now: int, *, force: bool = False) -> list[Path]:
        """Deleted logs whose file.delete.delay.ms has passed, closed: their directories to remove."""
        due = [d for d in self._doomed_dirs if force or d[2] <= now]
        self._doomed_dirs = [d for d in self._doomed_dirs if not (force or d[2] <= now)]
        for doomed, _, _ in due:
            doomed.close()
        return [path for _, path, _ in due]

    # -- maintenance --------------------------------------------------------------------
    async def maintain(self, now_ms: int | None = None) -> None:
        """One maintenance tick: purge, retention, due flushes, checkpoints when due."""
        now = _now_ms() if now_ms is None else now_ms
        dirs = self._due_dirs(now)
        files = await self._maintain_logs(now)
        if files is None or not await self._remove(dirs, files):
            return   # the directory went offline: a restart removes what is left
        # only compacted logs can be due (the cleaner's own check per log was a sixth of an idle
        # broker's time at 10,000 logs); their configs come from the same defaults
        self._background_cleaner.tend([lg for lg in self._compacted if not lg.closed], self.defaults, now)
        if time.monotonic() - self._last_checkpoint >= self.checkpoint_interval_seconds:
            moved = (Log.offsets_moved, self._logs_changed)
            if moved == self._checkpointed_at:  # an idle broker reads no log
                self._last_checkpoint = time.monotonic()
                return
            # six fsyncs: on the loop they stalled every request for 45-60 ms (bench/profile_broker.py)
            offsets = self._checkpoint_offsets()
            if offsets == self._checkpointed:  # the same values are not written again
                self._checkpointed_at = moved
                self._last_checkpoint = time.monotonic()
                return
            try:
                await asyncio.to_thread(self._write_checkpoints, offsets)
                self._checkpointed, self._checkpointed_at = offsets, moved
            except OSError as e:
                self.failures.fail("writing the checkpoints", e)

    async def _maintain_logs(self, now: int) -> list[Path] | None:
        """Purge, retention and due flushes of the round's next slice of logs: the purged
        segments' files to unlink, or None when a write failed (the directory is offline)."""
        if self._next >= len(self._round):  # a new round over every log; logs created since join it
            self._round, self._next = self.logs(), 0
            self._compacted = [lg for lg in self._round if lg.config.compacted]
        # a slice of the round, not the round's remainder: copying 9,000 references a tick
        # touched 9,000 objects (their reference counts); touching a log is most of a visit's cost
        batch = self._round[self._next:self._next + MAINTAINED_PER_TICK]
        self._next += MAINTAINED_PER_TICK
        files: list[Path] = []
        for partition_log in batch:
            if partition_log.closed:  # deleted during the round
                continue
            try:
                files += partition_log.purge_deleted(now)
                partition_log.apply_retention(now)
                plan = partition_log.flush_plan(now)
                if plan is not None:
                    await asyncio.to_thread(plan.run)
                    if not partition_log.closed:
                        partition_log.flushed(plan)
            except OSError as e:
                self.failures.fail(f"maintenance of {partition_log.name}", e)
                return None
        return files

    async def _remove(self, dirs: list[Path], files: list[Path]) -> bool:
        """Remove deleted topics' directories and purged segments' files in a worker thread, as
        Kafka's scheduler deletes them: unlinking their pages (hundreds of MB in the page cache,
        some under writeback) blocked the loop, every request of the broker, 100-250 ms.
        False when an unlink failed (the directory is offline)."""
        if not (dirs or files):
            return True
        try:
            await asyncio.to_thread(_remove_paths, dirs, files)
            return True
        except OSError as e:
            self.failures.fail("removing deleted segments", e)
            return False

    async def run(self, stop: asyncio.Event) -> None:
        """Maintenance until ``stop`` is set."""
        while not stop.is_set() and not self.failures.offline:
            try:
                await self.maintain()
            except Exception:  # noqa: BLE001 - the task must outlive one bad tick; the error is logged
                log.exception("log maintenance tick failed")
            try:
                await asyncio.wait_for(stop.wait(), self.tick_seconds)
            except asyncio.TimeoutError:
                pass

    def checkpoint(self) -> None:
        """Write the recovery points, high watermarks and log start offsets of every log."""
        self._write_checkpoints(self._checkpoint_offsets())

    def _checkpoint_offsets(self) -> dict[TopicPartition, tuple[int, int, int]]:
        """(recovery point, high watermark, log start) of every log, in one pass keyed by the
        logs' own keys (three passes with a key made per log were a tenth of an idle broker's
        time at 10,000 logs). Taken on the loop thread; written in a worker thread."""
        return {k: (lg.recovery_point, lg.high_watermark, lg.log_start_offset) for k, lg in self._logs.items()}

    def _write_checkpoints(self, offsets: dict[TopicPartition, tuple[int, int, int]]) -> None:
        for i, checkpoint in enumerate((self._recovery_points, self._high_watermarks, self._log_starts)):
            checkpoint.write({k: v[i] for k, v in offsets.items()})
        self._last_checkpoint = time.monotonic()

    def abandon(self) -> None:
        """The directory is offline: stop the cleaner, write nothing more (a restart recovers)."""
        self._background_cleaner.close()

    def close(self) -> None:
        """Clean shutdown: flush and close every log, checkpoint, then write the marker."""
        self._background_cleaner.close()
        for partition_log in self.logs():
            partition_log.flush()
            partition_log.close()
        self.checkpoint()
        _remove_paths(self._due_dirs(0, force=True), [])
        marker = self.data_dir / CLEAN_SHUTDOWN_FILE
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT, 0o644)
        os.fsync(fd)
        os.close(fd)
        fsync_dir(self.data_dir)


def _remove_paths(dirs: list[Path], files: list[Path]) -> None:
    for path in dirs:
        started = time.monotonic()
        shutil.rmtree(path, ignore_errors=True)
        log.info("removed %s in %.0f ms", path.name, (time.monotonic() - started) * 1000)
    for path in files:
        path.unlink(missing_ok=True)
