"""The tiered branch of a Fetch (KIP-405; Kafka's ReplicaManager.handleOffsetOutOfRangeError and
DelayedRemoteFetch): an offset at or above the log start offset but below the local log start
offset is in the object store only.

- a follower is answered OFFSET_MOVED_TO_TIERED_STORAGE (109) with the leader's offsets, and
  rebuilds its state from the store (``storage.remote_follower``) before fetching from the
  leader's local log start;
- a consumer's read is noted (``RemoteFetch``) and the fetch answered once the reader
  (``storage.remote_read``) has read it in a worker thread: records from the store, whole
  batches, up to the partition's byte limit. As Kafka, one partition per fetch is read from the
  store (the first); other partitions below their local log start are answered without records
  this time. A read that takes longer than Kafka's ``remote.fetch.max.wait.ms`` is answered
  without records and no error: the read goes on and
  fills the cache the retried fetch reads from. A read that fails (the store down, a corrupt
  object: checksums; remote.log.reader.max.pending.tasks reads already pending) is answered
  UNKNOWN_SERVER_ERROR, what Kafka's ``Errors.forException``
  gives its RemoteStorageException (not an ApiException): clients retry; nothing unverified is
  ever sent.

Event-loop thread; the reader's blocking calls run in its worker threads.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, NamedTuple

from odradek import logs
from odradek.broker.metrics.remote import count_remote_read
from odradek.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.broker.partitions import ReplicaManager
    from odradek.broker.replication.read import FetchParams, FetchResult, PartitionRead
    from odradek.broker.storage import Log

log = logging.getLogger(__name__)

class RemoteFetch(NamedTuple):
    """What a consumer's fetch reads from the store (Kafka's RemoteStorageFetchInfo)."""
    topic: str
    log: "Log"
    offset: int
    max_bytes: int
    min_one: bool
    upper: int            # the reader's bound: the high watermark, or the LSO for read_committed
    committed: bool


def tiered_read(rm: "ReplicaManager", params: "FetchParams", log_: "Log", topic: str, p, limit: int,
                min_one: bool, upper: int, first: bool) -> "PartitionRead | None":
    """The answer for a fetch offset below the local log start, or None when the offset is not in
    the store (no remote storage, or below the log start: the local read answers out of range)."""
    from odradek.broker.replication.read import PartitionRead
    offset = p.fetch_offset
    if not log_.config.remote_storage_enable or offset < log_.log_start_offset or rm.remote_reader is None:
        return None
    if params.follower:
        return PartitionRead(p.partition, ErrorCode.offset_moved_to_tiered_storage, log_.high_watermark,
                             log_.log_start_offset)
    lso = log_.last_stable_offset
    if not first:   # one partition from the store per fetch, as Kafka's
        return PartitionRead(p.partition, ErrorCode.none, log_.high_watermark, log_.log_start_offset,
                             last_stable_offset=lso, unsent=True)
    wanted = RemoteFetch(topic, log_, offset, max(limit, 0), min_one, upper, params.committed)
    return PartitionRead(p.partition, ErrorCode.none, log_.high_watermark, log_.log_start_offset,
                         last_stable_offset=lso, aborted=() if params.committed else None, remote=wanted)


async def complete_remote(rm: "ReplicaManager", result: "FetchResult") -> "FetchResult":
    """``result`` with its remote partition's records (or error) filled in."""
    from odradek.broker.replication.read import FetchResult
    topics, total = [], result.bytes
    for topic, parts in result.topics:
        filled = []
        for part in parts:
            if part.remote is not None:
                part = await _read(rm, part)
                total += part.records.size if part.records is not None else 0
            filled.append(part)
        topics.append((topic, filled))
    return FetchResult(topics, total)


async def _read(rm: "ReplicaManager", part: "PartitionRead") -> "PartitionRead":
    wanted: RemoteFetch = part.remote
    reader, lg = rm.remote_reader, wanted.log
    meta = rm.topic(wanted.topic)
    try:
        if meta is None or lg.closed:
            raise KafkaError(ErrorCode.not_leader_or_follower, f"{lg.name} is no longer hosted here")
        remote = await reader.segments(lg, meta.topic_id, wanted.offset)
        i = reader.covering(remote, wanted.offset)
        job = reader.submit(reader.read, remote[i], wanted.offset, wanted.max_bytes, wanted.upper, wanted.min_one)
        count_remote_read(rm.topic_stats, wanted.topic, job)   # RemoteFetch* meters, when it ends
        done, _ = await asyncio.wait([job], timeout=reader.config.fetch_max_wait_ms / 1000)
        if not done:   # answered empty; the read goes on and fills the cache
            job.add_done_callback(lambda f: f.cancelled() or f.exception())
            return part._replace(remote=None, unsent=True)
        records = job.result()
        aborted = part.aborted
        if wanted.committed and records.size:
            aborted = tuple(await reader.submit(reader.aborted, remote[i:], wanted.offset, records.next_offset))
            local = ((t.producer_id, t.first_offset) for t in lg.aborted_transactions(wanted.offset, records.next_offset))
            aborted = tuple(sorted(set(aborted).union(local), key=lambda t: t[1]))   # markers on the disk too
        return part._replace(remote=None, records=records if records.size else None, aborted=aborted)
    except KafkaError as e:
        return part._replace(remote=None, error=e.code)
    except Exception as e:  # noqa: BLE001 - Kafka's RemoteLogReader: any failure answers the error, logged
        reader.forget(lg)
        log.warning("%s: reading offset %d from remote storage failed: %s", lg.name, wanted.offset, e,
                    extra=logs.tp(lg.topic, lg.partition))
        return part._replace(remote=None, error=ErrorCode.unknown_server_error)
