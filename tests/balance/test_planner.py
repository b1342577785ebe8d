"""The balancer's planner on built cluster models: each mode's result is within one replica and
one leader of the mean, the goals above replica count hold, and the fewest bytes move."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from odradek.balance import Broker, ClusterModel, Partition, PlanError, change_replication_factor, plan


def _cluster(brokers: int, partitions: int, rf: int = 3, racks: str = "", sizes=None, extra: int = 0) -> ClusterModel:
    """``partitions`` placed round-robin on brokers 1..``brokers``, plus ``extra`` empty brokers."""
    names = [r for r in racks.split(",") if r]
    total = brokers + extra
    bs = tuple(Broker(i, names[(i - 1) % len(names)] if names else None) for i in range(1, total + 1))
    ps = tuple(Partition("t", p, tuple((p + i) % brokers + 1 for i in range(rf)), (p % brokers) + 1,
                         size=(sizes[p] if sizes else 1000))
               for p in range(partitions))
    return ClusterModel(bs, ps)


def _after(model: ClusterModel, proposal) -> dict[tuple[str, int], tuple[int, ...]]:
    out = {p.key: p.replicas for p in model.partitions}
    out.update({(m.topic, m.partition): m.after for m in proposal.moves})
    return out


def _within_one(counts: dict[int, int], brokers) -> bool:
    values = [counts.get(b, 0) for b in brokers]
    mean = sum(values) / len(values)
    return all(abs(v - mean) < 1 for v in values)


def _check_balanced(model, proposal, brokers) -> None:
    after = _after(model, proposal)
    replicas = Counter(itertools.chain.from_iterable(after.values()))
    leaders = Counter(rs[0] for rs in after.values())
    assert _within_one(replicas, brokers), replicas
    assert _within_one(leaders, brokers), leaders
    for key, rs in after.items():
        assert len(set(rs)) == len(rs) == len(dict((p.key, p.replicas) for p in model.partitions)[key])
    loads = proposal.after
    assert {b: loads[b].replicas for b in brokers} == {b: replicas.get(b, 0) for b in brokers}


def test_add_brokers_moves_replicas_only_onto_the_new_ones():
    model = _cluster(3, 24, extra=2)
    proposal = plan(model, "add-brokers", [4, 5])
    _check_balanced(model, proposal, [1, 2, 3, 4, 5])
    for m in proposal.moves:
        assert set(m.adding) <= {4, 5}
    assert proposal.replica_moves == 28   # 14 + 14 of 72 replicas: brokers 1-3 keep 14 or 15
    assert proposal.bytes_to_move == proposal.replica_moves * 1000


def test_add_brokers_takes_the_small_partitions_and_followers_first():
    sizes = [10 ** 6 if p % 2 else 10 for p in range(24)]
    model = _cluster(3, 24, sizes=sizes, extra=1)
    proposal = plan(model, "add-brokers", [4])
    moved = [m for m in proposal.moves if m.adding]
    assert len(moved) == 18   # 72 / 4
    # broker 4 can take one replica of each partition: every small one, and 6 large ones
    assert sum(m.size == 10 for m in moved) == 12
    flags = [m.moves_leader for m in proposal.moves]
    assert flags == sorted(flags), "moves that take a partition's leader away come last"
    assert [m.size for m in proposal.moves if not m.moves_leader] == sorted(
        m.size for m in proposal.moves if not m.moves_leader)


def test_remove_brokers_drains_them():
    model = _cluster(5, 24)
    proposal = plan(model, "remove-brokers", [5])
    after = _after(model, proposal)
    assert not any(5 in rs for rs in after.values())
    _check_balanced(model, proposal, [1, 2, 3, 4])
    assert proposal.after[5].replicas == 0 and proposal.after[5].leaders == 0


def test_full_mode_balances_an_unbalanced_cluster():
    model = _cluster(3, 30, extra=3)
    proposal = plan(model, "full")
    _check_balanced(model, proposal, range(1, 7))


def test_a_balanced_cluster_needs_no_move():
    model = _cluster(4, 24)
    proposal = plan(model, "full")
    assert proposal.replica_moves == 0


def test_rack_awareness_holds_and_is_repaired():
    # brokers 1-3 on racks a,b,c; 4-6 on a,b,c: every move keeps three racks per partition
    model = _cluster(3, 24, racks="a,b,c", extra=3)
    rack = model.rack_of()
    proposal = plan(model, "add-brokers", [4, 5, 6])
    for rs in _after(model, proposal).values():
        assert len({rack[r] for r in rs}) == 3
    # all replicas of a partition on rack a: full mode spreads them
    bs = tuple(Broker(i, "ab"[i > 3]) for i in range(1, 7))
    crowded = ClusterModel(bs, (Partition("t", 0, (1, 2, 3), 1), Partition("t", 1, (4, 5, 6), 4)))
    spread = _after(crowded, plan(crowded, "full"))
    assert all(len({bs[r - 1].rack for r in rs}) == 2 for rs in spread.values())


def test_replica_capacity_is_never_exceeded():
    model = _cluster(3, 24, extra=2)
    capped = ClusterModel(tuple(Broker(b.id, max_replicas=5 if b.id == 5 else None) for b in model.brokers),
                          model.partitions)
    proposal = plan(capped, "add-brokers", [4, 5])
    assert proposal.after[5].replicas == 5


def test_leader_counts_balanced_by_reordering_alone():
    bs = tuple(Broker(i) for i in (1, 2, 3))
    model = ClusterModel(bs, tuple(Partition("t", p, (1, 2, 3), 1) for p in range(9)))
    proposal = plan(model, "full")
    assert proposal.bytes_to_move == 0
    assert {b: proposal.after[b].leaders for b in (1, 2, 3)} == {1: 3, 2: 3, 3: 3}
    assert {b: proposal.before[b].leaders for b in (1, 2, 3)} == {1: 9, 2: 0, 3: 0}


def test_network_rate_breaks_leadership_ties():
    bs = tuple(Broker(i) for i in (1, 2))
    parts = (Partition("t", 0, (1, 2), 1, bytes_in_rate=100.0), Partition("t", 1, (1, 2), 1, bytes_in_rate=1.0))
    after = _after(ClusterModel(bs, parts), plan(ClusterModel(bs, parts), "full"))
    assert after[("t", 0)][0] == 1 or after[("t", 1)][0] == 1
    assert after[("t", 0)][0] == 2, "the busiest partition's leadership leaves the busy broker"


@pytest.mark.parametrize("start,to", [(2, 3), (3, 2), (1, 3)])
def test_replication_factor_change(start, to):
    model = _cluster(4, 8, rf=start)
    proposal = change_replication_factor(model, "t", to)
    after = _after(model, proposal)
    leaders = {p.key: p.leader for p in model.partitions}
    for key, rs in after.items():
        assert len(rs) == len(set(rs)) == to
        assert leaders[key] in rs, "the leader is never the replica removed"
    counts = Counter(itertools.chain.from_iterable(after.values()))
    assert max(counts.values()) - min(counts.get(b, 0) for b in (1, 2, 3, 4)) <= 1


def test_replication_factor_prefers_a_missing_rack():
    bs = (Broker(1, "a"), Broker(2, "a"), Broker(3, "b"))
    model = ClusterModel(bs, (Partition("t", 0, (1,), 1),))
    assert _after(model, change_replication_factor(model, "t", 2))[("t", 0)] == (1, 3)


def test_errors():
    model = _cluster(3, 3)
    with pytest.raises(PlanError):
        plan(model, "add-brokers", [9])
    with pytest.raises(PlanError):
        plan(model, "remove-brokers", [])
    with pytest.raises(PlanError):
        change_replication_factor(model, "t", 4)
    with pytest.raises(PlanError):
        change_replication_factor(model, "nope", 2)


def test_summary_and_json():
    model = _cluster(3, 6, extra=1)
    proposal = plan(model, "add-brokers", [4])
    text = proposal.summary()
    assert "replicas to move" in text and "bytes to copy" in text
    body = proposal.to_json()
    assert body["bytes_to_move"] == proposal.bytes_to_move and set(body["brokers"]) == {"1", "2", "3", "4"}
