"""Reads from the object store (Kafka's RemoteLogManager.read and RemoteLogReader, KIP-405): the
records of a consumer's Fetch below the local log start offset, and what a follower that fell
behind the leader's local log start rebuilds its state from.

- ``RemoteRecords``: whole batches read from a remote ``.log`` (bytes, sent as they are);
- ``RemoteLogReader``: finds the remote segment covering an offset (the store's manifests, kept
  to the reading replica's leader-epoch lineage as the remote log manager keeps them), its
  position through the remote offset index, then reads whole batches from there up to the
  fetch's byte limit (the first batch whole when the fetch must progress, as KIP-74's local
  reads) and below the reader's upper offset.

The ``.log`` is read in the remote storage manager's checksum chunks (``chunk_bytes``, each
verified before it is used): a bounded LRU of recently read chunks (``cache_bytes``) serves
consumers reading on, and each read schedules the chunk after the last one it used (read-ahead),
so a consumer reading a segment through waits on the store about once per chunk, not per fetch.
Offset, time and transaction indexes are cached the same way (an LRU by bytes). Sizes, threads
and the bound on pending reads are ``RemoteReaderConfig`` (Kafka's names, odradek.config.tiered).

Thread-safety: ``read`` and ``aborted`` run in this reader's worker threads (boto3 blocks), never
on the event loop; the caches take one lock. ``segments`` and ``covering`` run on the event loop
(they read the log's leader-epoch cache); a listing runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

from odradek.broker.metrics.idle import MeteredExecutor
from odradek.errors import ErrorCode, KafkaError

from .log import Log
from .remote_log_plan import lineage
from .remote_metadata import IndexType, RemoteLogSegmentMetadata, RemoteResourceNotFoundException, \
    RemoteStorageException
from .remote_storage import RemoteStorageManager

__all__ = ["ReaderQueueFull", "RemoteLogReader", "RemoteReaderConfig", "RemoteRecords", "index_position",
           "parse_txn_index"]

log = logging.getLogger(__name__)

_BATCH_HEAD = struct.Struct(">qi")          # base offset, batch length (bytes after these 12)
_LAST_DELTA = struct.Struct(">i")           # lastOffsetDelta, at byte 23 of a v2 batch
_HEAD_BYTES = 27
_INDEX_ENTRY = struct.Struct(">ii")         # relative offset, position
_TXN_ENTRY = struct.Struct(">hqqqq")        # version, producer id, first, last, last stable offset


@dataclass(frozen=True, slots=True)
class RemoteRecords:
    """Whole batches read from the store; ``fd`` -1 tells the encoder to send ``data`` itself."""

    data: bytes
    first_offset: int
    next_offset: int
    fd: int = -1
    position: int = 0

    @property
    def size(self) -> int:
        return len(self.data)

    def read(self) -> bytes:
        return self.data


def index_position(index: bytes, base_offset: int, offset: int) -> int:
    """The position of the largest offset-index entry at or below ``offset`` (0 if none); the
    index's unused tail (zero entries after the first) ends it."""
    target = offset - base_offset
    entries = []
    for i in range(0, len(index) - _INDEX_ENTRY.size + 1, _INDEX_ENTRY.size):
        rel, pos = _INDEX_ENTRY.unpack_from(index, i)
        if entries and rel <= entries[-1][0]:
            break
        entries.append((rel, pos))
    lo, hi, found = 0, len(entries) - 1, 0
    while lo <= hi:
        mid = (lo + hi) // 2
        if entries[mid][0] <= target:
            found, lo = entries[mid][1], mid + 1
        else:
            hi = mid - 1
    return found


def parse_txn_index(data: bytes) -> list[tuple[int, int, int]]:
    """(producer id, first offset, last offset) of each aborted transaction of a ``.txnindex``."""
    out = []
    for i in range(0, len(data) - _TXN_ENTRY.size + 1, _TXN_ENTRY.size):
        _version, pid, first, last, _lso = _TXN_ENTRY.unpack_from(data, i)
        out.append((pid, first, last))
    return out


class _Lru:
    """A bounded LRU by total size (bytes values) or by count; callers hold the reader's lock."""

    def __init__(self, limit: int, weigh=len) -> None:
        self.items: OrderedDict = OrderedDict()
        self.limit, self.weigh, self.total = limit, weigh, 0

    def get(self, key):
        value = self.items.get(key)
        if value is not None:
            self.items.move_to_end(key)
        return value

    def put(self, key, value) -> None:
        if key in self.items:
            return
        self.items[key] = value
        self.total += self.weigh(value)
        while self.total > self.limit and len(self.items) > 1:
            _, old = self.items.popitem(last=False)
            self.total -= self.weigh(old)


