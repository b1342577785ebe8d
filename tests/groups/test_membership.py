"""The group state machine without sockets: JoinGroup/SyncGroup/Heartbeat/LeaveGroup, the
initial rebalance delay, rebalance and session timeouts, generations, static membership and
protocol selection, driven by a fake clock."""

from __future__ import annotations

from odradek.broker.group.model import GroupState
from odradek.errors import ErrorCode as E
from tests.groups.fakes import PROTOCOLS, join, membership, run, settle, sync


async def _member_id(m, **kw) -> str:
    """A v4+ first join: MEMBER_ID_REQUIRED hands out the id to rejoin with."""
    r = await join(m, **kw)
    assert r.error == E.member_id_required and r.member_id
    return r.member_id


async def _stable_group(m, clock, n: int, **kw):
    """``n`` members joined, synced with assignments 'a-<member>': (ids, leader, generation)."""
    ids = [await _member_id(m, client=f"c{i}", **kw) for i in range(n)]
    tasks = [join(m, mid, client=f"c{i}", **kw) for i, mid in enumerate(ids)]
    await clock.advance(0.2)  # members that arrive during the initial delay extend it once
    results = [t.result() for t in tasks]
    leader = results[0].leader
    gen = results[0].generation
    syncs = [sync(m, mid, gen, {x: f"a-{x}".encode() for x in ids} if mid == leader else None) for mid in ids]
    await settle()
    assert all(s.result().error == E.none for s in syncs)
    return ids, leader, gen


def test_member_id_required_round_trip_then_first_generation():
    async def scenario():
        m, clock, _ = membership(delay_ms=100)
        member_id = await _member_id(m)
        assert member_id.startswith("c-")
        task = join(m, member_id)
        await clock.advance(0.05)
        assert not task.done(), "the first rebalance waits group.initial.rebalance.delay.ms"
        await clock.advance(0.05)
        r = task.result()
        assert (r.error, r.generation, r.leader, r.member_id) == (E.none, 1, member_id, member_id)
        assert r.protocol_name == "range" and r.members == ((member_id, None, b"r-meta"),)
        assert m.groups["g"].state == GroupState.COMPLETING_REBALANCE
    run(scenario())


def test_join_v3_gets_a_member_id_without_the_round_trip():
    async def scenario():
        m, clock, _ = membership(delay_ms=0)
        task = join(m, version=3)
        await clock.advance(0)
        r = task.result()
        assert r.error == E.none and r.generation == 1 and r.member_id
    run(scenario())


def test_initial_delay_extends_while_members_keep_arriving():
    async def scenario():
        m, clock, _ = membership(delay_ms=100)
        a = join(m, await _member_id(m, client="a"), client="a", rebalance_ms=1000)
        await clock.advance(0.05)
        b = join(m, await _member_id(m, client="b"), client="b", rebalance_ms=1000)
        await clock.advance(0.1)  # t=0.15: the first delay expired at 0.1 with a new member: extended
        assert not a.done() and not b.done()
        await clock.advance(0.05)  # t=0.2
        assert a.result().generation == b.result().generation == 1
        assert {a.result().leader} == {b.result().leader}
    run(scenario())


def test_three_members_join_sync_and_share_the_leaders_assignment():
    async def scenario():
        m, clock, store = membership()
        ids = [await _member_id(m, client=f"c{i}") for i in range(3)]
        tasks = [join(m, mid, client=f"c{i}") for i, mid in enumerate(ids)]
        await clock.advance(0.1)
        assert not any(t.done() for t in tasks), "members arrived during the delay: it is extended"
        await clock.advance(0.1)
        results = [t.result() for t in tasks]
        leader = results[0].leader
        assert all(r.generation == 1 and r.leader == leader for r in results)
        for r in results:
            assert len(r.members) == (3 if r.member_id == leader else 0)
        followers = [sync(m, mid, 1) for mid in ids if mid != leader]
        await settle()
        assert not any(f.done() for f in followers), "followers wait for the leader's assignment"
        lead = sync(m, leader, 1, {mid: mid.encode() for mid in ids})
        await settle()
        for mid, t in zip([x for x in ids if x != leader] + [leader], followers + [lead]):
            assert t.result().error == E.none and t.result().assignment == mid.encode()
        assert m.groups["g"].state == GroupState.STABLE
        assert store.calls == [("g", 1, {mid: mid.encode() for mid in ids})]
        assert all(m.heartbeat("g", 1, mid, None) == E.none for mid in ids)
    run(scenario())


