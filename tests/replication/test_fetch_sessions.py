"""Fetch sessions (KIP-227) without a broker: the cache's room and eviction rules (Kafka's
FetchSessionCache) and a follower's session handler (Kafka's FetchSessionHandler)."""

from __future__ import annotations

from types import SimpleNamespace

from odradek.broker.replication.fetch_session import EVICTION_MS, FetchSessionCache
from odradek.broker.replication.session_handler import FetchSessionHandler
from odradek.errors import ErrorCode


def _request(session_id: int, epoch: int, partitions: int, topic: str = "t"):
    parts = tuple(SimpleNamespace(partition=i, fetch_offset=0, partition_max_bytes=1 << 20)
                  for i in range(partitions))
    return SimpleNamespace(session_id=session_id, session_epoch=epoch,
                           topics=(SimpleNamespace(topic=topic, partitions=parts),) if parts else (),
                           forgotten_topics_data=())


def _open(cache: FetchSessionCache, partitions: int, now: int, follower: bool = False) -> int:
    context = cache.context(12, _request(0, 0, partitions), follower, now)
    return context.respond([], now)[0]


def _use(cache: FetchSessionCache, sid: int, now: int) -> None:
    """An incremental fetch listing nothing (the session's last use moves to ``now``)."""
    assert cache.context(12, _request(sid, cache.sessions[sid].epoch, 0), False, now).error == ErrorCode.none


def test_a_full_cache_takes_a_newcomer_only_in_place_of_a_stale_smaller_or_consumer_session():
    cache = FetchSessionCache(max_entries=2)
    small, big = _open(cache, 1, 0), _open(cache, 5, 0)
    assert small and big
    assert _open(cache, 3, 10) == 0, "young consumer sessions are evictable by followers only"
    follower = _open(cache, 1, 20, follower=True)  # privileged: the smallest consumer's session makes room
    assert follower and set(cache.sessions) == {big, follower} and cache.evictions == 1
    assert _open(cache, 100, 30) == 0, "a consumer cannot evict a follower's young session"
    old = EVICTION_MS + 10  # both created over EVICTION_MS ago, used just now: evictable by anyone, by size
    _use(cache, big, old)
    _use(cache, follower, old)
    assert _open(cache, 3, old + 1) == 0, "not larger than the smallest evictable (the consumer's 5)"
    larger = _open(cache, 6, old + 2)
    assert larger and big not in cache.sessions
    stale = _open(cache, 1, old + 2 + EVICTION_MS + 1)  # idle past the eviction time: the LRU goes
    assert stale and follower not in cache.sessions and cache.evictions == 3


def test_session_errors_and_an_emptied_session():
    cache = FetchSessionCache()
    sid = _open(cache, 2, 0)
    assert cache.context(12, _request(sid, 2, 0), False, 1).error == ErrorCode.invalid_fetch_session_epoch
    assert cache.context(12, _request(sid + 1, 1, 0), False, 1).error == ErrorCode.fetch_session_id_not_found
    assert cache.context(13, _request(sid, 1, 0), False, 1).error == ErrorCode.fetch_session_topic_id_error
    req = _request(sid, 1, 0)
    req.forgotten_topics_data = (SimpleNamespace(topic="t", partitions=(0, 1)),)
    assert cache.context(12, req, False, 1).respond([], 1)[0] == 0 and sid not in cache.sessions


def test_the_follower_lists_only_changes_and_resets_on_session_errors():
    h = FetchSessionHandler()
    a, b = ("t", 0), ("t", 1)
    assert h.build({a: (0, 0, 1), b: (5, 0, 1)}) == ({a: (0, 0, 1), b: (5, 0, 1)}, []) and h.epoch == 0
    assert h.handle_response(ErrorCode.none, 42) and (h.session_id, h.epoch) == (42, 1)
    assert h.build({a: (3, 0, 1)}) == ({a: (3, 0, 1)}, [b])
    assert h.handle_response(ErrorCode.none, 42) and h.epoch == 2
    assert h.build({a: (3, 0, 1)}) == ({}, [])  # idle: nothing listed
    assert not h.handle_response(ErrorCode.invalid_fetch_session_epoch, 0)
    assert (h.session_id, h.epoch) == (42, 0), "a full request closing session 42"
    assert h.build({a: (3, 0, 1)}) == ({a: (3, 0, 1)}, [])
    assert not h.handle_response(ErrorCode.fetch_session_id_not_found, 0) and (h.session_id, h.epoch) == (0, 0)
    h.build({a: (3, 0, 1)})
    assert h.handle_response(ErrorCode.none, 0) and h.epoch == 0, "no room: full requests go on"


