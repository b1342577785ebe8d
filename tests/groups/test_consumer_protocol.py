"""KIP-848 consumer groups (``odradek.broker.group.consumer``) and the server-side assignors,
without processes: epochs, revoke-before-assign reconciliation, fencing, Kafka's errors."""

from __future__ import annotations

import pytest

from odradek.broker.group.assignors import range_, uniform
from odradek.broker.group.consumer import ConsumerGroups, ConsumerSettings, Heartbeat
from odradek.errors import ErrorCode as E
from odradek.errors import KafkaError
from tests.groups.fakes import FakeClock

TOPICS = {"t": ("tid", 6)}


def lookup(names):
    return {n: TOPICS[n] for n in names if n in TOPICS}


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def groups(clock):
    return ConsumerGroups(ConsumerSettings(session_timeout_ms=6000, heartbeat_interval_ms=500), clock.call_later)


def join(groups, member, **kw):
    return groups.heartbeat(Heartbeat("g", member, 0, rebalance_timeout_ms=30000, subscribed=("t",),
                                      owned=frozenset(), **kw), lookup)


def beat(groups, member, epoch, owned):
    return groups.heartbeat(Heartbeat("g", member, epoch, owned=frozenset(owned)), lookup)


def settle(groups, owned: dict[str, set]) -> dict[str, set]:
    """Heartbeat every member with what it owns until nothing changes; no partition is ever
    owned by two members in between."""
    for _ in range(10):
        changed = False
        for m in list(groups.groups["g"].members.values()):
            r = beat(groups, m.member_id, m.epoch, owned[m.member_id])
            if r.assignment is not None and set(r.assignment) != owned[m.member_id]:
                owned[m.member_id], changed = set(r.assignment), True
            held = [tp for ps in owned.values() for tp in ps]
            assert len(held) == len(set(held)), f"a partition owned twice: {owned}"
        if not changed:
            return owned
    raise AssertionError("did not settle")


def test_first_member_gets_everything_and_a_second_gets_half_after_revocation(groups):
    r = join(groups, "a")
    assert r.member_epoch == 1 and len(r.assignment) == 6
    owned = {"a": set(r.assignment)}
    r = join(groups, "b")
    assert r.member_epoch == 2 and r.assignment == frozenset()  # all still held by a: unreleased
    owned["b"] = set()
    # a is asked to revoke first, keeping its epoch
    r = beat(groups, "a", 1, owned["a"])
    assert r.member_epoch == 1 and len(r.assignment) == 3
    owned = settle(groups, {"a": set(r.assignment), "b": set()})
    assert sorted(map(len, owned.values())) == [3, 3]
    assert groups.groups["g"].state == "Stable"
    assert {m.epoch for m in groups.groups["g"].members.values()} == {2}


def test_leave_and_session_timeout_move_partitions(groups, clock):
    import asyncio
    owned = {"a": set(join(groups, "a").assignment)}
    for m in ("b", "c"):
        join(groups, m)
        owned[m] = set()
    owned = settle(groups, owned)
    assert sorted(map(len, owned.values())) == [2, 2, 2]
    r = groups.heartbeat(Heartbeat("g", "c", -1), lookup)
    assert r.member_epoch == -1
    del owned["c"]
    owned = settle(groups, owned)
    assert sorted(map(len, owned.values())) == [3, 3]
    # b stops heartbeating: fenced after the session timeout, a gets everything
    for _ in range(5):
        asyncio.run(clock.advance(2))
        beat(groups, "a", groups.groups["g"].members["a"].epoch, owned["a"])
    assert set(groups.groups["g"].members) == {"a"}
    owned = settle(groups, {"a": owned["a"]})
    assert len(owned["a"]) == 6
    with pytest.raises(KafkaError) as e:
        beat(groups, "b", 3, ())
    assert e.value.code == E.unknown_member_id


def test_epoch_checks_and_request_validation(groups):
    join(groups, "a")
    with pytest.raises(KafkaError) as e:
        beat(groups, "a", 7, ())
    assert e.value.code == E.fenced_member_epoch
    for bad in (Heartbeat("g", "x", 0, subscribed=("t",), owned=frozenset()),       # no rebalance timeout
                Heartbeat("g", "x", 0, rebalance_timeout_ms=1, owned=frozenset()),  # no subscription
                Heartbeat("g", "", 0, rebalance_timeout_ms=1, subscribed=("t",), owned=frozenset()),
                Heartbeat("g", "x", -3)):
        with pytest.raises(KafkaError) as e:
            groups.heartbeat(bad, lookup)
        assert e.value.code == E.invalid_request
    with pytest.raises(KafkaError) as e:
        join(groups, "x", assignor="sticky")
    assert e.value.code == E.unsupported_assignor
    assert groups.offset_error("g", "a", 1) == E.none
    assert groups.offset_error("g", "a", 0) == E.stale_member_epoch
    assert groups.offset_error("g", "zz", 1) == E.unknown_member_id
    assert groups.offset_error("other", "a", 1) is None


