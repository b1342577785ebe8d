"""The balancer: Cruise Control's goals over a ``ClusterModel``, as pure decisions.

Goals, in priority order (a goal never undoes a higher one):

1. rack awareness: a move never lowers the number of racks a partition's replicas span; in
   ``full`` mode a partition on fewer racks than it could span first gets a replica moved to
   a rack it lacks (a broker without ``broker.rack`` is a rack of its own, as in Kafka);
2. replica capacity: a broker never takes more than its ``max_replicas``;
3. disk usage: a move never fills a broker past its ``disk_bytes``, nor past the cluster's
   mean bytes + ``DISK_BALANCE_MARGIN`` unless the broker giving the replica was fuller;
4. replica count: brokers end within one replica of each other (so within one of the mean);
5. leader count: preferred leaders (each list's first replica) reordered to within one of the
   mean: a reordering copies nothing (Kafka completes it at once) and the executor's
   preferred-leader election then moves leadership;
6. network in/out: the produce rate each partition takes on its leader breaks ties when
   leadership is handed over (the busiest broker gives its busiest partition);
7. preferred leaders: the plan ends with a preferred-leader election.

Fewest bytes moved: replicas are taken from the fullest broker and given to the emptiest one,
one at a time, and each time the smallest partition whose move is allowed goes, a follower
before a leader; the moves are ordered followers' first, small before large.

Modes: ``full``; ``add-brokers`` (replicas only move onto the new brokers); ``remove-brokers``
(every replica moves off them, onto the brokers that stay). ``change_replication_factor``
places added replicas and picks removed ones by the same goals.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable

from .model import Broker, BrokerLoad, ClusterModel, Key, Move, Partition, Proposal

DISK_BALANCE_MARGIN = 0.10
MODES = ("full", "add-brokers", "remove-brokers")


class PlanError(ValueError):
    """A plan that cannot be made (unknown brokers, a replication factor above the brokers)."""


class _Working:
    """The assignment being planned and each broker's replica count and bytes."""

    def __init__(self, model: ClusterModel, eligible: Iterable[int]) -> None:
        self.partitions = {p.key: p for p in model.partitions}
        self.assign = {p.key: list(p.replicas) for p in model.partitions}
        self.brokers: dict[int, Broker] = {b.id: b for b in model.brokers}
        self.eligible = sorted(eligible)
        self.count: Counter[int] = Counter()
        self.bytes: Counter[int] = Counter()
        self.movable: set[tuple[Key, int]] | None = None   # None: every replica may move
        # the mean once the plan is done: every replica's bytes over the brokers that stay
        self.mean_bytes = sum(p.size * len(p.replicas) for p in model.partitions) / max(1, len(self.eligible))
        for p in model.partitions:
            for r in p.replicas:
                self.count[r] += 1
                self.bytes[r] += p.size

    def rack(self, broker: int) -> str:
        b = self.brokers.get(broker)
        return b.rack if b is not None and b.rack else f"\0{broker}"   # no rack: a rack of its own

    def racks(self, replicas: Iterable[int]) -> int:
        return len({self.rack(r) for r in replicas})

    def allowed(self, key: Key, src: int | None, dst: int) -> bool:
        """Goals 1-3 for moving ``key``'s replica on ``src`` (None: adding one) to ``dst``."""
        replicas, size, b = self.assign[key], self.partitions[key].size, self.brokers[dst]
        if dst in replicas:
            return False
        others = [r for r in replicas if r != src]
        if self.racks(others + [dst]) < self.racks(replicas):
            return False
        if b.max_replicas is not None and self.count[dst] + 1 > b.max_replicas:
            return False
        if b.disk_bytes is not None and self.bytes[dst] + size > b.disk_bytes:
            return False
        upper = self.mean_bytes * (1 + DISK_BALANCE_MARGIN)
        # above the margin only when the pair's fuller broker is no fuller afterwards
        return self.bytes[dst] + size <= max(upper, self.bytes[src] if src is not None else 0)

    def replace(self, key: Key, src: int, dst: int) -> None:
        replicas, size = self.assign[key], self.partitions[key].size
        replicas[replicas.index(src)] = dst
        if self.movable is not None:
            self.movable.discard((key, src))
            self.movable.add((key, dst))
        self.count[src] -= 1
        self.bytes[src] -= size
        self.count[dst] += 1
        self.bytes[dst] += size

    def add(self, key: Key, dst: int) -> None:
        self.assign[key].append(dst)
        if self.movable is not None:
            self.movable.add((key, dst))
        self.count[dst] += 1
        self.bytes[dst] += self.partitions[key].size

    def drop(self, key: Key, src: int) -> None:
        self.assign[key].remove(src)
        self.count[src] -= 1
        self.bytes[src] -= self.partitions[key].size

    def lightest(self, candidates: Iterable[int]) -> list[int]:
        return sorted(candidates, key=lambda b: (self.count[b], self.bytes[b], b))

    def cheapest_on(self, src: int, keys: Iterable[Key]) -> list[Key]:
        """``src``'s replicas, cheapest to move first: followers before leaders, small first."""
        def cost(key: Key) -> tuple:
            p = self.partitions[key]
            leads = (p.leader if p.leader >= 0 else p.replicas[0]) == src
            return (leads, p.size, key)
        return sorted((k for k in keys if src in self.assign[k]
                       and (self.movable is None or (k, src) in self.movable)), key=cost)


