"""Fetch: whole record batches, sent from the segment files.

Consumers read below the high watermark; followers (``replica_id`` >= 0) read up to the log
end, and their fetch offset is their log end offset: it is recorded once, when the request
arrives (it may move the HW and the ISR, see ReplicaManager.record_follower_fetch).
``current_leader_epoch`` is checked as Kafka does (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).
A consumer that sends ``last_fetched_epoch`` (v12+) gets ``diverging_epoch`` when its log
diverged from ours (KIP-320): the largest epoch <= its own and where that epoch ends.

Long poll: when fewer than ``min_bytes`` are ready, the request waits (no busy loop) until
an append wakes it or ``max_wait`` passes. Byte limits follow KIP-74: ``max_bytes`` for the
response and ``partition_max_bytes`` per partition, except that the first batch of the
first non-empty partition is always sent whole so that a consumer can always progress.
Fetch sessions (KIP-227, ``replication.fetch_session``): a full request may create one; an
incremental one fetches the partitions of its session and is answered only those with news.
A consumer's fetch counts its record bytes against ``consumer_byte_rate`` and its time against
``request_percentage`` (docs/quotas.md); when either throttles, the answer is empty with the
larger throttle time, as Kafka's.

Isolation (KIP-98): a read_committed consumer (``isolation_level`` 1) reads below the last
stable offset and gets the aborted transactions overlapping what it was sent (from the
segments' ``.txnindex``), to drop their records; a read_uncommitted one gets null there.
Every response carries the partition's ``last_stable_offset``. Followers read markers and
transactional batches like any other batch.

Follower fetching (KIP-392, docs/racks.md): a consumer's Fetch v11+ is served by any replica
here, a follower reading up to its own high watermark; with ``replica.selector.class`` set,
the leader answers a consumer whose ``rack_id`` names another rack with the
``preferred_read_replica`` there (``replication.replica_selector``) and no records, at once.
"""

from __future__ import annotations

import datetime
import time
from typing import NamedTuple

from odradek.broker.context import BrokerContext
from odradek.broker.metrics.stats import remote_time
from odradek.broker.quotas.entities import CONSUMER_BYTE_RATE
from odradek.broker.quotas.throttling import record_bytes, record_request_time, unrecord_bytes
from odradek.broker.replication.replica_selector import preferred_read_replica
from odradek.broker.security.acl import Operation, ResourceType
from odradek.broker.security.authorizer import allowed
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.codec import Schemas, make
from odradek.protocol.connection import FileRegion
from odradek.protocol.regions import encode_with_regions, marker

FETCH = 1
READ_COMMITTED = 1
FROM_ANY_REPLICA = 11   # Fetch versions from which a consumer may read from a follower (KIP-392)


class _Part(NamedTuple):
    partition: int
    error: ErrorCode
    hw: int = -1
    start: int = -1
    region: FileRegion | None = None
    diverging: tuple[int, int] | None = None
    lso: int = -1
    aborted: tuple | None = None    # (producer id, first offset) pairs, read_committed only
    preferred: int = -1     # the replica the consumer should fetch from instead (KIP-392)
    unsent: bool = False    # records were there but did not fit in the response (a session reads it again)