def test_a_new_member_rebalances_a_stable_group_and_old_generations_are_refused():
    async def scenario():
        m, clock, _ = membership()
        ids, leader, gen = await _stable_group(m, clock, 2)
        newcomer = join(m, await _member_id(m, client="new"), client="new")
        await settle()
        assert m.groups["g"].state == GroupState.PREPARING_REBALANCE
        assert [m.heartbeat("g", gen, mid, None) for mid in ids] == [E.rebalance_in_progress] * 2
        rejoins = [join(m, mid) for mid in ids]
        await settle()  # every member rejoined: completes without waiting for the timeout
        results = [t.result() for t in [newcomer, *rejoins]]
        assert {r.generation for r in results} == {gen + 1}
        assert m.heartbeat("g", gen, ids[0], None) == E.illegal_generation
        assert (await sync(m, ids[0], gen)).error == E.illegal_generation
    run(scenario())


def test_members_that_do_not_rejoin_within_the_rebalance_timeout_are_removed():
    async def scenario():
        m, clock, _ = membership()
        ids, leader, gen = await _stable_group(m, clock, 3, rebalance_ms=500, session_ms=10_000)
        first = join(m, ids[0], rebalance_ms=500, session_ms=10_000)
        second = join(m, ids[1], rebalance_ms=500, session_ms=10_000)
        await clock.advance(0.4)
        assert not first.done()
        await clock.advance(0.1)
        assert first.result().generation == second.result().generation == gen + 1
        assert set(m.groups["g"].members) == {ids[0], ids[1]}
        assert m.heartbeat("g", gen + 1, ids[2], None) == E.unknown_member_id
    run(scenario())


def test_session_timeout_expires_a_silent_member_and_rebalances():
    async def scenario():
        m, clock, _ = membership()
        ids, leader, gen = await _stable_group(m, clock, 2, session_ms=1000)
        for _ in range(4):  # ids[0] heartbeats every 0.3 s, ids[1] stays silent
            await clock.advance(0.3)
            m.heartbeat("g", gen, ids[0], None)
        assert ids[1] not in m.groups["g"].members
        assert m.heartbeat("g", gen, ids[0], None) == E.rebalance_in_progress
        r = join(m, ids[0], session_ms=1000)
        await settle()
        assert r.result().generation == gen + 1 and r.result().leader == ids[0]
    run(scenario())


def test_leave_group_rebalances_and_reports_unknown_members():
    async def scenario():
        m, clock, _ = membership()
        ids, leader, gen = await _stable_group(m, clock, 3)
        assert m.leave("g", [(ids[1], None), ("nobody", None)]) == [E.none, E.unknown_member_id]
        assert m.groups["g"].state == GroupState.PREPARING_REBALANCE
        rejoins = [join(m, ids[0]), join(m, ids[2])]
        await settle()
        assert {t.result().generation for t in rejoins} == {gen + 1}
        assert m.leave("g", [(ids[0], None), (ids[2], None)]) == [E.none, E.none]
        group = m.groups["g"]  # nobody left to wait for: the rebalance completes into Empty
        assert group.state == GroupState.EMPTY and not group.members and group.generation == gen + 2
    run(scenario())


def test_static_member_rejoining_unchanged_keeps_the_generation_and_fences_its_old_id():
    async def scenario():
        m, clock, store = membership()
        a = join(m, instance="inst-a", client="a")  # static members skip MEMBER_ID_REQUIRED
        b = join(m, instance="inst-b", client="b")
        await clock.advance(0.2)
        ra, rb = a.result(), b.result()
        assert ra.error == rb.error == E.none
        leader = ra.leader
        lead_id, other_id = (ra.member_id, rb.member_id) if leader == ra.member_id else (rb.member_id, ra.member_id)
        syncs = [sync(m, lead_id, 1, {ra.member_id: b"A", rb.member_id: b"B"}, instance=None), sync(m, other_id, 1)]
        await settle()
        assert all(s.result().error == E.none for s in syncs)
        again = await join(m, "", instance="inst-b", client="b")  # a restart of b: unknown member id
        assert again.error == E.none and again.generation == 1 and again.member_id != rb.member_id
        assert m.groups["g"].state == GroupState.STABLE, "no rebalance for an unchanged static member"
        assert m.heartbeat("g", 1, rb.member_id, "inst-b") == E.fenced_instance_id
        assert m.heartbeat("g", 1, again.member_id, "inst-b") == E.none
        assert (await sync(m, again.member_id, 1, instance="inst-b")).assignment == b"B"
        assert m.leave("g", [("", "inst-b")]) == [E.none]
        assert m.groups["g"].state == GroupState.PREPARING_REBALANCE
    run(scenario())