@dataclass(frozen=True, slots=True)
class RemoteReaderConfig:
    """The reader's tunables (odradek.config.tiered: Kafka's names and defaults, the chunk cache's
    from the S3 plugin's ``fetch.chunk.cache.size``)."""

    threads: int = 10                      # remote.log.reader.threads
    max_pending_tasks: int = 100           # remote.log.reader.max.pending.tasks
    fetch_max_wait_ms: int = 500           # remote.fetch.max.wait.ms
    index_cache_bytes: int = 1 << 30       # remote.log.index.file.cache.total.size.bytes
    chunk_cache_bytes: int = 64 << 20      # rsm.config.fetch.chunk.cache.size

    @classmethod
    def of(cls, config) -> "RemoteReaderConfig":
        """From a BrokerConfig."""
        return cls(config.remote_log_reader_threads, config.remote_log_reader_max_pending_tasks,
                   config.remote_fetch_max_wait_ms, config.remote_log_index_file_cache_total_size_bytes,
                   config.rsm_fetch_chunk_cache_size)


class ReaderQueueFull(RemoteStorageException):
    """remote.log.reader.max.pending.tasks reads are queued or running (Kafka's rejected task)."""


class RemoteLogReader:
    def __init__(self, rsm: RemoteStorageManager, config: RemoteReaderConfig = RemoteReaderConfig()) -> None:
        self.rsm = rsm
        self.config = config
        self.chunk = rsm.config.chunk_bytes
        self._lock = threading.Lock()
        self._chunks = _Lru(config.chunk_cache_bytes)
        self._indexes = _Lru(config.index_cache_bytes)
        self._ahead: dict = {}             # chunk key -> the Future reading it ahead
        self._listed: dict[tuple[str, int], list[RemoteLogSegmentMetadata]] = {}
        self.executor = MeteredExecutor(config.threads, thread_name_prefix="remote-read")   # its queue and idle time: metrics.remote
        self.pending = 0                   # submitted reads not yet done (event loop)
        self.reads = self.hits = self.read_ahead = 0   # chunk reads from the store, cache hits, read-aheads

    # -- which segment (event loop) --------------------------------------------------------------

    def note_listing(self, lg: Log, listed: Sequence[RemoteLogSegmentMetadata]) -> None:
        """The remote log manager's latest listing of a partition (saves a listing per read)."""
        self._listed[(lg.topic, lg.partition)] = list(listed)

    async def segments(self, lg: Log, topic_id: str, offset: int) -> list[RemoteLogSegmentMetadata]:
        """The partition's remote segments in this replica's lineage, listed again if the last
        listing has none reaching ``offset``."""
        listed = self._listed.get((lg.topic, lg.partition), [])
        if not any(m.end_offset >= offset for m in listed):
            loop = asyncio.get_running_loop()
            listed = await loop.run_in_executor(self.executor, self.rsm.list_log_segments, topic_id,
                                                lg.topic, lg.partition)
            self._listed[(lg.topic, lg.partition)] = listed
        return lineage(listed, lg)

    @staticmethod
    def covering(remote: Sequence[RemoteLogSegmentMetadata], offset: int) -> int:
        """The index in ``remote`` of the segment holding ``offset``, else of the first after it
        (offsets a segment lacks: Kafka's findNextSegmentMetadata); OFFSET_OUT_OF_RANGE if none."""
        for i, m in enumerate(remote):
            if m.end_offset >= offset:
                return i
        raise KafkaError(ErrorCode.offset_out_of_range, f"no remote segment holds offset {offset}")

    def submit(self, fn, *args) -> asyncio.Future:
        """``fn(*args)`` in a worker thread, counted against remote.log.reader.max.pending.tasks:
        ``ReaderQueueFull`` beyond it (the fetch is answered an error and retried, as Kafka's)."""
        if self.pending >= self.config.max_pending_tasks:
            raise ReaderQueueFull(f"{self.pending} remote reads pending (remote.log.reader.max.pending.tasks)")
        self.pending += 1
        job = asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)
        job.add_done_callback(self._done)
        return job

    def _done(self, _job) -> None:
        self.pending -= 1

    def forget(self, lg: Log) -> None:
        self._listed.pop((lg.topic, lg.partition), None)

    # -- the bytes (worker threads) --------------------------------------------------------------

    def read(self, segment: RemoteLogSegmentMetadata, offset: int, max_bytes: int, upper: int,
             min_one: bool) -> RemoteRecords:
        """Whole batches of ``segment`` from the one holding ``offset``, below ``upper``, at most
        ``max_bytes`` (the first batch whole if ``min_one``)."""
        index = self.index(segment, IndexType.OFFSET)
        pos = index_position(index, segment.start_offset, offset) if offset > segment.start_offset else 0
        end = segment.segment_size_in_bytes
        first = last_end = -1
        taken = 0
        next_offset = offset
        while pos + _HEAD_BYTES <= end:
            base, length = _BATCH_HEAD.unpack(self.log_bytes(segment, pos, pos + 12))
            size = 12 + length
            last = base + _LAST_DELTA.unpack(self.log_bytes(segment, pos + 23, pos + 27))[0]
            if base >= upper:
                break
            if last >= offset:
                if taken + size > max_bytes and not (taken == 0 and min_one):
                    break
                if first < 0:
                    first = pos
                taken += size
                last_end, next_offset = pos + size, last + 1
            pos += size
        if first < 0:
            return RemoteRecords(b"", offset, offset)
        data = self.log_bytes(segment, first, last_end)
        self._ahead_of(segment, (last_end // self.chunk + 1) * self.chunk)   # the chunk after those read
        return RemoteRecords(data, _BATCH_HEAD.unpack_from(data)[0], next_offset)

    def aborted(self, remote: Sequence[RemoteLogSegmentMetadata], start: int, upper: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the transactions aborted that overlap ``start..upper``
        from the remote transaction indexes: the segment holding ``start`` and those after it,
        up to the first starting at or past ``upper`` (an abort's marker may come later)."""
        found = []
        for m in remote:
            if m.end_offset < start:
                continue
            try:
                entries = parse_txn_index(self.index(m, IndexType.TRANSACTION))
            except RemoteResourceNotFoundException:
                entries = []
            found += [(pid, first) for pid, first, last in entries if last >= start and first < upper]
            if m.start_offset >= upper:
                break
        return sorted(set(found), key=lambda t: t[1])

    def index(self, segment: RemoteLogSegmentMetadata, kind: IndexType) -> bytes:
        """A remote index object of ``segment``, cached (also ``storage.remote_timestamp``)."""
        key = (segment.segment_id, kind)
        with self._lock:
            cached = self._indexes.get(key)
        if cached is None:
            cached = self.rsm.fetch_index(segment, kind)
            with self._lock:
                self._indexes.put(key, cached)
        return cached

    def log_bytes(self, segment: RemoteLogSegmentMetadata, start: int, end: int) -> bytes:
        """Bytes ``start..end`` (exclusive) of the segment's ``.log``, from verified cached chunks."""
        c0, c1 = start // self.chunk, (end - 1) // self.chunk
        joined = b"".join(self._chunk(segment, i) for i in range(c0, c1 + 1))
        return joined[start - c0 * self.chunk:end - c0 * self.chunk]

    def _chunk(self, segment: RemoteLogSegmentMetadata, i: int, ahead: bool = False) -> bytes:
        key = (segment.segment_id, i)
        with self._lock:
            cached = self._chunks.get(key)
            pending = None if ahead or cached is not None else self._ahead.get(key)
        if pending is not None:
            cached = self._after_read_ahead(key, pending)
        if cached is not None:
            self.hits += 1
            return cached
        last = min((i + 1) * self.chunk, segment.segment_size_in_bytes) - 1
        data = self.rsm.fetch_log_segment(segment, i * self.chunk, last)   # verified, or raises
        self.reads += 1
        with self._lock:
            self._chunks.put(key, data)
        return data

    def _after_read_ahead(self, key, pending) -> bytes | None:
        """The chunk a read-ahead is getting: waited for if it runs (the store is asked once),
        else the read-ahead is cancelled and the caller reads it (a queued read-ahead may sit
        behind the very thread that needs it)."""
        if pending.cancel():
            with self._lock:
                self._ahead.pop(key, None)
            return None
        try:
            pending.result()
        except Exception:  # noqa: BLE001 - the caller's own read reports the error
            return None
        with self._lock:
            return self._chunks.get(key)

    @property
    def reading_ahead(self) -> int:
        """Read-aheads queued or running."""
        with self._lock:
            return len(self._ahead)

    def _ahead_of(self, segment: RemoteLogSegmentMetadata, position: int) -> None:
        """Read the chunk holding ``position`` in the background, unless cached or past the end."""
        i = position // self.chunk
        key = (segment.segment_id, i)
        with self._lock:
            if position >= segment.segment_size_in_bytes or key in self._chunks.items or key in self._ahead:
                return
            self._ahead[key] = self.executor.submit(self._read_ahead, segment, i, key)
        self.read_ahead += 1

    def _read_ahead(self, segment: RemoteLogSegmentMetadata, i: int, key) -> None:
        try:
            self._chunk(segment, i, ahead=True)
        except RemoteStorageException as e:   # the read that needs it reports the error
            log.debug("read-ahead of %s chunk %d failed: %s", segment.segment_id, i, e)
        finally:
            with self._lock:
                self._ahead.pop(key, None)

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