def _drain(w: _Working, removed: set[int], notes: list[str]) -> None:
    for key in sorted(w.assign):
        for src in [r for r in w.assign[key] if r in removed]:
            dst = next((d for d in w.lightest(w.eligible) if w.allowed(key, src, d)), None)
            if dst is None:   # rack or disk goals cannot hold: a replica off the broker matters more
                dst = next((d for d in w.lightest(w.eligible) if d not in w.assign[key]), None)
                if dst is None:
                    notes.append(f"{key[0]}-{key[1]}: no broker left to take its replica on {src}")
                    continue
                notes.append(f"{key[0]}-{key[1]}: replica on {src} moved to {dst} breaking the rack or disk goal")
            w.replace(key, src, dst)
            w.movable.add((key, dst))


def _spread_racks(w: _Working) -> None:
    """Goal 1 in ``full`` mode: partitions that could span more racks get a replica moved."""
    all_racks = {w.rack(b) for b in w.eligible}
    for key in sorted(w.assign):
        replicas = w.assign[key]
        while w.racks(replicas) < min(len(replicas), len(all_racks)):
            dup = _duplicate_rack_member(w, replicas)
            dst = next((d for d in w.lightest(w.eligible) if d not in replicas
                        and w.racks([r for r in replicas if r != dup] + [d]) > w.racks(replicas)), None)
            if dst is None:
                break
            w.replace(key, dup, dst)


def _duplicate_rack_member(w: _Working, replicas: list[int]) -> int:
    """The last replica whose rack an earlier replica already has (never the preferred leader)."""
    seen: set[str] = set()
    last = replicas[-1]
    for r in replicas:
        if w.rack(r) in seen:
            last = r
        seen.add(w.rack(r))
    return last


def _balance_counts(w: _Working, sources: list[int], dests: list[int]) -> None:
    """Goal 4: one replica at a time from the fullest source to the emptiest destination that
    can take one of its replicas, until no pair differs by two or more."""
    for _ in range(10 * sum(w.count.values()) + 1):
        if not _one_move(w, sources, dests):
            return


def _one_move(w: _Working, sources: list[int], dests: list[int]) -> bool:
    for src in sorted(sources, key=lambda b: (-w.count[b], -w.bytes[b], b)):
        for dst in w.lightest(dests):
            if w.count[src] - w.count[dst] < 2:
                break
            key = next((k for k in w.cheapest_on(src, w.assign) if w.allowed(k, src, dst)), None)
            if key is not None:
                w.replace(key, src, dst)
                return True
    return False


def _balance_leaders(w: _Working) -> None:
    """Goals 5 and 6: reorder replica lists so preferred leaderships differ by at most one."""
    rate = {k: p.bytes_in_rate for k, p in w.partitions.items()}
    for _ in range(10 * len(w.assign) + 1):
        leads = Counter({b: 0 for b in w.eligible})
        load: Counter[int] = Counter()
        for k, rs in w.assign.items():
            if rs:
                leads[rs[0]] += 1
                load[rs[0]] += rate[k]
        if not _hand_over(w, leads, load, rate):
            return


def _hand_over(w: _Working, leads: Counter, load: Counter, rate: dict[Key, float]) -> bool:
    """One augmenting path of leaderships from the broker leading most to one leading at least
    two fewer: each step hands a partition's leadership to one of its replicas (breadth first,
    so the fewest reorderings)."""
    by_leader: dict[int, list[Key]] = {}
    for k, rs in sorted(w.assign.items()):
        if rs:
            by_leader.setdefault(rs[0], []).append(k)
    for hi in sorted(leads, key=lambda b: (-leads[b], -load[b], b)):
        # the busiest partitions first when hi carries more produce bytes than the mean
        busy = load[hi] * len(leads) > sum(load.values())
        parent: dict[int, tuple[int, Key] | None] = {hi: None}
        frontier = [hi]
        while frontier:
            nxt = []
            for a in frontier:
                for k in sorted(by_leader.get(a, ()), key=lambda k: (-rate[k] if busy else rate[k], k)):
                    for b in w.assign[k][1:]:
                        if b in parent or b not in leads:
                            continue
                        parent[b] = (a, k)
                        if leads[b] <= leads[hi] - 2:
                            _apply_path(w, parent, b)
                            return True
                        nxt.append(b)
            frontier = nxt
    return False


