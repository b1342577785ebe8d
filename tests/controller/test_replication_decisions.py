"""Replication decisions over built snapshots: AlterPartition validation, controlled shutdown,
elections on request, the automatic rebalance, reassignment steps. No ZooKeeper."""

from __future__ import annotations

import pytest

from odradek.cluster.model import BrokerInfo, PartitionState
from odradek.controller import reassignment, replication
from odradek.controller.replication import AlterPartition
from odradek.controller.store import StoreSnapshot, TopicRecord
from odradek.errors import ErrorCode, KafkaError

CE = 3  # controller epoch


def broker(i: int) -> BrokerInfo:
    return BrokerInfo(i, "127.0.0.1", 9090 + i, f"http://127.0.0.1:{8000 + i}", None, 100 + i)


def record(name: str, states: list[tuple], version: int = 5, configs=None, adding=None,
           removing=None) -> TopicRecord:
    """``states``: (replicas, leader, leader_epoch, isr) per partition 0, 1, ..."""
    built = {p: PartitionState(p, tuple(r), l, e, tuple(i), 1, version)
             for p, (r, l, e, i) in enumerate(states)}
    return TopicRecord(name, f"id-{name}", {p: s.replicas for p, s in built.items()}, 0, built,
                       {p: version for p in built}, configs or {}, 0, adding or {}, removing or {})


def snapshot(brokers=(1, 2, 3), topics=(), deleting=(), requests=None) -> StoreSnapshot:
    return StoreSnapshot("cid", None, tuple(broker(i) for i in brokers), {t.name: t for t in topics},
                         frozenset(deleting), requests or {}, 0 if requests else -1)


def code(fn, *args, **kw) -> ErrorCode:
    with pytest.raises(KafkaError) as e:
        fn(*args, **kw)
    return e.value.code


# --- AlterPartition ----------------------------------------------------------------------------
def alter(snap, shutting_down=(), **kw):
    req = dict(broker_id=1, broker_epoch=101, topic="t", partition=0, leader_epoch=4,
               partition_epoch=5, isr=(1, 2))
    req.update(kw)
    return replication.alter_partition(snap, AlterPartition(**req), shutting_down, CE)


RF3 = snapshot(topics=[record("t", [((1, 2, 3), 1, 4, (1, 2, 3))])])


def test_alter_partition_shrinks_and_expands_without_touching_the_leader_epoch():
    change = alter(RF3, isr=(1, 3))
    assert (change.topic, change.version) == ("t", 5)
    assert (change.state.leader, change.state.leader_epoch, change.state.isr) == (1, 4, (1, 3))
    assert change.state.controller_epoch == CE
    shrunk = snapshot(topics=[record("t", [((1, 2, 3), 1, 4, (1,))])])
    assert alter(shrunk, isr=(1, 2, 3)).state.isr == (1, 2, 3)
    assert alter(RF3, broker_epoch=-1, isr=(1,)).state.isr == (1,)  # -1: epoch not checked


def test_alter_partition_retry_of_a_done_change_answers_the_current_state():
    current = alter(RF3, isr=(1, 2, 3), partition_epoch=2)
    assert current == RF3.topics["t"].states[0]


@pytest.mark.parametrize("kw, expected", [
    (dict(broker_epoch=99), ErrorCode.stale_broker_epoch),
    (dict(broker_id=7, broker_epoch=107), ErrorCode.stale_broker_epoch),  # not registered
    (dict(topic="nope"), ErrorCode.unknown_topic_or_partition),
    (dict(partition=1), ErrorCode.unknown_topic_or_partition),
    (dict(broker_id=2, broker_epoch=102), ErrorCode.not_leader_or_follower),
    (dict(leader_epoch=3), ErrorCode.fenced_leader_epoch),
    (dict(partition_epoch=4), ErrorCode.invalid_update_version),
    (dict(isr=(2, 3)), ErrorCode.ineligible_replica),  # without the leader
    (dict(isr=(1, 4)), ErrorCode.ineligible_replica),  # not a replica
    (dict(isr=()), ErrorCode.invalid_request),
    (dict(isr=(1, 1)), ErrorCode.invalid_request),
])
def test_alter_partition_errors(kw, expected):
    assert code(alter, RF3, **kw) == expected