def test_a_static_leader_rejoining_a_stable_group_skips_the_assignment_from_joingroup_v9():
    """KIP-814: v9 tells the rejoining static leader it leads, with the members and SkipAssignment;
    before v9 it is answered the old leader id (not itself) and no members: no assignment to run."""
    async def scenario():
        m, clock, _ = membership()
        joins = [join(m, instance=f"inst-{c}", client=c) for c in "ab"]
        await clock.advance(0.2)
        first = [j.result() for j in joins]
        leader_id = first[0].leader
        syncs = [sync(m, r.member_id, 1, {x.member_id: b"x" for x in first} if r.member_id == leader_id else None)
                 for r in first]
        await settle()
        assert all(s.result().error == E.none for s in syncs)
        instance = next(f"inst-{c}" for c, r in zip("ab", first) if r.member_id == leader_id)
        old = await join(m, instance=instance, version=8)
        assert (old.error, old.leader, old.members, old.skip_assignment) == (E.none, leader_id, (), False)
        new = await join(m, instance=instance, version=9)
        assert new.error == E.none and new.leader == new.member_id and new.skip_assignment
        assert {mid for mid, _, _ in new.members} == {new.member_id, *(r.member_id for r in first if r.member_id != leader_id)}
        assert m.groups["g"].state == GroupState.STABLE and m.groups["g"].generation == 1
    run(scenario())


def test_protocol_is_chosen_by_vote_among_protocols_all_members_support():
    async def scenario():
        m, clock, _ = membership()
        prefs = [(("roundrobin", b"1"), ("range", b"1")), (("roundrobin", b"2"), ("range", b"2")),
                 (("range", b"3"), ("roundrobin", b"3"), ("sticky", b"3"))]
        tasks = [join(m, await _member_id(m, protocols=p), protocols=p) for p in prefs]
        await clock.advance(0.2)
        assert {t.result().protocol_name for t in tasks} == {"roundrobin"}
        r = await join(m, "", protocols=(("sticky", b""),))
        assert r.error == E.inconsistent_group_protocol
        r = await join(m, "", protocols=PROTOCOLS, protocol_type="connect")
        assert r.error == E.inconsistent_group_protocol
    run(scenario())


def test_errors_for_bad_session_timeouts_unknown_members_and_generations():
    async def scenario():
        m, clock, _ = membership(min_session_ms=100)
        assert (await join(m, session_ms=50)).error == E.invalid_session_timeout
        assert (await join(m, "who")).error == E.unknown_member_id
        assert m.heartbeat("nope", 1, "x", None) == E.unknown_member_id
        ids, leader, gen = await _stable_group(m, clock, 1)
        assert m.heartbeat("g", gen + 5, ids[0], None) == E.illegal_generation
        assert (await sync(m, "ghost", gen)).error == E.unknown_member_id
    run(scenario())


def test_a_failed_store_of_the_assignment_restarts_the_rebalance():
    async def scenario():
        from odradek.errors import KafkaError
        m, clock, store = membership()
        ids = [await _member_id(m, client=f"c{i}") for i in range(2)]
        tasks = [join(m, mid) for mid in ids]
        await clock.advance(0.2)
        leader = tasks[0].result().leader
        other = next(i for i in ids if i != leader)
        follower = sync(m, other, 1)
        store.fail_with = KafkaError(E.not_coordinator)
        assert (await sync(m, leader, 1, {mid: b"x" for mid in ids})).error == E.not_coordinator
        await settle()
        assert follower.result().error == E.not_coordinator
        assert m.groups["g"].state == GroupState.PREPARING_REBALANCE
    run(scenario())
