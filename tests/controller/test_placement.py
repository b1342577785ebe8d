"""Placement and leader election: pure rules, no ZooKeeper."""

from __future__ import annotations

import pytest

from odradek.cluster.model import PartitionState
from odradek.controller import placement
from odradek.errors import ErrorCode, KafkaError


def test_replica_j_of_partition_i_goes_to_broker_i_plus_j_mod_n():
    assignment = placement.assign_replicas(6, 2, [30, 10, 20])
    assert assignment == {0: (10, 20), 1: (20, 30), 2: (30, 10), 3: (10, 20), 4: (20, 30), 5: (30, 10)}


def test_start_offset_shifts_the_list_without_breaking_the_spread():
    assignment = placement.assign_replicas(3, 1, [1, 2, 3], start=2)
    assert assignment == {0: (3,), 1: (1,), 2: (2,)}
    assert placement.start_offset("orders", 3) == placement.start_offset("orders", 3) < 3


def test_replication_factor_above_live_brokers():
    with pytest.raises(KafkaError) as e:
        placement.assign_replicas(1, 2, [1])
    assert e.value.code == ErrorCode.invalid_replication_factor
    assert "larger than available brokers: 1" in e.value.message


def test_partition_increase_continues_the_rotation():
    brokers = [1, 2, 3]
    existing = placement.assign_replicas(2, 1, brokers, start=1)  # p0 -> 2, p1 -> 3
    start = placement.increase_start(existing, brokers)
    added = placement.assign_replicas(5, 1, brokers, start, first_partition=2)
    assert added == {2: (1,), 3: (2,), 4: (3,)}
    assert {**existing, **added} == placement.assign_replicas(5, 1, brokers, start=1)


def test_leader_is_first_live_replica_in_isr():
    assert placement.elect_leader((1, 2, 3), (2, 3), {1, 2, 3})[0] == 2
    assert placement.elect_leader((1, 2, 3), (1, 2, 3), {3})[0] == 3
    assert placement.elect_leader((1, 2), (1,), {2})[0] == -1
    assert placement.elect_leader((1, 2), (1,), {2}, unclean=True)[0] == 2


def state(leader: int, epoch: int, isr: tuple[int, ...], replicas=(1,)) -> PartitionState:
    return PartitionState(0, replicas, leader, epoch, isr, 1)


def test_rf1_partition_goes_offline_and_comes_back_with_bumped_epochs():
    online = state(1, 0, (1,))
    offline, why = placement.reconcile_partition(online, live=set(), controller_epoch=2)
    assert (offline.leader, offline.leader_epoch, offline.isr) == (-1, 1, (1,))
    assert "offline" in why
    assert placement.reconcile_partition(offline, live=set(), controller_epoch=2) == (None, "still offline")
    back, why = placement.reconcile_partition(offline, live={1}, controller_epoch=3)
    assert (back.leader, back.leader_epoch, back.isr, back.controller_epoch) == (1, 2, (1,), 3)
    assert placement.reconcile_partition(back, live={1}, controller_epoch=3)[0] is None


def test_dead_leader_replaced_from_isr_and_dead_followers_leave_isr():
    s = state(1, 4, (1, 2, 3), replicas=(1, 2, 3))
    new, _ = placement.reconcile_partition(s, live={2, 3}, controller_epoch=1)
    assert (new.leader, new.leader_epoch, new.isr) == (2, 5, (2, 3))
    shrunk, why = placement.reconcile_partition(s, live={1, 2}, controller_epoch=1)
    assert (shrunk.leader, shrunk.leader_epoch, shrunk.isr) == (1, 4, (1, 2))  # ISR-only: epoch kept
    assert "shrink" in why


def test_election_follows_assignment_order_not_isr_order():
    s = state(1, 0, (3, 2, 1), replicas=(1, 2, 3))
    new, _ = placement.reconcile_partition(s, live={2, 3}, controller_epoch=1)
    assert (new.leader, new.isr) == (2, (3, 2))