def test_alter_partition_refuses_dead_and_shutting_down_replicas_but_not_the_leader():
    dead = snapshot(brokers=(1, 2), topics=[record("t", [((1, 2, 3), 1, 4, (1, 2))])])
    assert code(alter, dead, isr=(1, 2, 3)) == ErrorCode.ineligible_replica
    assert code(alter, RF3, shutting_down={3}, isr=(1, 3)) == ErrorCode.ineligible_replica
    assert alter(RF3, shutting_down={1}, isr=(1, 3)).state.isr == (1, 3)


def test_alter_partition_on_a_topic_being_deleted_is_unknown():
    snap = snapshot(topics=[record("t", [((1, 2, 3), 1, 4, (1, 2, 3))])], deleting=["t"])
    assert code(alter, snap, isr=(1, 2)) == ErrorCode.unknown_topic_or_partition


# --- controlled shutdown -----------------------------------------------------------------------
def test_controlled_shutdown_moves_leaders_and_drops_the_broker_from_isrs():
    snap = snapshot(topics=[record("t", [
        ((1, 2, 3), 1, 4, (1, 2, 3)),  # led by 1: to 2
        ((2, 1, 3), 2, 0, (2, 1, 3)),  # follower: leaves the ISR
        ((1, 3, 2), 1, 0, (1,)),  # no other ISR member: stays
        ((1,), 1, 0, (1,)),  # one replica: left alone
        ((3, 1), 3, 0, (3,)),  # follower out of the ISR: nothing to do
        ((1, 3, 2), 1, 2, (1, 2, 3)),  # 3 is shutting down too: 2, ISR without 3
    ])])
    changes = replication.shutdown_changes(snap, 1, {3: 103}, CE)
    got = {c.state.partition: (c.state.leader, c.state.leader_epoch, c.state.isr) for c in changes}
    assert got == {0: (2, 5, (2,)), 1: (2, 0, (2, 3)), 5: (2, 3, (2,))}
    assert all(c.version == 5 and "shutting down" in c.reason for c in changes)
    assert replication.remaining_leaderships(snap, 1) == [("t", 0), ("t", 2), ("t", 5)]


def test_controlled_shutdown_without_a_second_isr_member_moves_nothing():
    snap = snapshot(topics=[record("t", [((1, 2), 1, 0, (1,))])])
    assert replication.shutdown_changes(snap, 1, {}, CE) == []
    assert replication.remaining_leaderships(snap, 1) == [("t", 0)]


# --- elections on request ------------------------------------------------------------------------
def test_preferred_election():
    snap = snapshot(brokers=(1, 2, 3), topics=[record("t", [
        ((1, 2), 2, 4, (1, 2)),  # 1 back in the ISR: elected
        ((1, 2), 1, 0, (1, 2)),  # already
        ((3, 2), 2, 1, (2,)),  # preferred not in ISR
        ((4, 2), 2, 1, (2, 4)),  # preferred not live
    ])])
    results, changes = replication.elect_leaders(snap, replication.PREFERRED,
                                                 [("t", 0), ("t", 1), ("t", 2), ("t", 3), ("u", 0)], {}, CE)
    assert [(r.partition, r.error) for r in results] == [
        (0, ErrorCode.none), (1, ErrorCode.election_not_needed), (2, ErrorCode.preferred_leader_not_available),
        (3, ErrorCode.preferred_leader_not_available), (0, ErrorCode.unknown_topic_or_partition)]
    [change] = changes
    assert (change.state.leader, change.state.leader_epoch, change.state.isr) == (1, 5, (1, 2))
    assert results[0].to_json() == {"topic": "t", "partition": 0, "error_code": 0, "error": "NONE",
                                    "message": None}
    # all partitions: ELECTION_NOT_NEEDED is left out
    results, _ = replication.elect_leaders(snap, replication.PREFERRED, None, {}, CE)
    assert [r.partition for r in results] == [0, 2, 3]
    # a preferred replica shutting down is not available
    results, changes = replication.elect_leaders(snap, replication.PREFERRED, [("t", 0)], {1: 101}, CE)
    assert results[0].error == ErrorCode.preferred_leader_not_available and not changes