def test_the_follower_compares_only_what_changed_between_walks():
    h = FetchSessionHandler()
    a, b = ("t", 0), ("t", 1)
    wanted = {a: (0, 0, 1), b: (5, 0, 1)}
    h.build(wanted, set())
    assert h.handle_response(ErrorCode.none, 42)
    wanted[a] = (3, 0, 1)  # the fetcher's own append; it keeps updating the same dict
    assert h.build(wanted, {a}) == ({a: (3, 0, 1)}, [])
    assert h.handle_response(ErrorCode.none, 42)
    assert h.build(wanted, set()) == ({}, []), "an idle fetch compares nothing"
    assert h.handle_response(ErrorCode.none, 42)
    del wanted[b]
    assert h.build(wanted, None) == ({}, [b]), "after a walk everything is compared"


def test_the_follower_keeps_what_each_answered_delta_sent():
    """Between walks only the changed partitions are taken from ``wanted`` (not a copy of all of
    them per fetch); what the leader holds is still exactly what was sent and answered."""
    h = FetchSessionHandler()
    a, b, c = ("t", 0), ("t", 1), ("t", 2)
    wanted = {a: (0, 0, 1), b: (0, 0, 1), c: (0, 0, 1)}
    h.build(wanted, None)
    assert h.handle_response(ErrorCode.none, 42)
    wanted[a] = (1, 0, 1)
    assert h.build(wanted, {a}) == ({a: (1, 0, 1)}, [])
    wanted[a] = (2, 0, 1)  # moved again while the request was in flight: not what the leader holds
    assert h.handle_response(ErrorCode.none, 42)
    wanted[b] = (4, 0, 1)
    assert h.build(wanted, {b}) == ({b: (4, 0, 1)}, [])
    assert not h.handle_response(ErrorCode.invalid_fetch_session_epoch, 0)  # not held: the session resets
    assert h.build(wanted, {b}) == (wanted, []), "a full request after the reset"
    assert h.handle_response(ErrorCode.none, 43)
    wanted[c] = (7, 0, 1)
    assert h.build(wanted, {c}) == ({c: (7, 0, 1)}, []) and h.handle_response(ErrorCode.none, 43)
    assert h.build(wanted, None) == ({}, []), "held equals wanted after the deltas"
    h.build(wanted, {a})
    assert h.handle_response(ErrorCode.none, 43)
    wanted[a] = (9, 0, 1)
    assert h.build(wanted, None) == ({a: (9, 0, 1)}, [])


def test_a_followers_idle_fetch_does_not_list_its_session_but_a_consumers_does():
    """A follower's partial fetch reads and records only what may have news: the list of every
    partition of its session (O(partitions) per fetch) is never built; a consumer's is."""
    cache = FetchSessionCache()
    follower, consumer = _open(cache, 50, 0, follower=True), _open(cache, 50, 0)
    for sid, privileged in ((follower, True), (consumer, False)):
        cache.sessions[sid].generation = 7  # read fully once since the last snapshot
        context = cache.context(12, _request(sid, cache.sessions[sid].epoch, 0), privileged, 1)
        context.begin(7)
        read, recorded = context.to_read(), context.to_record()
        assert ("t", 3) in context.interest()
        assert context.respond([], 1) == (sid, [])
        if privileged:
            assert context.partial and read == [] and recorded == [] and context._wanted is None
        else:
            assert not context.partial and [p.partition for p in read[0][1]] == list(range(50))
            assert context.wanted is read
