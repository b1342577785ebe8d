"""The fetch read path's value types and its one pass over the logs (Kafka's FetchParams,
FetchPartitionData/LogReadResult and ReplicaManager.readFromLog).

``FetchParams`` is what a Fetch request asks, once translated by the handler: who reads
(a follower's ``replica_id`` >= 0, or a consumer: -1), how long it may wait for how many
bytes, its byte limits (KIP-74), its isolation level (KIP-98), whether it may read from a
follower here (Fetch v11+, KIP-392) and its rack when a replica selector is configured.
Positions (what to read of each partition) come from the fetch session's context
(``replication.fetch_session``): request partitions or a session's ``CachedPartition``,
alike in their attributes (``FetchPosition``).

``read_logs`` reads each wanted partition once and answers a ``PartitionRead`` per partition:
- consumers read below the high watermark; read_committed ones below the last stable offset,
  with the aborted transactions overlapping what they were sent (from the ``.txnindex``);
  followers read up to the log end, markers and transactional batches like any batch;
- the first batch of the first non-empty partition is sent whole (KIP-74), so a reader
  always progresses; records are a ``FetchSlice`` of a segment file, sent by sendfile;
- an offset below the local log start offset of a tiered topic is in the object store:
  ``remote_fetch`` answers a follower OFFSET_MOVED_TO_TIERED_STORAGE and reads a consumer's
  records from the store once this pass is done (one comparison on the local path);
- a consumer whose ``last_fetched_epoch`` shows a diverged log gets the diverging epoch
  (KIP-320) and no records; one in another rack than a follower here may get that
  ``preferred_read_replica`` (KIP-392) and no records: both are answered at once, as errors are.

Event-loop thread only; no per-record work (records stay in the segment files).
"""

from __future__ import annotations

import enum
import time
from types import MappingProxyType
from typing import TYPE_CHECKING, Iterable, Mapping, NamedTuple, Protocol, Sequence

from odradek.broker.replication.remote_fetch import RemoteFetch, tiered_read
from odradek.broker.replication.replica_selector import preferred_read_replica
from odradek.broker.storage.segment import FetchSlice
from odradek.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.broker.partitions import LeaderPartition, ReplicaManager


class IsolationLevel(enum.IntEnum):
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


def fetcher_id(req) -> int:
    """A Fetch request's replica id (-1: a consumer); v15+ carry it in ``replica_state`` (KIP-903)."""
    state = getattr(req, "replica_state", None)
    return state.replica_id if state is not None else req.replica_id


class FetchParams(NamedTuple):   # one per fetch: a NamedTuple is built in a third of a frozen dataclass's time
    replica_id: int                 # a follower's broker id, -1 for a consumer
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED
    any_replica: bool = False       # a consumer's Fetch v11+: any replica here may answer (KIP-392)
    client_rack: str = ""           # the consumer's rack, when a replica selector is configured
    refused: Mapping[str, ErrorCode] = MappingProxyType({})  # topics answered an error unread (denied, inconsistent id)

    @property
    def follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def committed(self) -> bool:
        """A read_committed consumer (followers read everything)."""
        return self.replica_id < 0 and self.isolation == IsolationLevel.READ_COMMITTED


class FetchPosition(Protocol):
    """Where to read one partition (a request's FetchPartition or a session's CachedPartition;
    older Fetch versions lack the epochs and the log start offset: read as -1)."""
    partition: int
    fetch_offset: int
    partition_max_bytes: int


class PartitionRead(NamedTuple):
    """One partition's answer (Kafka's FetchPartitionData); a NamedTuple: thousands per fetch."""
    partition: int
    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    records: FetchSlice | None = None
    diverging: tuple[int, int] | None = None   # (epoch, end offset) of a diverged log (KIP-320)
    last_stable_offset: int = -1
    aborted: tuple | None = None    # (producer id, first offset) pairs, read_committed only
    preferred_replica: int = -1     # the replica the consumer should fetch from instead (KIP-392)
    unsent: bool = False            # records were there but did not fit (a session reads it again)
    remote: "RemoteFetch | None" = None   # to be read from the object store (KIP-405), then filled in


class FetchResult(NamedTuple):
    """Per topic, its partitions' answers (in the order asked); ``bytes`` of records in all."""
    topics: list[tuple[str, list[PartitionRead]]]
    bytes: int
    remote: bool = False            # a partition is to be read from the object store (``remote_fetch``)