def test_unclean_election():
    snap = snapshot(brokers=(2, 3), topics=[record("t", [
        ((1, 2, 3), -1, 4, (1,)),  # offline, 2 and 3 live but out of sync: 2, ISR [2]
        ((1, 2), 2, 1, (2,)),  # has a leader
        ((1, 4), -1, 2, (1,)),  # nobody live
        ((1, 3), -1, 2, (1, 3)),  # a live ISR member exists: clean choice
    ])])
    results, changes = replication.elect_leaders(snap, replication.UNCLEAN, [("t", p) for p in range(4)], {}, CE)
    assert [r.error for r in results] == [ErrorCode.none, ErrorCode.election_not_needed,
                                          ErrorCode.eligible_leaders_not_available, ErrorCode.none]
    assert [(c.state.partition, c.state.leader, c.state.leader_epoch, c.state.isr) for c in changes] == [
        (0, 2, 5, (2,)), (3, 3, 3, (3,))]
    assert code(replication.elect_leaders, snap, 2, None, {}, CE) == ErrorCode.invalid_request


def test_rebalance_candidates_follow_the_imbalance_percentage():
    # broker 1 is preferred for 4 partitions and leads 3 of them: 25% imbalance
    parts = [((1, 2), 1, 0, (1, 2))] * 3 + [((1, 2), 2, 1, (1, 2))] + [((2, 1), 2, 0, (2, 1))]
    snap = snapshot(topics=[record("t", parts)])
    assert replication.rebalance_candidates(snap, {}, 10) == [("t", 3)]
    assert replication.rebalance_candidates(snap, {}, 25) == []
    assert replication.rebalance_candidates(snap, {1: 101}, 10) == []  # shutting down
    reassigning = snapshot(topics=[record("t", parts, adding={3: (3,)})])
    assert replication.rebalance_candidates(reassigning, {}, 10) == []


def test_under_replicated_and_offline_counts():
    snap = snapshot(topics=[record("t", [((1, 2), 1, 0, (1, 2)), ((1, 2), 1, 0, (1,)), ((1, 2), -1, 3, (1,))]),
                            record("gone", [((1, 2), 1, 0, (1,))])], deleting=["gone"])
    assert replication.under_replicated(snap) == 2
    assert replication.offline(snap) == 1


# --- reassignment --------------------------------------------------------------------------------
ELIGIBLE = frozenset({1, 2, 3, 4})


def test_reassignment_start_adds_target_replicas_first():
    r = record("t", [((1, 2), 1, 0, (1, 2))])
    move = reassignment.start(r, 0, (3, 4), ELIGIBLE, CE)
    assert (move.replicas, move.adding, move.removing, move.done) == ((3, 4, 1, 2), (3, 4), (1, 2), False)
    assert (move.state.replicas, move.state.leader, move.state.leader_epoch, move.state.isr) \
        == ((3, 4, 1, 2), 1, 0, (1, 2))
    assert move.version == 5


def test_reassignment_completes_when_every_target_replica_is_in_the_isr():
    running = record("t", [((3, 4, 1, 2), 1, 0, (1, 2, 3))], adding={0: (3, 4)}, removing={0: (1, 2)})
    assert (running.target(0), running.origin(0)) == ((3, 4), (1, 2))
    assert reassignment.complete(running, 0, ELIGIBLE, CE) is None  # 4 is not in the ISR yet
    caught_up = record("t", [((3, 4, 1, 2), 1, 0, (1, 2, 4, 3))], adding={0: (3, 4)}, removing={0: (1, 2)})
    move = reassignment.complete(caught_up, 0, ELIGIBLE, CE)
    assert (move.replicas, move.adding, move.removing, move.done) == ((3, 4), (), (), True)
    assert (move.state.leader, move.state.leader_epoch, move.state.isr) == (3, 1, (4, 3))
    # the leader stays when it is in the target
    stay = record("t", [((2, 3, 1), 2, 7, (1, 2, 3))], adding={0: (3,)}, removing={0: (1,)})
    move = reassignment.complete(stay, 0, ELIGIBLE, CE)
    assert (move.state.leader, move.state.leader_epoch, move.state.isr) == (2, 7, (2, 3))
    # no eligible target replica to lead: wait
    assert reassignment.complete(caught_up, 0, frozenset({1, 2}), CE) is None


def test_reassignment_within_the_isr_completes_at_once_and_reorders_complete_at_once():
    r = record("t", [((1, 2, 3), 1, 0, (1, 2, 3))])
    move = reassignment.start(r, 0, (2, 3), ELIGIBLE, CE)
    assert (move.replicas, move.done, move.state.leader, move.state.leader_epoch, move.state.isr) \
        == ((2, 3), True, 2, 1, (2, 3))
    move = reassignment.start(r, 0, (3, 1, 2), ELIGIBLE, CE)
    assert (move.replicas, move.done, move.state.leader, move.state.isr) == ((3, 1, 2), True, 1, (1, 2, 3))
    assert reassignment.start(r, 0, (1, 2, 3), ELIGIBLE, CE) is None


