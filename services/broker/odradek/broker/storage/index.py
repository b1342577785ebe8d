"""Sparse, memory-mapped segment indexes (Kafka's AbstractIndex, OffsetIndex, TimeIndex).

On disk an index is a flat array of fixed-size big-endian entries, no header, no checksum:
indexes are disposable and the loader rebuilds them from the ``.log`` after a crash.
- ``.index``     (OffsetIndex): relative offset u32, file position u32 (8 bytes); the offset
  is the last offset of the batch that starts at that position.
- ``.timeindex`` (TimeIndex): timestamp i64, relative offset u32 (12 bytes); the largest
  timestamp seen so far in the segment and the last offset of the batch that carried it.
Keys are strictly increasing, so lookups are binary searches. The file of the active
segment is pre-allocated to ``segment.index.bytes`` (rounded down to whole entries) and
mmap'd; when the segment stops being active the file is trimmed to its valid entries.
The pre-allocated file is sparse (as Kafka's ``setLength``); blocks are allocated with
``posix_fallocate`` in ``_ALLOCATION_CHUNK`` steps before entries are written there: a store
to a mapped page the filesystem cannot back (a full disk) kills the process with SIGBUS,
while a failed allocation is an ``OSError`` (ENOSPC) the broker handles. An existing file's
entries end at its first hole (``SEEK_HOLE``): a crash leaves the active index sparse at its
full size, and on tmpfs even a read fault on a hole of a shared mapping needs a page.

Opened lazily (Kafka's LazyIndex): construction only stats the file (creating it empty);
the file is pre-allocated and mapped on the first access to its entries (an append, a lookup
in a non-empty index) and unmapped by ``release`` (the segment became inactive, or the loader
is done with it), so an idle partition costs no mapping and no descriptor for its indexes, and
a mapped index costs one descriptor (the duplicate ``mmap`` keeps; ours is closed at once).

Not thread-safe: one event-loop thread owns every index (the loader may use one thread
per partition, never two threads for one index).
"""

from __future__ import annotations

import mmap
from abc import ABC, abstractmethod
import os
import struct
from pathlib import Path
from typing import NamedTuple

from .checkpoint import fsync_path

__all__ = ["AbstractIndex", "CorruptIndex", "OffsetIndex", "OffsetPosition", "TimeIndex", "TimestampOffset"]

_ALLOCATION_CHUNK = 64 * 1024  # one fallocate per 8192 offset-index entries


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class CorruptIndex(Exception):
    """The index file is not a valid index of its segment: the loader rebuilds it."""