async def fetch(ctx: BrokerContext, header, req):
    deadline = time.monotonic() + req.max_wait.total_seconds()
    context = ctx.fetch_sessions.context(header.api_version, req, req.replica_id >= 0, _now_ms())
    if context.error != ErrorCode.none:
        return _encode(header, [], error=context.error)
    context.begin(ctx.replicas.generation)
    denied = _denied_topics(ctx, req.replica_id, context.wanted) if ctx.authorizer is not None else frozenset()
    if req.replica_id >= 0 and not denied:
        _record_follower_positions(ctx, req.replica_id, context)
    selector = _Selector.of(ctx, header, req)
    interest = None
    while True:
        results, total, failed = _collect(ctx, req, context.to_read(), denied, selector)
        remaining = deadline - time.monotonic()
        if total >= req.min_bytes or failed or remaining <= 0:
            break
        parked = time.monotonic()
        if interest is None:
            interest = context.interest()
        await ctx.replicas.wait_for_data(remaining, interest, follower=req.replica_id >= 0)
        remote_time(time.monotonic() - parked)
    throttle = 0
    if req.replica_id < 0:
        throttle = max(record_bytes(ctx.quotas, CONSUMER_BYTE_RATE, header, total),
                       record_request_time(ctx.quotas, header))
        if throttle:  # as Kafka: a fetch either quota throttles is answered empty, its bytes taken back
            unrecord_bytes(ctx.quotas, CONSUMER_BYTE_RATE, header, total)
            return _encode(header, [], throttle, session_id=context.throttled())
        _count_bytes_out(ctx, results)  # BytesOut counts consumers' fetches (followers' are replication)
    session_id, results = context.respond(results, _now_ms())
    return _encode(header, results, throttle, session_id=session_id)


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _denied_topics(ctx: BrokerContext, replica_id: int, wanted) -> frozenset[str]:
    """Topics answered TOPIC_AUTHORIZATION_FAILED, as Kafka: all of them for a follower without
    CLUSTER_ACTION on the cluster, else those a consumer may not READ."""
    names = frozenset(topic for topic, _ in wanted)
    if replica_id >= 0:
        return frozenset() if allowed(ctx, Operation.CLUSTER_ACTION, ResourceType.CLUSTER) else names
    return frozenset(n for n in names if not allowed(ctx, Operation.READ, ResourceType.TOPIC, n))


def _count_bytes_out(ctx: BrokerContext, results) -> None:
    stats = ctx.topic_stats
    for topic, parts in results:
        if ctx.replicas.topic(topic) is not None:  # no series for names a client made up
            stats.fetched(topic, sum(p.region.size for p in parts if p.region is not None))


def _record_follower_positions(ctx: BrokerContext, replica_id: int, context) -> None:
    for topic, partitions in context.to_record():
        for p in partitions:
            try:
                lp = ctx.replicas.leader(topic, p.partition, getattr(p, "current_leader_epoch", -1))
            except KafkaError:
                continue  # answered with the error by _collect
            ctx.replicas.record_follower_fetch(lp, replica_id, p.fetch_offset,
                                               getattr(p, "log_start_offset", -1),  # Fetch v5+
                                               session=context.session)
            context.recorded(topic, p.partition, replica_id in lp.partition.isr)


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


class _Selector(NamedTuple):
    """How a consumer's fetch picks its replica: from any replica here (v11+), and whether the
    leader points it to a follower in its rack (``rack``: the client's, when the selector is on)."""
    any_replica: bool
    rack: str

    @classmethod
    def of(cls, ctx: BrokerContext, header, req) -> "_Selector":
        if req.replica_id >= 0 or header.api_version < FROM_ANY_REPLICA:
            return cls(False, "")
        return cls(True, (getattr(req, "rack_id", "") or "") if ctx.config.replica_selector_class else "")

    def replica(self, ctx: BrokerContext, topic: str, p):
        epoch = getattr(p, "current_leader_epoch", -1)
        return (ctx.replicas.replica if self.any_replica else ctx.replicas.leader)(topic, p.partition, epoch)

    def preferred(self, ctx: BrokerContext, lp, fetch_offset: int) -> int | None:
        if not self.rack or not lp.partition.leading:
            return None
        return preferred_read_replica(lp.partition, self.rack, fetch_offset, int(time.time() * 1000),
                                      ctx.replicas.rack_of, ctx.replicas.is_live)