def read_logs(rm: "ReplicaManager", params: FetchParams,
              wanted: Iterable[tuple[str, Sequence[FetchPosition]]]) -> tuple[FetchResult, bool]:
    """One read of every partition in ``wanted`` ((topic, [FetchPosition])); True with it if a
    partition must be answered at once (an error, a diverging epoch, a preferred replica)."""
    follower, committed = params.follower, params.committed
    quota = rm.quotas.leader if follower else None
    throttling = quota is not None and bool(quota.throttled_topics)   # else no partition is throttled
    throttled_budget = quota.fetch_budget() if throttling else 0
    lookup = rm.replica if params.any_replica else rm.leader
    refusals = params.refused
    budget = params.max_bytes
    total = 0
    failed = remote = False
    results = []
    for topic, partitions in wanted:
        refused = refusals.get(topic) if refusals else None
        if refused is not None:
            failed = True
            results.append((topic, [PartitionRead(p.partition, refused) for p in partitions]))
            continue
        parts = []
        for p in partitions:
            fetch_offset = p.fetch_offset
            try:
                lp = lookup(topic, p.partition, getattr(p, "current_leader_epoch", -1))
                log = lp.log
                early = None if follower else _answer_at_once(rm, params, lp, p)  # consumers' rules
                if early is not None:
                    failed = True
                    parts.append(early)
                    continue
                lso = log.last_stable_offset
                upper = log.log_end_offset if follower else lso if committed else log.high_watermark
                records = None
                aborted = () if committed else None
                # at the end already (a caught-up follower's next fetch): nothing to read, no quota to count
                if fetch_offset != upper or fetch_offset < log.local_log_start_offset:
                    limit = min(p.partition_max_bytes, budget - total)
                    throttled = throttling and quota.is_throttled(topic, p.partition)
                    # Kafka's shouldLeaderThrottle: nothing of this partition this time, it comes again
                    catching_up = throttled and params.replica_id not in lp.partition.isr
                    held = catching_up and quota.exceeded()
                    if catching_up:   # at most the quota's fetch budget over this read's throttled partitions
                        limit = min(limit, throttled_budget)
                    if fetch_offset < log.local_log_start_offset:   # below the disk: in the store, if tiered
                        tiered = tiered_read(rm, params, log, topic, p, limit, total == 0, upper, not remote)
                        if tiered is not None:
                            failed = True
                            remote = remote or tiered.remote is not None
                            parts.append(tiered)
                            continue
                    if not held and (limit > 0 or total == 0):
                        chunk = log.read(fetch_offset, max(limit, 0), max_offset=upper, min_one_batch=total == 0)
                        if chunk.size:
                            records = chunk
                            total += chunk.size
                            if quota is not None:
                                _record_replication(quota, throttled, chunk.size)
                                throttled_budget -= chunk.size if catching_up else 0
                            if committed:
                                aborted = tuple((t.producer_id, t.first_offset)
                                                for t in log.aborted_transactions(fetch_offset, chunk.next_offset))
                # positional: a third cheaper than by keyword, and one per partition read
                parts.append(PartitionRead(p.partition, ErrorCode.none, log.high_watermark, log.log_start_offset,
                                           records, None, lso, aborted, -1, records is None and fetch_offset < upper))
            except KafkaError as e:
                failed = True
                hw, start = _offsets(rm, topic, p.partition)
                parts.append(PartitionRead(p.partition, e.code, hw, start))
        results.append((topic, parts))
    return FetchResult(results, total, remote), failed


def _record_replication(quota, throttled: bool, size: int) -> None:
    """Bytes sent to a follower: all count as replication bytes out, a throttled partition's
    against the leader quota too, in-sync followers' included (Kafka's sizeOfThrottledPartitions)."""
    quota.bytes_total += size
    if throttled:
        quota.record(size)


def _answer_at_once(rm: "ReplicaManager", params: FetchParams, lp: "LeaderPartition", p) -> PartitionRead | None:
    """A consumer pointed to a replica in its rack, or told its log diverged: no records."""
    log = lp.log
    preferred = _preferred(rm, params, lp, p.fetch_offset)
    if preferred is not None:
        return PartitionRead(p.partition, ErrorCode.none, log.high_watermark, log.log_start_offset,
                             last_stable_offset=log.last_stable_offset, preferred_replica=preferred)
    diverging = _diverging(log, p)
    if diverging is not None:
        return PartitionRead(p.partition, ErrorCode.none, log.high_watermark, log.log_start_offset,
                             diverging=diverging, last_stable_offset=log.last_stable_offset)
    return None


def _preferred(rm: "ReplicaManager", params: FetchParams, lp: "LeaderPartition", fetch_offset: int) -> int | None:
    if not params.client_rack or not lp.partition.leading:
        return None
    return preferred_read_replica(lp.partition, params.client_rack, fetch_offset, int(time.time() * 1000),
                                  rm.rack_of, rm.is_live)


def _diverging(log, p) -> tuple[int, int] | None:
    """(epoch, end offset) if a consumer's last fetched epoch shows a divergent log (KIP-320)."""
    last_epoch = getattr(p, "last_fetched_epoch", -1)
    if last_epoch < 0:
        return None
    epoch, end_offset = log.end_offset_for_epoch(last_epoch)
    if end_offset < 0:
        return None
    if epoch < last_epoch or end_offset < p.fetch_offset:
        return epoch, end_offset
    return None


def _offsets(rm: "ReplicaManager", topic: str, partition: int) -> tuple[int, int]:
    log = rm.logs.get(topic, partition)
    return (log.high_watermark, log.log_start_offset) if log is not None else (-1, -1)