def test_offline_keeps_only_the_last_leader_in_the_isr():
    s = state(1, 2, (1, 2, 3), replicas=(1, 2, 3))
    offline, why = placement.reconcile_partition(s, live=set(), controller_epoch=1)
    assert (offline.leader, offline.leader_epoch, offline.isr) == (-1, 3, (1,))
    # broker 2 comes back first: it was not the last leader, the partition stays offline
    assert placement.reconcile_partition(offline, live={2}, controller_epoch=1)[0] is None
    back, _ = placement.reconcile_partition(offline, live={1, 2}, controller_epoch=1)
    assert (back.leader, back.leader_epoch, back.isr) == (1, 4, (1,))


def test_shutting_down_brokers_are_not_elected_nor_kept_in_the_new_isr():
    s = state(1, 0, (1, 2, 3), replicas=(1, 2, 3))
    new, _ = placement.reconcile_partition(s, live={2, 3}, controller_epoch=1, shutting_down={2})
    assert (new.leader, new.leader_epoch, new.isr) == (3, 1, (3,))
    offline, _ = placement.reconcile_partition(state(1, 0, (1, 2), replicas=(1, 2)), live={2},
                                               controller_epoch=1, shutting_down={2})
    assert (offline.leader, offline.isr) == (-1, (1,))
    # a live leader that is shutting down keeps its place: controlled shutdown moves it
    assert placement.reconcile_partition(s, live={1, 2, 3}, controller_epoch=1, shutting_down={1})[0] is None


def test_unclean_election_takes_first_live_replica_and_resets_isr():
    s = state(-1, 3, (1,), replicas=(1, 2))
    assert placement.reconcile_partition(s, live={2}, controller_epoch=1)[0] is None
    new, why = placement.reconcile_partition(s, live={2}, controller_epoch=1, unclean=True)
    assert (new.leader, new.leader_epoch, new.isr) == (2, 4, (2,))
    assert "UNCLEAN" in why


def test_initial_state_leads_with_the_preferred_replica_and_all_replicas_in_sync():
    s = placement.initial_state(3, (2, 1), controller_epoch=7)
    assert s == PartitionState(3, (2, 1), 2, 0, (2, 1), 7)


# -- racks (Kafka's ZooKeeper-era getRackAlternatedBrokerList, then the same rotation) -------------
RACKS = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}


def test_the_broker_list_alternates_by_rack():
    assert placement.arranged_brokers(range(1, 7), RACKS) == [1, 3, 5, 2, 4, 6]
    assert placement.arranged_brokers([1, 2, 3, 4], {1: "a", 2: "a", 3: "a", 4: "b"}) == [1, 4, 2, 3]
    assert placement.arranged_brokers([3, 1, 2], {}) == [1, 2, 3]  # no racks: the sorted ids


def test_six_brokers_on_three_racks_spread_replicas_and_leaders():
    for topic in ("orders", "payments", "__consumer_offsets"):
        assignment = placement.assign_replicas(12, 3, RACKS, placement.start_offset(topic, 6), racks=RACKS)
        assert all(len({RACKS[b] for b in replicas}) == 3 for replicas in assignment.values()), assignment
        leaders = [replicas[0] for replicas in assignment.values()]
        assert sorted(leaders.count(b) for b in RACKS) == [2] * 6


def test_a_partition_increase_continues_the_rack_aware_rotation():
    existing = placement.assign_replicas(3, 2, RACKS, start=4, racks=RACKS)
    start = placement.increase_start(existing, RACKS, RACKS)
    added = placement.assign_replicas(8, 2, RACKS, start, first_partition=3, racks=RACKS)
    assert {**existing, **added} == placement.assign_replicas(8, 2, RACKS, start=4, racks=RACKS)


def test_only_some_brokers_with_a_rack_is_refused_as_kafka():
    with pytest.raises(KafkaError, match="Not all brokers have rack information"):
        placement.assign_replicas(1, 2, [1, 2, 3], racks={1: "a", 2: "b", 3: None})
