"""Fetch sessions on the serving side (KIP-227, Kafka's FetchSession.scala).

A fetcher that asks for a session (a full request: session id 0 or an old one, epoch 0) is
given one if the cache has room; from then on it sends *incremental* requests (its session id,
the epoch it was given, then one more each time) listing only the partitions whose fetch
position changed and the ones to forget, and the answer lists only the partitions with
something new: records, a changed high watermark or log start offset, an error, a preferred
read replica, a diverging epoch. An idle follower's fetch thus carries no partition either way.

What a fetch in a session reads and records: Kafka reads every partition of the session on
each fetch, and so does a consumer's session here; at thousands of partitions that was the
event loop's whole time for followers, so a follower's session reads only the partitions that may have news: those listed in the request, those whose log
got an append or a new high watermark since they were last answered or whose records did not
fit in the last answer (``dirty``, from the broker's fetch wake-ups and the answers), those last answered with an error (``sticky``), and every one after a
metadata snapshot (``generation``). A follower's position is recorded for the listed ones and
those it is not in the ISR of (``joining``, so that expansion is retried on each fetch); one
not listed has not moved, and the leader counts it caught up at the session's last use while
its position is the log end (``Partition.lagging``). Log start offsets moved by DeleteRecords
notify their partition; by retention, they are sent with the partition's next news.

Kafka's rules, kept here:
- ``session_epoch`` -1 (FINAL) with id 0 is sessionless; a full request with a session id
  closes that session first; epoch -1 never creates one.
- An incremental request naming an unknown session is answered FETCH_SESSION_ID_NOT_FOUND,
  one with the wrong epoch INVALID_FETCH_SESSION_EPOCH, one whose version does not match the
  session's use of topic ids (v13+) FETCH_SESSION_TOPIC_ID_ERROR: top-level errors, no partitions.
- An incremental request that leaves the session empty closes it (answered sessionless).
- Topic ids (v13+, KIP-516): the handler resolves the request's ids to names first
  (``handlers.fetch_ids``); a session keeps the id it was given for each topic (``ids``), so a
  topic deleted and recreated under its name is not taken for the old one: a partition added
  under a new id replaces the topic's cached partitions (Kafka keys sessions by topic id), a
  partition forgotten under an id the session no longer holds is ignored, and the handler
  answers INCONSISTENT_TOPIC_ID while the session's id is not the topic's.
- Room: ``max.incremental.fetch.session.cache.slots`` sessions. When full, a new one may take
  the place of the least recently used session if that was idle over ``EVICTION_MS``; else of
  the smallest evictable one (followers' sessions are *privileged*: a consumer's session is
  evictable by a follower's, any session older than ``EVICTION_MS`` by anyone) if the new one
  is larger (more partitions) or more privileged. Otherwise it gets no session (id 0) and
  keeps sending full requests.

Event-loop thread only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from odradek.broker.replication.read import PartitionRead
from odradek.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
EVICTION_MS = 120_000           # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS (not a setting there)
TOPIC_IDS_FROM_VERSION = 13     # Fetch v13+ names topics by id


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: what its fetcher asked last (the attributes of a request's
    FetchPartition, so the handler reads either alike) and what it was last told."""
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    log_start_offset: int = -1
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    high_watermark: int = -1        # as last sent; -1 after an error, so the partition is sent again
    sent_log_start: int = -1

    def update(self, p) -> None:
        self.fetch_offset = p.fetch_offset
        self.partition_max_bytes = p.partition_max_bytes
        self.log_start_offset = getattr(p, "log_start_offset", -1)
        self.current_leader_epoch = getattr(p, "current_leader_epoch", -1)
        self.last_fetched_epoch = getattr(p, "last_fetched_epoch", -1)

    def must_respond(self, part: PartitionRead) -> bool:
        """Whether the read ``part`` is news for the fetcher; remembers what is sent (Kafka's
        CachedPartition.maybeUpdateResponseData)."""
        news = (part.records is not None or part.preferred_replica >= 0 or part.diverging is not None
                or part.high_watermark != self.high_watermark or part.log_start_offset != self.sent_log_start)
        self.high_watermark = part.high_watermark
        self.sent_log_start = part.log_start_offset
        if part.error != ErrorCode.none:
            self.high_watermark = -1
            return True
        return news


def _cached(p) -> CachedPartition:
    c = CachedPartition(p.partition, 0, 0)
    c.update(p)
    return c