def test_reassignment_replacement_keeps_the_origin_and_cancel_reverts():
    running = record("t", [((3, 1, 2), 1, 0, (1, 2, 3))], adding={0: (3,)}, removing={0: (2,)})
    assert reassignment.start(running, 0, (3, 1), ELIGIBLE, CE) is None  # the same target
    move = reassignment.start(running, 0, (4, 1), ELIGIBLE, CE)
    assert (move.replicas, move.adding, move.removing) == ((4, 1, 2), (4,), (2,))
    assert move.state.isr == (1, 2)  # 3 is no longer wanted: out of the ISR too
    back = reassignment.cancel(running, 0, ELIGIBLE, CE)
    assert (back.replicas, back.adding, back.removing, back.done) == ((1, 2), (), (), True)
    assert (back.state.leader, back.state.leader_epoch, back.state.isr) == (1, 0, (1, 2))
    # an adding replica that had become leader hands over to the origin on cancel
    led = record("t", [((3, 1, 2), 3, 4, (3, 2))], adding={0: (3,)}, removing={0: (2,)})
    back = reassignment.cancel(led, 0, ELIGIBLE, CE)
    assert (back.state.leader, back.state.leader_epoch, back.state.isr) == (2, 5, (2,))


def test_reassignment_targets_are_validated():
    snap = snapshot(topics=[record("t", [((1, 2), 1, 0, (1, 2))])], deleting=[])
    for target, expected in (((), ErrorCode.invalid_replica_assignment),
                             ((1, 1), ErrorCode.invalid_replica_assignment),
                             ((1, 9), ErrorCode.invalid_replica_assignment)):
        assert code(reassignment.validate_target, snap, "t", 0, target) == expected
    assert code(reassignment.validate_target, snap, "t", 3, (1,)) == ErrorCode.unknown_topic_or_partition
    assert code(reassignment.validate_target, snap, "u", 0, (1,)) == ErrorCode.unknown_topic_or_partition


def test_plan_request_and_pending_work():
    r = record("t", [((1, 2), 1, 0, (1, 2)), ((1, 2), 1, 0, (1, 2))])
    snap = snapshot(topics=[r])
    results, moves, requests = reassignment.plan_request(
        snap, [("t", 0, (2, 3)), ("t", 1, None), ("t", 1, (1, 2)), ("t", 5, (1,))], ELIGIBLE, CE)
    assert [(t, p, e.code if e else None) for t, p, e in results] == [
        ("t", 0, None), ("t", 1, ErrorCode.no_reassignment_in_progress), ("t", 1, None),
        ("t", 5, ErrorCode.unknown_topic_or_partition)]
    assert [(m.partition, m.replicas, m.done) for m in moves] == [(0, (2, 3, 1), False)]
    assert requests == {("t", 0): (2, 3)}
    [w] = reassignment.writes(snap, moves)
    assert (w.assignment, w.adding, w.removing) == ({0: (2, 3, 1), 1: (1, 2)}, {0: (3,)}, {0: (1,)})
    assert w.states[0][1] == 5

    # an entry someone else wrote into /admin/reassign_partitions is started; a bad one dropped
    written = snapshot(topics=[r], requests={("t", 1): (2, 3), ("t", 0): (1, 7), ("x", 0): (1,)})
    moves, requests, notes = reassignment.pending_work(written, ELIGIBLE, CE)
    assert [(m.partition, m.replicas) for m in moves] == [(1, (2, 3, 1))]
    assert requests == {("t", 1): (2, 3)} and len(notes) == 2
    # a running reassignment whose target caught up completes and leaves the znode
    done = record("t", [((2, 3, 1), 1, 0, (1, 2, 3))], adding={0: (3,)}, removing={0: (1,)})
    moves, requests, _ = reassignment.pending_work(snapshot(topics=[done], requests={("t", 0): (2, 3)}),
                                                   ELIGIBLE, CE)
    assert [(m.replicas, m.state.leader, m.done) for m in moves] == [((2, 3), 2, True)] and requests == {}