def _apply_path(w: _Working, parent: dict[int, tuple[int, Key] | None], end: int) -> None:
    node = end
    while parent[node] is not None:
        prev, key = parent[node]
        rs = w.assign[key]
        i = rs.index(node)
        rs[0], rs[i] = rs[i], rs[0]
        node = prev


def _loads(assign: dict[Key, list[int]] | dict[Key, tuple[int, ...]], partitions: dict[Key, Partition],
           brokers: Iterable[int], leaders: dict[Key, int]) -> dict[int, BrokerLoad]:
    replicas, lead, size = Counter(), Counter(), Counter()
    for key, rs in assign.items():
        for r in rs:
            replicas[r] += 1
            size[r] += partitions[key].size
        if leaders.get(key, -1) >= 0:
            lead[leaders[key]] += 1
    ids = sorted(set(brokers) | set(replicas))
    return {b: BrokerLoad(replicas[b], lead[b], size[b]) for b in ids}


def _proposal(mode: str, model: ClusterModel, w: _Working, notes: list[str]) -> Proposal:
    partitions = w.partitions
    moves = [Move(k[0], k[1], partitions[k].replicas, tuple(rs), partitions[k].size)
             for k, rs in sorted(w.assign.items()) if tuple(rs) != partitions[k].replicas]
    moves.sort(key=lambda m: (m.moves_leader, m.bytes_to_move, m.topic, m.partition))
    current = {k: (p.leader if p.leader >= 0 else (p.replicas[0] if p.replicas else -1))
               for k, p in partitions.items()}
    preferred = {k: rs[0] for k, rs in w.assign.items() if rs}
    ids = model.broker_ids()
    return Proposal(mode, tuple(moves), _loads({k: p.replicas for k, p in partitions.items()}, partitions, ids,
                                               current),
                    _loads(w.assign, partitions, ids, preferred), tuple(notes))


def plan(model: ClusterModel, mode: str = "full", brokers: Iterable[int] = ()) -> Proposal:
    """A proposal for ``mode`` (``brokers``: the ones added or removed)."""
    if mode not in MODES:
        raise PlanError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
    named = set(brokers)
    unknown = named - set(model.broker_ids())
    if unknown:
        raise PlanError(f"brokers {sorted(unknown)} are not in the cluster")
    if mode != "full" and not named:
        raise PlanError(f"{mode} needs the ids of the brokers")
    removed = named if mode == "remove-brokers" else set()
    eligible = [b for b in model.broker_ids() if b not in removed]
    if not eligible:
        raise PlanError("no broker would be left")
    w, notes = _Working(model, eligible), []
    if mode == "remove-brokers":
        w.movable = set()   # the drained replicas, free to go elsewhere before copying anything
        _drain(w, removed, notes)
        _balance_counts(w, eligible, eligible)
        w.movable = None    # what drained replicas alone could not even out, any replica may
        _balance_counts(w, eligible, eligible)
    elif mode == "add-brokers":
        _balance_counts(w, [b for b in eligible if b not in named], sorted(named))
    else:
        _spread_racks(w)
        _balance_counts(w, eligible, eligible)
    _balance_leaders(w)
    return _proposal(mode, model, w, notes)


def change_replication_factor(model: ClusterModel, topic: str, factor: int) -> Proposal:
    """Each of ``topic``'s partitions to ``factor`` replicas: new replicas on the lightest
    brokers of racks the partition lacks; removed ones never the leader, first those sharing a
    rack, then on the fullest brokers."""
    keys = sorted(p.key for p in model.partitions if p.topic == topic)
    if not keys:
        raise PlanError(f"topic {topic!r} does not exist")
    eligible = model.broker_ids()
    if not 1 <= factor <= len(eligible):
        raise PlanError(f"replication factor {factor} must be between 1 and the {len(eligible)} brokers")
    w, notes = _Working(model, eligible), []
    w.movable = set()   # a replica added by this change may go elsewhere before it copied anything
    for key in keys:
        p = w.partitions[key]
        leader = p.leader if p.leader >= 0 else p.replicas[0]
        while len(w.assign[key]) < factor:
            replicas = w.assign[key]
            dst = min((d for d in eligible if d not in replicas),
                      key=lambda d: (w.racks(replicas + [d]) == w.racks(replicas), w.count[d], w.bytes[d], d))
            w.add(key, dst)
        while len(w.assign[key]) > factor:
            replicas = w.assign[key]
            src = max((r for r in replicas if r != leader),
                      key=lambda r: (w.racks([x for x in replicas if x != r]) == w.racks(replicas),
                                     w.count[r], w.bytes[r], replicas.index(r)))
            w.drop(key, src)
    _balance_counts(w, list(eligible), list(eligible))
    return _proposal(f"replication-factor {factor}", model, w, notes)