@dataclass(eq=False, slots=True)
class FetchSession:
    id: int
    privileged: bool                       # a follower's
    topics: dict[str, dict[int, CachedPartition]]
    uses_topic_ids: bool
    created_ms: int
    last_used_ms: int
    epoch: int = 1
    by_all: bool = False                   # evictable by any new session (as of its last use)
    by_privileged: bool = False            # evictable by a follower's new session
    closed: bool = False
    generation: int = -1                   # the metadata generation of its last full read
    dirty: set = field(default_factory=set)    # (topic, partition): appended to or HW moved since answered
    sticky: set = field(default_factory=set)   # last answered with an error: read on every fetch
    joining: set = field(default_factory=set)  # a follower's partitions it is not in the ISR of
    ids: dict = field(default_factory=dict)    # v13+: topic name -> the id its fetcher named it by

    @property
    def size(self) -> int:
        return sum(len(ps) for ps in self.topics.values())

    def holds(self, topic: str, partition: int) -> bool:
        return not self.closed and partition in self.topics.get(topic, ())

    def update(self, topics, forgotten) -> None:
        for t in topics:
            if self.uses_topic_ids and self.ids.get(t.topic, t.topic_id) != t.topic_id:
                self._forget(t.topic, tuple(self.topics.get(t.topic, ())))  # replaced: a recreated topic
            if self.uses_topic_ids:
                self.ids[t.topic] = t.topic_id
            mine = self.topics.setdefault(t.topic, {})
            for p in t.partitions:
                cached = mine.get(p.partition)
                if cached is None:
                    mine[p.partition] = _cached(p)
                else:
                    cached.update(p)
        for t in forgotten:
            if not self.uses_topic_ids or self.ids.get(t.topic) == t.topic_id:
                self._forget(t.topic, t.partitions)

    def _forget(self, topic: str, partitions) -> None:
        mine = self.topics.get(topic)
        if mine is not None:
            for index in partitions:
                mine.pop(index, None)
                for keys in (self.dirty, self.sticky, self.joining):
                    keys.discard((topic, index))
            if not mine:
                del self.topics[topic]
                self.ids.pop(topic, None)


class _Holds:
    __slots__ = ("session",)

    def __init__(self, session: FetchSession) -> None:
        self.session = session

    def __contains__(self, tp) -> bool:
        return tp[1] in self.session.topics.get(tp[0], ())


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1


class FetchContext:
    """One request's view: which partitions to fetch (``wanted``: (topic, [partition]) with the
    request's or the session's positions), and what to answer (``respond``)."""

    __slots__ = ("cache", "_wanted", "listed", "partial", "error", "session", "create", "privileged",
                 "uses_topic_ids", "_ids")

    def __init__(self, cache: "FetchSessionCache", wanted, *, error: ErrorCode = ErrorCode.none,
                 session: FetchSession | None = None, create: bool = False, privileged: bool = False,
                 uses_topic_ids: bool = False, listed: set | frozenset = frozenset(), ids: dict | None = None) -> None:
        self.cache = cache
        self._wanted = wanted           # None: the session's partitions, listed when first asked for
        self.listed = listed            # incremental: the partitions the request named
        self.partial = False            # incremental: read only what may have news (see module doc)
        self.error = error
        self.session = session          # incremental
        self.create = create            # full: try to create a session once answered
        self.privileged = privileged
        self.uses_topic_ids = uses_topic_ids
        self._ids = ids or {}           # full v13+: the request's topic ids by name

    @property
    def ids(self) -> dict:
        """v13+: topic name -> the id the fetcher knows it by (the session's, or the request's)."""
        return self.session.ids if self.session is not None else self._ids

    @property
    def wanted(self) -> list:
        """Built only when used: a follower's partial fetch never needs it, and listing a
        session of 3,333 partitions on every fetch was an idle leader's largest cost."""
        if self._wanted is None:
            self._wanted = [(t, list(ps.values())) for t, ps in self.session.topics.items()]
        return self._wanted

    def begin(self, generation: int) -> None:
        """Read everything if the metadata changed since the session's last full read."""
        session = self.session
        if session is not None:
            self.partial = session.privileged and session.generation == generation  # consumers: all, as Kafka
            session.generation = generation

    def _only(self, keys) -> list:
        parts_of = self.session.topics
        picked: dict[str, list] = {}
        for topic, index in keys:
            cached = parts_of.get(topic, {}).get(index)
            if cached is not None:
                picked.setdefault(topic, []).append(cached)
        return list(picked.items())

    def to_record(self) -> list:
        """A follower's partitions whose position to record."""
        if not self.partial:
            return self.wanted
        joining = self.session.joining
        return self._only(self.listed | joining if joining else self.listed)

    def to_read(self) -> list:
        """The partitions to read now (called again after each wake-up)."""
        if not self.partial:
            return self.wanted
        session = self.session
        keys = self.listed
        if session.dirty or session.sticky:   # a caught-up follower's next fetch: neither (no union built)
            keys = keys | session.dirty | session.sticky
        return self._only(keys)

    def interest(self):
        """What wakes this fetch: its partitions (a session's, looked up rather than copied)."""
        if self.session is None:
            return {(topic, p.partition) for topic, parts in self.wanted for p in parts}
        return _Holds(self.session)

    def recorded(self, topic: str, partition: int, in_isr: bool) -> None:
        if self.session is not None:
            (self.session.joining.discard if in_isr else self.session.joining.add)((topic, partition))

    def respond(self, results, now_ms: int) -> tuple[int, list]:
        """(session id, results to send) once the fetch is done."""
        if self.session is not None:
            session = self.session
            parts_of, dirty, sticky, none = session.topics, session.dirty, session.sticky, ErrorCode.none
            sent = []
            for topic, parts in results:
                cached = parts_of.get(topic, {})
                news = []
                for p in parts:  # read now: no news left unless records did not fit
                    key = (topic, p.partition)
                    (dirty.add if p.unsent else dirty.discard)(key)
                    (sticky.discard if p.error == none else sticky.add)(key)
                    known = cached.get(p.partition)
                    if known is None or known.must_respond(p):
                        news.append(p)
                if news:
                    sent.append((topic, news))
            return session.id, sent
        if not self.create:
            return INVALID_SESSION_ID, results
        topics: dict[str, dict[int, CachedPartition]] = {}
        for topic, parts in self.wanted:
            topics[topic] = {p.partition: _cached(p) for p in parts}
        answered = {(topic, p.partition): p for topic, parts in results for p in parts}
        for topic, parts in topics.items():
            for index, cached in parts.items():
                part = answered.get((topic, index))
                if part is not None:
                    cached.must_respond(part)
        return self.cache.maybe_create(now_ms, self.privileged, topics, self.uses_topic_ids, self._ids), results

    def throttled(self) -> int:
        """The session id of an answer throttled empty (a full request creates no session then)."""
        return self.session.id if self.session is not None else INVALID_SESSION_ID