def test_static_member_leaving_temporarily_is_replaced_and_a_duplicate_is_refused(groups):
    r = join(groups, "a", instance_id="i1")
    groups.heartbeat(Heartbeat("g", "a", -2, instance_id="i1"), lookup)
    r2 = join(groups, "a2", instance_id="i1")
    assert r2.member_epoch == r.member_epoch and r2.assignment == r.assignment
    with pytest.raises(KafkaError) as e:
        join(groups, "a3", instance_id="i1")
    assert e.value.code == E.unreleased_instance_id


def test_uniform_is_sticky_and_balanced_and_range_is_contiguous():
    subs = {m: frozenset({"t"}) for m in ("a", "b", "c")}
    first = uniform(subs, TOPICS, {})
    assert sorted(map(len, first.values())) == [2, 2, 2]
    grown = uniform({**subs, "d": frozenset({"t"})}, TOPICS, first)
    assert sorted(map(len, grown.values())) == [1, 1, 2, 2]
    assert all(grown[m] <= first[m] for m in subs)  # nobody gets a partition it must take from another
    assert range_(subs, TOPICS, {})["a"] == {("tid", 0), ("tid", 1)}


def test_consumer_group_commits_check_member_and_epoch_and_delete_waits_for_members(tmp_path):
    """OffsetCommit of a KIP-848 group: Kafka's STALE_MEMBER_EPOCH / UNKNOWN_MEMBER_ID; the
    admin's epoch -1 without a member is accepted; DeleteGroups: NON_EMPTY_GROUP while members."""
    import asyncio

    from odradek.broker.group.records import OffsetValue
    from tests.groups.test_offsets import Replicas, _coordinator

    async def scenario():
        c = await _coordinator(Replicas(tmp_path))
        r = c.consumer.heartbeat(Heartbeat("g", "a", 0, rebalance_timeout_ms=1000, subscribed=("t",),
                                           owned=frozenset()), lookup)
        offsets = {("t", 0): OffsetValue(5, -1, "", 1)}
        assert await c.commit("g", r.member_epoch, "a", None, offsets) == {("t", 0): E.none}
        assert await c.commit("g", r.member_epoch + 1, "a", None, offsets) == {("t", 0): E.stale_member_epoch}
        assert await c.commit("g", 1, "zz", None, offsets) == {("t", 0): E.unknown_member_id}
        assert await c.commit("g", -1, "", None, offsets) == {("t", 0): E.none}
        assert c.fetch("g", [("t", 0)])[("t", 0)].offset == 5
        assert await c.delete_group("g") == E.non_empty_group
        c.consumer.heartbeat(Heartbeat("g", "a", -1), lookup)
        assert await c.delete_group("g") == E.none
        c.close()
    asyncio.run(scenario())


def test_a_member_keeping_revoked_partitions_past_its_rebalance_timeout_is_fenced(groups, clock):
    import asyncio
    owned = {"a": set(join(groups, "a").assignment)}
    join(groups, "b", assignor="range")
    assert groups.groups["g"].assignor == "range"
    r = beat(groups, "a", 1, owned["a"])  # told to revoke 3, keeps reporting all 6
    assert len(r.assignment) == 3
    while "a" in groups.groups["g"].members:  # a heartbeats on, still holding what it must give up
        assert beat(groups, "a", 1, owned["a"]).member_epoch == 1
        beat(groups, "b", 2, ())  # b waits for them
        asyncio.run(clock.advance(2))
    assert 30 <= clock.now <= 32  # its rebalance timeout, not its session, fenced it
    assert len(settle(groups, {"b": set()})["b"]) == 6


def test_partitions_being_revoked_stay_when_a_newer_target_gives_them_back(groups, clock):
    import asyncio
    owned = {"a": set(join(groups, "a").assignment)}
    join(groups, "b")
    assert len(beat(groups, "a", 1, owned["a"]).assignment) == 3  # revoking 3
    asyncio.run(clock.advance(4))
    assert beat(groups, "a", 1, owned["a"]).member_epoch == 1  # still holding them
    asyncio.run(clock.advance(3))  # b never heartbeats again: fenced, the target gives a all six back
    r = beat(groups, "a", 1, owned["a"])
    assert len(r.assignment) == 6 and groups.groups["g"].state == "Stable"
