"""A segment's ``.log`` file (Kafka's FileRecords): append, batch scans, slices, truncation.

On disk: record batches v2 back to back, exactly as producers sent them except for the
baseOffset / partitionLeaderEpoch (and, under LogAppendTime, maxTimestamp) the broker
rewrote. No header, no footer: a torn tail is found by walking batch lengths and CRCs.

Appends are ``os.pwrite`` at the end (the page cache makes them cheap); reads for clients
are ``(fd, position, size)`` regions sent with ``sendfile``; header scans ``pread`` the
file in chunks (4 KiB first, doubling to 64 KiB) and unpack each batch's header into a
``BatchHeader`` value (no mmap: mapped pages of a large log would count as the broker's
resident memory, and a read is all Kafka does too). Not thread-safe: one event-loop thread
owns the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from odradek.errors import KafkaError
from odradek.records import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, RecordBatch, batch_size, iter_batches, read_header

_SCAN_CHUNK = 64 * 1024
# a scan's first read: most scans start at an index entry and end within an index interval or two
# (4 KiB by default), a 64 KiB first read copied mostly bytes no header is in (two per fetch)
_FIRST_CHUNK = 4 * 1024
_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024


def _after(pieces: list[memoryview], written: int) -> list[memoryview]:
    """What of ``pieces`` is left once their first ``written`` bytes are written."""
    for i, piece in enumerate(pieces):
        if written < len(piece):
            return [piece[written:], *pieces[i + 1:]] if written else pieces[i:]
        written -= len(piece)
    return []


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

    def append(self, data: memoryview | bytes | list) -> int:
        """Write ``data`` (a buffer, or a list of buffers written as one: ``pwritev``) at the end
        of the file; return the position it starts at."""
        position = self.size
        pieces = [memoryview(p).cast("B") for p in data] if isinstance(data, list) else [memoryview(data).cast("B")]
        while pieces:
            written = os.pwritev(self.fd, pieces[:_IOV_MAX], self.size)
            self.size += written
            pieces = _after(pieces, written)
        return position

    def batches_from(self, position: int = 0, end: int | None = None) -> Iterator[BatchHeader]:
        """Headers of the whole batches in [position, end) (checked lengths only); each
        header's ``position`` is the batch's position in the file."""
        end = self.size if end is None else min(end, self.size)
        chunk, chunk_start, chunk_size = b"", position, _FIRST_CHUNK
        want = chunk_size
        while end - position >= HEADER_SIZE:
            at = position - chunk_start
            if len(chunk) - at < HEADER_SIZE:
                chunk, chunk_start, at = os.pread(self.fd, min(want, end - position), position), position, 0
                if len(chunk) < HEADER_SIZE:
                    return
                chunk_size = min(2 * chunk_size, _SCAN_CHUNK)
            header = read_header(chunk, at, position)
            size = header.size
            if size < HEADER_SIZE or size > end - position:
                return
            yield header
            position += size
            # past a batch as large as a chunk the next header is not in it: read only that header
            # (a consumer's 8 MiB fetch of 256 KiB batches copied 64 KiB per batch to find its end)
            want = HEADER_SIZE if size >= chunk_size else chunk_size

    def read_batch(self, position: int, size: int) -> RecordBatch:
        """A private copy of one batch, for the slow paths that decode records."""
        return RecordBatch(memoryview(bytearray(os.pread(self.fd, size, position))))

    def valid_prefix(self, visit: Callable[[RecordBatch, int], None]) -> int:
        """Walk the file from the start, calling ``visit(batch, file_position)`` on each whole
        batch (the batch is a view of a chunk: its own ``position`` is within the chunk).

        ``visit`` raises (any KafkaError) at the first bad batch; returns the length of the
        prefix made of good batches. Batches are read in chunks of at least 1 MiB.
        """
        valid = 0
        while valid < self.size:
            want = min(max(1 << 20, self._batch_size_at(valid)), self.size - valid)
            chunk = memoryview(os.pread(self.fd, want, valid))
            consumed = 0
            for batch in iter_batches(chunk):
                try:
                    visit(batch, valid + batch.position)
                except KafkaError:
                    return valid + consumed
                consumed = batch.position + batch.size
            if consumed == 0:
                return valid  # torn or short tail
            valid += consumed
        return valid

    def _batch_size_at(self, position: int) -> int:
        head = os.pread(self.fd, LOG_OVERHEAD, position)
        return batch_size(head) if len(head) == LOG_OVERHEAD else 0

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
            os.ftruncate(self.fd, size)
            self.size = size
        return removed

    def flush(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def rename(self, path: Path) -> None:
        os.rename(self.path, path)
        self.path = path

