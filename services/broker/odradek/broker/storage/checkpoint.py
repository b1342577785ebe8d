"""Checkpoint files (Kafka's CheckpointFile / OffsetCheckpointFile / LeaderEpochCheckpointFile).

On disk, text, one item a line:

    0                       <- format version
    2                       <- number of entries
    orders 0 1234           <- "topic partition offset" (offset checkpoints)
    orders 1 99

The data directory holds ``recovery-point-offset-checkpoint`` (offsets up to which each log
is fsynced), ``replication-offset-checkpoint`` (high watermarks) and
``log-start-offset-checkpoint``; each partition directory holds ``leader-epoch-checkpoint``
whose entries are ``epoch start_offset``.

Writes are atomic: a ``.tmp`` file is written and fsynced, renamed over the old one, and the
directory fsynced. Inside ``grouped_writes()`` (a controller snapshot making a broker leader
of 1,000 partitions, a fetch response bringing 1,000 partitions their first batch of a new
epoch) the same steps run for all the block's files together when it ends, the fsyncs in
parallel threads, so that the file system commits them as a few journal transactions instead
of two each: the block returns only once every file is durable, as each write did alone.
A file that cannot be parsed raises CorruptCheckpoint; callers decide (the manager falls back
to full recovery). Not thread-safe: one writer per file; a group belongs to its thread.
"""

from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Mapping

__all__ = [
    "CorruptCheckpoint", "LOG_START_OFFSET_CHECKPOINT", "LEADER_EPOCH_CHECKPOINT",
    "OffsetCheckpointFile", "RECOVERY_POINT_CHECKPOINT", "REPLICATION_OFFSET_CHECKPOINT",
    "grouped_writes", "read_checkpoint", "write_checkpoint",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
VERSION = 0
TMP_SUFFIX = ".tmp"
GROUP_THREADS = 32
_group = threading.local()  # .pending: {path: its written, not yet synced .tmp} inside grouped_writes()


class CorruptCheckpoint(Exception):
    pass


def fsync_path(path: Path) -> None:
    """fsync a file or a directory, by its path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


fsync_dir = fsync_path   # a directory's entries (a file created, renamed or removed in it)


def write_checkpoint(path: Path, entries: list[tuple[object, ...]]) -> None:
    """Atomically replace ``path`` with the version, the count and one line per entry."""
    text = f"{VERSION}\n{len(entries)}\n" + "".join(" ".join(map(str, e)) + "\n" for e in entries)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    pending = getattr(_group, "pending", None)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode())
        if pending is None:
            os.fsync(fd)
    finally:
        os.close(fd)
    if pending is not None:
        pending[path] = tmp
        return
    os.replace(tmp, path)
    fsync_dir(path.parent)


@contextlib.contextmanager
def grouped_writes():
    """Checkpoint writes inside are made durable together at the end of the block (fsync of
    every ``.tmp`` in parallel, the renames, fsync of every directory in parallel); nested
    blocks join the outer one."""
    if getattr(_group, "pending", None) is not None:
        yield
        return
    _group.pending = {}
    try:
        yield
    finally:
        pending, _group.pending = _group.pending, None
        if pending:
            _commit(pending)


def _commit(pending: Mapping[Path, Path]) -> None:
    with ThreadPoolExecutor(min(GROUP_THREADS, len(pending)), thread_name_prefix="checkpoint-sync") as pool:
        list(pool.map(fsync_dir, pending.values()))  # opens read-only and fsyncs: files alike
        for path, tmp in pending.items():
            os.replace(tmp, path)
        list(pool.map(fsync_dir, {path.parent for path in pending}))



def read_checkpoint(path: Path, fields: int) -> list[list[str]]:
    """The entries of a checkpoint file, each split in ``fields`` strings; [] if absent."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as e:
        raise CorruptCheckpoint(f"{path}: {e}") from None
    if len(lines) < 2 or lines[0].strip() != str(VERSION) or not lines[1].strip().isdigit():
        raise CorruptCheckpoint(f"{path}: bad header (version {lines[0] if lines else None!r})")
    count = int(lines[1])
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count or any(len(e) != fields for e in entries):
        raise CorruptCheckpoint(f"{path}: expected {count} entries of {fields} fields")
    return entries


class OffsetCheckpointFile:
    """``topic partition offset`` lines: one offset per partition of a data directory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        write_checkpoint(self.path, [(t, p, o) for (t, p), o in sorted(offsets.items())])

    def read(self) -> dict[tuple[str, int], int]:
        try:
            return {(t, int(p)): int(o) for t, p, o in read_checkpoint(self.path, 3)}
        except ValueError as e:
            raise CorruptCheckpoint(f"{self.path}: {e}") from None
