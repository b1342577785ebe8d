"""Fetch: the request translated to the replica manager's read (``FetchParams``, positions from
the fetch session) and its ``FetchResult`` to the response, records sent from the segment
files (sendfile regions). What is read and how long a fetch waits is the replica manager's
(``ReplicaManager.read``, ``replication.read``); the rules, as seen by a client:

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
larger throttle time, as Kafka's; the handler returns that throttle with its answer (``Answer``).

Isolation (KIP-98): a read_committed consumer (``isolation_level`` 1) reads below the last
stable offset and gets the aborted transactions overlapping what it was sent (from the
segments' ``.txnindex``), to drop their records; a read_uncommitted one gets null there.
Every response carries the partition's ``last_stable_offset``. Followers read markers and
transactional batches like any other batch.

Follower fetching (KIP-392, docs/racks.md): a consumer's Fetch v11+ is served by any replica
here, a follower reading up to its own high watermark; with ``replica.selector.class`` set,
the leader answers a consumer whose ``rack_id`` names another rack with the
``preferred_read_replica`` there (``replication.replica_selector``) and no records, at once.

Topic ids (Fetch v13+, KIP-516, ``handlers.fetch_ids``): the request's ids are resolved to names
before the session and the read see it, an id naming no topic is answered UNKNOWN_TOPIC_ID, a
session's id that is no longer its topic's INCONSISTENT_TOPIC_ID; the answer names topics by
the ids the fetcher used. Fetch v15+ carries the follower's id in ``replica_state`` (KIP-903);
v16+ answers name the current leader of partitions answered NOT_LEADER_OR_FOLLOWER or
FENCED_LEADER_EPOCH, with its endpoint (KIP-951, ``handlers.leader_hints``).

ZStandard (KIP-110): a Fetch v4-v9, a consumer's or a follower's, is answered
UNSUPPORTED_COMPRESSION_TYPE, and nothing else (high watermark, offsets -1, null records), for each
partition this broker hosts a log of whose topic's ``compression.type`` is zstd, whatever the
batches' codecs and whatever else the read answered, as Kafka 3.9's maybeConvertFetchedData does
to the session's answer (the session keeps what was read).
"""

from __future__ import annotations

import time
from types import SimpleNamespace

from odradek.broker.context import BrokerContext
from odradek.broker.handlers.answer import Answer
from odradek.broker.handlers.fetch_encoding import encode_fetch_response
from odradek.broker.handlers.fetch_ids import by_name, inconsistent, unknown_ids
from odradek.broker.handlers.leader_hints import FETCH_ERRORS, FETCH_FROM, Hints
from odradek.config.quotas import CONSUMER_BYTE_RATE
from odradek.broker.quotas.throttling import record_bytes, record_request_time, unrecord_bytes
from odradek.broker.replication.fetch_session import TOPIC_IDS_FROM_VERSION
from odradek.broker.replication.read import FetchParams, IsolationLevel, PartitionRead, fetcher_id
from odradek.broker.security.acl import Operation, ResourceType
from odradek.broker.security.authorizer import allowed
from odradek.errors import ErrorCode

FROM_ANY_REPLICA = 11   # Fetch versions from which a consumer may read from a follower (KIP-392)
# null records (length -1), Kafka's in a refused partition's answer: the encoder writes its size, sends its data
_NULL_RECORDS = SimpleNamespace(size=-1, fd=-1, data=b"")
ZSTD_FROM = 10          # Fetch versions that may read a topic whose compression.type is zstd (KIP-110)


async def fetch(ctx: BrokerContext, header, req):
    replica_id = fetcher_id(req)
    named = by_name(ctx, header.api_version, req)
    context = ctx.fetch_sessions.context(header.api_version, named, replica_id >= 0, _now_ms())
    if context.error != ErrorCode.none:
        return _encode(ctx, header, [], error=context.error)
    refused = _denied_topics(ctx, replica_id, context.wanted) if ctx.authorizer is not None else {}
    if context.uses_topic_ids:
        refused = {**inconsistent(ctx, context), **refused}
    result = await ctx.replicas.read(_params(ctx, header, req, replica_id, refused), context)
    if replica_id < 0:
        throttle = max(record_bytes(ctx.quotas, CONSUMER_BYTE_RATE, header, result.bytes),
                       record_request_time(ctx.quotas, header))
        if throttle:  # as Kafka: a fetch either quota throttles is answered empty, its bytes taken back
            unrecord_bytes(ctx.quotas, CONSUMER_BYTE_RATE, header, result.bytes)
            return Answer(_encode(ctx, header, [], throttle, session_id=context.throttled()), throttle)
    session_id, topics = context.respond(result.topics, _now_ms())
    if replica_id < 0:
        _count_bytes_out(ctx, topics)  # BytesOut counts consumers' fetches (followers' are replication)
    if header.api_version < ZSTD_FROM:
        topics = _refuse_zstd(ctx, topics)
    if header.api_version >= TOPIC_IDS_FROM_VERSION:
        topics = topics + _unknown(named)
    return _encode(ctx, header, topics, session_id=session_id, ids=context.ids)