# --- log directory failure events ---------------------------------------------------------------
def test_a_broker_whose_log_dir_went_offline_loses_its_leaderships_and_isr_places():
    from dataclasses import replace

    from odradek.controller import decisions
    base = snapshot(topics=[record("t", [((1, 2, 3), 3, 4, (1, 2, 3)), ((1, 2, 3), 1, 4, (1, 2, 3))])])
    snap = replace(base, log_dir_events={"log_dir_event_0000000001": (3, 103)})  # 103: broker 3's epoch
    assert snap.offline_dir_ids == {3}
    changes = {c.state.partition: c.state for c in decisions.partition_changes(snap, CE)}
    assert changes[0].leader in (1, 2) and 3 not in changes[0].isr and changes[0].leader_epoch == 5
    assert changes[1].leader == 1 and changes[1].isr == (1, 2)
    assert decisions.handled_log_dir_events(snap) == []
    restarted = replace(snap, brokers=tuple(replace(b, epoch=200) if b.id == 3 else b for b in snap.brokers))
    assert restarted.offline_dir_ids == frozenset()
    assert decisions.handled_log_dir_events(restarted) == ["log_dir_event_0000000001"]
    assert decisions.partition_changes(replace(base, log_dir_events={}), CE) == []


# --- the cluster-wide dynamic default of unclean.leader.election.enable --------------------------
def test_unclean_follows_the_cluster_default_under_the_topics_own_override():
    """Kafka's controller: the topic's override, else /config/brokers/<default>, else false."""
    import dataclasses

    from odradek.controller import decisions
    offline = [((1, 2), -1, 4, (1,))]  # broker 1 (the whole ISR) is gone, 2 is out of sync
    topics = (record("plain", offline), record("off", offline, configs={"unclean.leader.election.enable": "false"}))
    snap = snapshot(brokers=(2, 3), topics=topics)
    assert decisions.partition_changes(snap, CE) == []
    on = dataclasses.replace(snap, cluster_defaults={"unclean.leader.election.enable": "true"})
    changes = decisions.partition_changes(on, CE)
    assert [(c.topic, c.state.leader, c.state.isr) for c in changes] == [("plain", 2, (2,))]


# --- maintenance mode -------------------------------------------------------------------------------
def test_maintenance_moves_leaderships_keeps_isrs_and_every_election_passes_the_broker_over():
    import dataclasses
    from odradek.controller import decisions
    snap = snapshot(topics=[record("t", [((1, 2, 3), 1, 4, (1, 2, 3)), ((1, 2), 1, 4, (1,)),
                                         ((2, 1, 3), 2, 4, (2, 1, 3)), ((1,), 1, 4, (1,))])])
    changes = replication.maintenance_moves(snap, 1, (), CE)
    # t-0 moves to 2 with its ISR kept; t-1 has no other ISR member, t-3 a single replica: kept
    assert [(c.state.partition, c.state.leader, c.state.leader_epoch, c.state.isr) for c in changes] == [
        (0, 2, 5, (1, 2, 3))]
    held = dataclasses.replace(decisions.with_changes(snap, changes), maintenance=frozenset({1}))
    assert replication.remaining_leaderships(held, 1) == [("t", 1)]
    # a preferred election does not bring it back, nor does the rebalance pick it
    results, moved = replication.elect_leaders(held, replication.PREFERRED, [("t", 0)], (), CE)
    assert results[0].error == ErrorCode.preferred_leader_not_available and not moved
    assert replication.rebalance_candidates(held, (), 0) == []
    # broker 2 dies: t-0 goes to 3 (not 1, in maintenance), t-2 too; 1 leads only as a last resort
    gone = dataclasses.replace(held, brokers=(broker(1), broker(3)))
    elected = {c.state.partition: c.state.leader for c in decisions.partition_changes(gone, CE)}
    assert elected == {0: 3, 2: 3}
    alone = dataclasses.replace(held, brokers=(broker(1),))
    assert {c.state.partition: c.state.leader for c in decisions.partition_changes(alone, CE)} == {0: 1, 2: 1}
    # a new partition's first leader is its first replica not in maintenance
    from odradek.controller import placement
    assert placement.initial_state(0, (1, 2, 3), CE, held.maintenance).leader == 2
    assert placement.initial_state(0, (1,), CE, held.maintenance).leader == 1
    # out of maintenance, the partitions it prefers are elected back to it
    assert replication.preferred_of(held, 1) == [("t", 0)]
    assert replication.preferred_of(snap, 1) == []