class AbstractIndex(ABC):
    """A pre-allocated mmap'd array of entries with binary search and truncation."""

    ENTRY: struct.Struct  # set by subclasses

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entry_size = self.ENTRY.size
        self._map: mmap.mmap | None = None
        self._dirty = False    # entries written since the last flush (mapped or not since)
        self._closed = False
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            length = self._length_at_open = self._file_length = os.fstat(fd).st_size
            # After a crash the active index is still sparse at its pre-allocated size: its entries
            # end at the first hole (reading a hole through the mapping needs a page on tmpfs).
            self._backed = min(length, os.lseek(fd, 0, os.SEEK_HOLE)) if length else 0
        finally:
            os.close(fd)
        self.entries = self._backed // self.entry_size
        self._length = 0
        self.resize(max(max_index_size, self.entries * self.entry_size))

    # -- file size --------------------------------------------------------------------
    @property
    def max_entries(self) -> int:
        return self._length // self.entry_size

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.entry_size

    @property
    def mapped(self) -> bool:
        return self._map is not None

    def resize(self, new_size: int) -> None:
        """Make the index hold ``new_size`` bytes (rounded down to whole entries); the file
        follows now if mapped (remapped), else when it is next mapped or released."""
        rounded = max(new_size // self.entry_size, self.entries) * self.entry_size
        if rounded == self._length:
            return
        mapped = self._map is not None
        self._unmap()
        self._length = rounded
        self._backed = min(self._backed, rounded)
        if mapped and rounded:
            self._mapping()

    def trim_to_valid_size(self) -> None:
        self.resize(self.size_in_bytes)

    def _mapping(self) -> mmap.mmap:
        """The mapping, made now if needed: the file is first set to the index's size (the
        pre-allocation of an active index: sparse, its blocks come from ``_allocate``)."""
        if self._map is None:
            if self._closed or not self._length:
                raise CorruptIndex(f"{self.path} is {'closed' if self._closed else 'empty'}")
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if self._file_length != self._length:
                    os.ftruncate(fd, self._length)
                    self._file_length = self._length
                self._map = mmap.mmap(fd, self._length)
            finally:
                os.close(fd)   # the mapping keeps its own duplicate
        return self._map

    def release(self) -> None:
        """Unmap and cut the file to the index's size if it is larger; the next access maps it
        again (what was written stays for ``flush``)."""
        self._unmap()
        if self._file_length > self._length:
            os.truncate(self.path, self._length)
            self._file_length = self._length

    def _unmap(self) -> None:
        # No msync here (a roll would pay it inside the append that rolls): the pages written
        # stay dirty in the page cache, and ``flush`` fsyncs the file when the log is flushed.
        if self._map is not None:
            self._map.close()
            self._map = None

    # -- entries ----------------------------------------------------------------------
    def entry(self, n: int) -> tuple[int, int]:
        return self.ENTRY.unpack_from(self._map or self._mapping(), n * self.entry_size)

    def _key(self, n: int) -> int:
        return self.entry(n)[0]

    @abstractmethod
    def _offset_of(self, n: int) -> int:
        """The absolute offset entry ``n`` points at."""

    def _search(self, target: int, key) -> int:
        """The largest slot whose key(slot) <= target, or -1."""
        lo, hi = 0, self.entries - 1
        if hi < 0 or key(0) > target:
            return -1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if key(mid) <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _append(self, *fields: int) -> None:
        if self.entries >= self.max_entries:
            raise CorruptIndex(f"{self.path} is full ({self.entries} entries)")
        mapping = self._map or self._mapping()
        position = self.entries * self.entry_size
        if position + self.entry_size > self._backed:
            self._allocate(position + self.entry_size)
        self.ENTRY.pack_into(mapping, position, *fields)
        self._dirty = True
        self.entries += 1

    def _allocate(self, end: int) -> None:
        """Give the file blocks up to at least ``end`` (ENOSPC raises here, not SIGBUS later)."""
        target = min(-(-end // _ALLOCATION_CHUNK) * _ALLOCATION_CHUNK, self._length)
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.posix_fallocate(fd, self._backed, target - self._backed)
        finally:
            os.close(fd)
        self._backed = target

    def truncate_to(self, offset: int) -> None:
        """Remove every entry that points at ``offset`` or beyond."""
        slot = self._search(offset - 1, self._offset_of) if offset > self.base_offset else -1
        self.entries = slot + 1

    def reset(self) -> None:
        self.entries = 0

    def sanity_check(self) -> None:
        if self._length_at_open % self.entry_size:
            raise CorruptIndex(f"{self.path} has a size that is not a multiple of {self.entry_size}")
        if self.entries >= 2 and not self._increasing(self.entry(self.entries - 2), self.entry(self.entries - 1)):
            raise CorruptIndex(f"{self.path}: its last entries are not increasing")

    @abstractmethod
    def _increasing(self, before: tuple[int, int], after: tuple[int, int]) -> bool:
        """Whether ``after`` may follow ``before`` in this kind of index."""

    def flush(self) -> None:
        """Make the entries written so far durable (msync, or fsync once unmapped)."""
        if self._map is not None:
            self._map.flush()
        elif self._dirty and not self._closed:
            fsync_path(self.path)
        self._dirty = False

    def close(self) -> None:
        if self._closed:
            return
        self.trim_to_valid_size()
        self.release()
        self._closed = True

    def rename(self, path: Path) -> None:
        os.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class OffsetIndex(AbstractIndex):
    """Offset -> file position of the batch to start scanning from."""

    ENTRY = struct.Struct(">II")

    def _offset_of(self, n: int) -> int:
        return self.base_offset + self.entry(n)[0]

    def _increasing(self, before: tuple[int, int], after: tuple[int, int]) -> bool:
        return after[0] > before[0] and after[1] > before[1]

    @property
    def last_offset(self) -> int:
        return self._offset_of(self.entries - 1) if self.entries else self.base_offset

    def lookup(self, offset: int) -> OffsetPosition:
        """The entry with the largest offset <= ``offset``, or (base offset, 0)."""
        slot = self._search(offset - self.base_offset, self._key)
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        relative, position = self.entry(slot)
        return OffsetPosition(self.base_offset + relative, position)

    def position_before(self, position: int) -> int:
        """A batch position from which a scan crosses into the last indexed batch at or before
        ``position`` (the entry before that one's, else 0): every batch from there up to that
        one's start ends at or before ``position``."""
        slot = self._search(position, self._position)
        return self.entry(slot - 1)[1] if slot >= 1 else 0

    def _position(self, n: int) -> int:
        return self.entry(n)[1]

    def append(self, offset: int, position: int) -> None:
        if self.entries and offset <= self.last_offset:
            raise CorruptIndex(f"offset {offset} is not after the index's last offset {self.last_offset}")
        self._append(offset - self.base_offset, position)


class TimeIndex(AbstractIndex):
    """Timestamp -> offset to start scanning from when looking up by time."""

    ENTRY = struct.Struct(">qI")

    def _offset_of(self, n: int) -> int:
        return self.base_offset + self.entry(n)[1]

    def _increasing(self, before: tuple[int, int], after: tuple[int, int]) -> bool:
        return after[0] > before[0] and after[1] >= before[1]

    @property
    def is_full(self) -> bool:
        # One slot stays free for the entry written when the segment becomes inactive.
        return self.entries >= self.max_entries - 1

    def last_entry(self) -> TimestampOffset:
        if not self.entries:
            return TimestampOffset(-1, self.base_offset)
        timestamp, relative = self.entry(self.entries - 1)
        return TimestampOffset(timestamp, self.base_offset + relative)

    def lookup(self, timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= ``timestamp``, or (-1, base offset)."""
        slot = self._search(timestamp, self._key)
        if slot < 0:
            return TimestampOffset(-1, self.base_offset)
        ts, relative = self.entry(slot)
        return TimestampOffset(ts, self.base_offset + relative)

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add an entry if ``timestamp`` is larger than the last one (an empty index's last is
        -1, as Kafka's: closing a segment without records appends nothing)."""
        if timestamp <= self.last_entry().timestamp:
            return
        if self.entries >= self.max_entries or (self.is_full and not skip_full_check):
            return
        self._append(timestamp, offset - self.base_offset)