def _collect(ctx: BrokerContext, req, wanted, denied: frozenset[str], selector: _Selector):
    """Per topic: [_Part], bytes, any error (or a partition answered at once)."""
    follower = req.replica_id >= 0
    committed = not follower and getattr(req, "isolation_level", 0) == READ_COMMITTED
    budget = req.max_bytes
    total = 0
    failed = False
    results = []
    for topic, partitions in wanted:
        parts = []
        if topic in denied:
            failed = True
            results.append((topic, [_Part(p.partition, ErrorCode.topic_authorization_failed) for p in partitions]))
            continue
        for p in partitions:
            try:
                lp = selector.replica(ctx, topic, p)
                log = lp.log
                region = None
                preferred = selector.preferred(ctx, lp, p.fetch_offset)
                if preferred is not None:
                    failed = True  # answered at once, as Kafka does
                    parts.append(_Part(p.partition, ErrorCode.none, log.high_watermark, log.log_start_offset,
                                       lso=log.last_stable_offset, preferred=preferred))
                    continue
                diverging = None if follower else _diverging(log, p)
                if diverging is not None:
                    failed = True  # answered at once, as Kafka does
                    parts.append(_Part(p.partition, ErrorCode.none, log.high_watermark, log.log_start_offset,
                                       diverging=diverging, lso=log.last_stable_offset))
                    continue
                lso = log.last_stable_offset
                upper = log.log_end_offset if follower else lso if committed else log.high_watermark
                limit = min(p.partition_max_bytes, budget - total)
                aborted = () if committed else None
                if limit > 0 or total == 0:
                    chunk = log.read(p.fetch_offset, max(limit, 0), max_offset=upper,
                                     min_one_batch=total == 0)
                    if chunk.size:
                        region = FileRegion(chunk.fd, chunk.position, chunk.size)
                        total += chunk.size
                        if committed:
                            aborted = tuple((t.producer_id, t.first_offset)
                                            for t in log.aborted_transactions(p.fetch_offset, chunk.next_offset))
                parts.append(_Part(p.partition, ErrorCode.none, log.high_watermark, log.log_start_offset, region,
                                   lso=lso, aborted=aborted, unsent=region is None and p.fetch_offset < upper))
            except KafkaError as e:
                failed = True
                hw, start = _offsets(ctx, topic, p.partition)
                parts.append(_Part(p.partition, e.code, hw, start))
        results.append((topic, parts))
    return results, total, failed


def _offsets(ctx: BrokerContext, topic: str, partition: int) -> tuple[int, int]:
    log = ctx.replicas.logs.get(topic, partition)
    return (log.high_watermark, log.log_start_offset) if log is not None else (-1, -1)


def _encode(header, results, throttle_ms: int = 0, *, session_id: int = 0, error: ErrorCode = ErrorCode.none):
    s = Schemas(FETCH, header.api_version)
    regions: list[FileRegion] = []
    topics = []
    for name, parts in results:
        datas = []
        for part in parts:
            records = b""
            if part.region is not None:
                records = marker(len(regions))
                regions.append(part.region)
            aborted = None if part.aborted is None else tuple(
                make(s.AbortedTransaction, producer_id=pid, first_offset=first) for pid, first in part.aborted)
            diverging = part.diverging
            datas.append(make(s.PartitionData, partition_index=part.partition, error_code=part.error,
                              high_watermark=part.hw, last_stable_offset=part.lso, log_start_offset=part.start,
                              aborted_transactions=aborted,
                              preferred_read_replica=part.preferred, records=records,
                              **({"diverging_epoch": make(s.EpochEndOffset, epoch=diverging[0],
                                                          end_offset=diverging[1])} if diverging else {})))
        topics.append(make(s.FetchableTopicResponse, topic=name, partitions=tuple(datas)))
    body = make(s.FetchResponse, throttle_time=datetime.timedelta(milliseconds=throttle_ms),
                error_code=error, session_id=session_id,
                responses=tuple(topics))
    return encode_with_regions(FETCH, header.api_version, header.correlation_id, body, regions,
                               flexible=header.api_version >= 12)
