"""A segment's ``.log`` file (Kafka's FileRecords): append, batch scans, slices, truncation.

On disk: record batches v2 back to back, exactly as producers sent them except for the
baseOffset / partitionLeaderEpoch (and, under LogAppendTime, maxTimestamp) the broker
rewrote. No header, no footer: a torn tail is found by walking batch lengths and CRCs.

Appends are ``os.pwrite`` at the end (the page cache makes them cheap); reads for clients
are ``(fd, position, size)`` regions sent with ``sendfile``; header scans go through a
read-only mmap of the file that is remapped when the file has grown. Not thread-safe: one
event-loop thread owns the file.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from odradek.errors import KafkaError
from odradek.records import RecordBatch, iter_batches


class BatchLocation(NamedTuple):
    """Where a batch sits in the file, with the offsets it covers."""

    base_offset: int
    last_offset: int
    position: int
    size: int


class FileRecords:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        self._map: mmap.mmap | None = None

    def append(self, data: memoryview | bytes) -> int:
        """Write ``data`` at the end of the file; return the position it starts at."""
        position = self.size
        view, written = memoryview(data), 0
        while written < len(view):
            written += os.pwrite(self.fd, view[written:], position + written)
        self.size += written
        return position

    def _mapped(self) -> mmap.mmap | None:
        if self.size == 0:
            return None
        if self._map is None or len(self._map) < self.size:
            # The old map stays valid for whoever still holds it; it closes when dropped.
            self._map = mmap.mmap(self.fd, self.size, prot=mmap.PROT_READ)
        return self._map

    def batches_from(self, position: int = 0, end: int | None = None) -> Iterator[RecordBatch]:
        """Header views of the whole batches in [position, end) (checked lengths only)."""
        m = self._mapped()
        if m is None:
            return iter(())
        return iter_batches(m, position, self.size if end is None else min(end, self.size))

    def read_batch(self, position: int, size: int) -> RecordBatch:
        """A private copy of one batch, for the slow paths that decode records."""
        return RecordBatch(memoryview(bytearray(os.pread(self.fd, size, position))))

    def valid_prefix(self, visit: Callable[[RecordBatch], None]) -> int:
        """Walk the file from the start, calling ``visit`` on each whole batch.

        ``visit`` raises (any KafkaError) at the first bad batch; returns the length of the
        prefix made of good batches. The batch views are only valid during the call.
        """
        m = self._mapped()
        if m is None:
            return 0
        valid = 0
        view = memoryview(m)
        try:
            for batch in iter_batches(view):
                try:
                    visit(batch)
                except KafkaError:
                    break
                valid = batch.position + batch.size
        finally:
            view.release()
        return valid

    def search_for_offset(self, target: int, start_position: int) -> BatchLocation | None:
        """The first batch from ``start_position`` whose last offset is >= ``target``."""
        for batch in self.batches_from(start_position):
            last = batch.last_offset
            if last >= target:
                return BatchLocation(batch.base_offset, last, batch.position, batch.size)
        return None

    def truncate_to(self, size: int) -> int:
        """Cut the file to ``size`` bytes; return how many bytes went."""
        if size > self.size or size < 0:
            raise ValueError(f"cannot truncate {self.path} of {self.size} bytes to {size}")
        removed = self.size - size
        if removed:
            self._map = None
            os.ftruncate(self.fd, size)
            self.size = size
        return removed

    def flush(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            self._map = None
            os.close(self.fd)
            self.fd = -1

    def rename(self, path: Path) -> None:
        os.rename(self.path, path)
        self.path = path