def _wanted(req) -> list:
    """A request's own partitions, (topic, [FetchPartition]): a sessionless read's positions."""
    return [(t.topic, list(t.partitions)) for t in req.topics]


class FetchSessionCache:
    def __init__(self, max_entries: int = 1000, eviction_ms: int = EVICTION_MS) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0  # sessions evicted (what Kafka's IncrementalFetchSessionEvictionsPerSec rates)

    def context(self, version: int, req, privileged: bool, now_ms: int) -> FetchContext:
        session_id, epoch = getattr(req, "session_id", 0), getattr(req, "session_epoch", FINAL_EPOCH)
        uses_ids = version >= TOPIC_IDS_FROM_VERSION
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id in self.sessions:
                self._remove(self.sessions[session_id])  # a full request closes the session it names
            ids = {t.topic: t.topic_id for t in req.topics} if uses_ids else None
            return FetchContext(self, _wanted(req), create=epoch == INITIAL_EPOCH, privileged=privileged,
                                uses_topic_ids=uses_ids, ids=ids)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext(self, [], error=ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return FetchContext(self, [], error=ErrorCode.invalid_fetch_session_epoch)
        if session.uses_topic_ids != uses_ids:
            return FetchContext(self, [], error=ErrorCode.fetch_session_topic_id_error)
        session.update(req.topics, getattr(req, "forgotten_topics_data", ()) or ())
        if not session.topics:
            self._remove(session)
            return FetchContext(self, _wanted(req), ids={t.topic: t.topic_id for t in req.topics} if uses_ids else None)
        self._touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        return FetchContext(self, None, session=session, uses_topic_ids=uses_ids,
                            listed={(t.topic, p.partition) for t in req.topics for p in t.partitions})

    def ids_of(self, session_id: int) -> dict:
        """The topic ids (name -> id) of session ``session_id`` ({} if none): an incremental
        request may forget a topic by an id that no longer names any topic."""
        session = self.sessions.get(session_id)
        return session.ids if session is not None else {}

    def notify(self, tp: tuple[str, int] | None) -> None:
        """``tp`` was appended to or its HW moved (None: anything may have changed)."""
        for session in self.sessions.values():
            if tp is None:
                session.generation = -1
            elif session.holds(*tp):
                session.dirty.add(tp)

    def maybe_create(self, now_ms: int, privileged: bool, topics: dict[str, dict[int, CachedPartition]],
                     uses_topic_ids: bool, ids: dict | None = None) -> int:
        """A new session's id, or 0 when there is no room for it."""
        size = sum(len(ps) for ps in topics.values())
        if len(self.sessions) >= self.max_entries and not self._evict_for(privileged, size, now_ms):
            return INVALID_SESSION_ID
        session_id = self._new_id()
        session = FetchSession(session_id, privileged, topics, uses_topic_ids, now_ms, now_ms, ids=dict(ids or {}))
        self.sessions[session_id] = session
        self._touch(session, now_ms)
        return session_id

    def _touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms
        old = now_ms - session.created_ms > self.eviction_ms
        session.by_all = old
        session.by_privileged = old or not session.privileged

    def _evict_for(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Kafka's FetchSessionCache.tryEvict: a stale session first, else the smallest
        evictable one if the newcomer ranks above it (privileged, then size)."""
        if not self.sessions:
            return False
        lru = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - lru.last_used_ms > self.eviction_ms:
            self._evict(lru)
            return True
        evictable = [s for s in self.sessions.values() if (s.by_privileged if privileged else s.by_all)]
        if not evictable:
            return False
        victim = min(evictable, key=lambda s: (s.privileged, s.size, s.id))
        if (privileged, size, 0) < (victim.privileged, victim.size, victim.id):
            return False
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        self._remove(session)
        self.evictions += 1

    def _remove(self, session: FetchSession) -> None:
        del self.sessions[session.id]
        session.closed = True

    def _new_id(self) -> int:
        while True:
            session_id = random.randint(1, 0x7FFFFFFF)
            if session_id not in self.sessions:
                return session_id