def _refuse_zstd(ctx: BrokerContext, topics: list) -> list:
    """``topics`` with UNSUPPORTED_COMPRESSION_TYPE for the partitions of a zstd topic hosted here (Fetch v4-v9)."""
    refused = ErrorCode.unsupported_compression_type
    return [(topic, [PartitionRead(p.partition, refused, records=_NULL_RECORDS, aborted=())
                     if _zstd(ctx.replicas.log_config(topic, p.partition)) else p for p in parts])
            for topic, parts in topics]


def _zstd(config) -> bool:
    return config is not None and config.compression_type == "zstd"


def _unknown(named) -> list:
    """UNKNOWN_TOPIC_ID answers for a v13+ request's ids that name no topic (keyed by the id)."""
    return [(topic_id, [PartitionRead(p, ErrorCode.unknown_topic_id) for p in parts])
            for topic_id, parts in unknown_ids(named)]


def _params(ctx: BrokerContext, header, req, replica_id: int, refused: dict) -> FetchParams:
    """The request as the replica manager reads it: a consumer's v11+ fetch may be served by a
    follower here, and names its rack to the replica selector when one is configured."""
    any_replica = replica_id < 0 and header.api_version >= FROM_ANY_REPLICA
    rack = (getattr(req, "rack_id", "") or "") if any_replica and ctx.config.replica_selector_class else ""
    return FetchParams(replica_id, int(req.max_wait.total_seconds() * 1000), req.min_bytes, req.max_bytes,
                       _isolation(req), any_replica, rack, refused)


def _isolation(req) -> IsolationLevel:
    committed = getattr(req, "isolation_level", 0) == IsolationLevel.READ_COMMITTED
    return IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _denied_topics(ctx: BrokerContext, replica_id: int, wanted) -> dict[str, ErrorCode]:
    """Topics answered TOPIC_AUTHORIZATION_FAILED, as Kafka: all of them for a follower without
    CLUSTER_ACTION on the cluster, else those a consumer may not READ."""
    names = frozenset(topic for topic, _ in wanted)
    if replica_id >= 0:
        denied = frozenset() if allowed(ctx, Operation.CLUSTER_ACTION, ResourceType.CLUSTER) else names
    else:
        denied = frozenset(n for n in names if not allowed(ctx, Operation.READ, ResourceType.TOPIC, n))
    return dict.fromkeys(denied, ErrorCode.topic_authorization_failed)


def _count_bytes_out(ctx: BrokerContext, topics: list) -> None:
    stats = ctx.topic_stats
    for topic, parts in topics:
        if ctx.replicas.topic(topic) is not None:  # no series for names a client made up
            stats.fetched(topic, sum(p.records.size for p in parts if p.records is not None))


def _encode(ctx: BrokerContext, header, results, throttle_ms: int = 0, *, session_id: int = 0,
            error: ErrorCode = ErrorCode.none, ids: dict | None = None):
    """The response: ``results`` ((topic name, or an unknown id, [PartitionRead])) named by
    name, or by id from v13 (``ids``: name -> id), with KIP-951's leader hints from v16."""
    version = header.api_version
    if version < TOPIC_IDS_FROM_VERSION:   # by name and without hints (v16): as read (a follower's v12)
        return encode_fetch_response(version, header.correlation_id, results, throttle_ms, session_id, error)
    hints = Hints(ctx) if version >= FETCH_FROM else None
    keyed = []
    for name, parts in results:
        key = ids.get(name) if version >= TOPIC_IDS_FROM_VERSION and isinstance(name, str) else name
        if hints is not None and isinstance(name, str):
            for part in parts:
                if part.error in FETCH_ERRORS:
                    hints.note(key, name, part.partition)
        keyed.append((key, parts))
    return encode_fetch_response(version, header.correlation_id, keyed, throttle_ms, session_id, error, hints)
