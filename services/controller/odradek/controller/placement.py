"""Pure placement and election rules (docs/control-plane.md: placement, replication), no I/O.

Owns (topic-name rules live in ``odradek.topics``):
- replica placement: over the sorted live broker ids ``b``, replica ``j`` of partition ``i``
  goes to ``b[(start + i + j) mod n]``. When the brokers have racks (``broker.rack``), ``b`` is
  first *alternated by rack* as Kafka's ZooKeeper-era ``AdminUtils.getRackAlternatedBrokerList``
  does (racks sorted, each rack's brokers sorted, one broker of each rack in turn), so that
  consecutive entries, hence a partition's replicas, are on different racks while there are
  racks enough (docs/racks.md); only some brokers with a rack is refused, as Kafka refuses it.
  ``start`` is a plain offset into that list:
  the controller uses ``crc32(topic name) mod n`` for a new topic, so that topics' first
  partitions spread over the brokers deterministically, and for a partition increase the
  position of partition 0's preferred leader in the current list (Kafka's rule), so new
  partitions continue the same rotation;
- partition leader election and the per-partition decision over a set of live brokers,
  each returning a one-line reason for the log. Every leader change bumps ``leader_epoch``;
  an ISR-only change keeps it (the state znode's version, the partition epoch, moves).
"""

from __future__ import annotations

import zlib
from typing import Iterable, Mapping

from odradek.cluster.model import PartitionState
from odradek.errors import ErrorCode, KafkaError

NO_LEADER = -1


def start_offset(topic: str, n: int) -> int:
    return zlib.crc32(topic.encode()) % n if n else 0


def arranged_brokers(broker_ids: Iterable[int], racks: Mapping[int, str | None] | None = None) -> list[int]:
    """The list placement rotates over: the sorted ids, alternated by rack when brokers have racks."""
    brokers = sorted(set(broker_ids))
    with_rack = {b: racks[b] for b in brokers if racks and racks.get(b)}
    if not with_rack:
        return brokers
    if len(with_rack) != len(brokers):
        raise KafkaError(ErrorCode.unknown_server_error,
                         "Not all brokers have rack information for replica rack aware assignment.")
    by_rack: dict[str, list[int]] = {}
    for b in brokers:
        by_rack.setdefault(with_rack[b], []).append(b)
    columns = [by_rack[r] for r in sorted(by_rack)]
    return [column[row] for row in range(max(map(len, columns))) for column in columns if row < len(column)]


def assign_replicas(partitions: int, replication_factor: int, broker_ids: Iterable[int],
                    start: int = 0, first_partition: int = 0,
                    racks: Mapping[int, str | None] | None = None) -> dict[int, tuple[int, ...]]:
    """Partitions ``first_partition .. partitions-1``; replica j of i on ``b[(start+i+j) % n]``,
    ``b`` = ``arranged_brokers``."""
    brokers = arranged_brokers(broker_ids, racks)
    n = len(brokers)
    if replication_factor > n:
        raise KafkaError(ErrorCode.invalid_replication_factor,
                         f"Replication factor: {replication_factor} larger than available brokers: {n}.")
    return {i: tuple(brokers[(start + i + j) % n] for j in range(replication_factor))
            for i in range(first_partition, partitions)}


def increase_start(assignment: Mapping[int, tuple[int, ...]], broker_ids: Iterable[int],
                   racks: Mapping[int, str | None] | None = None) -> int:
    """The start offset that continues an existing topic's rotation over today's brokers."""
    brokers = arranged_brokers(broker_ids, racks)
    first = assignment.get(0, ())
    return brokers.index(first[0]) if first and first[0] in brokers else 0


def initial_state(partition: int, replicas: tuple[int, ...], controller_epoch: int,
                  avoid: Iterable[int] = ()) -> PartitionState:
    """A new partition: ISR = all replicas, leader = the first (preferred) replica, epoch 0;
    the first replica not in ``avoid`` (maintenance mode) when there is one.

    The replicas are live brokers (placement and the assignment check make sure of it); a
    replica whose broker died meanwhile leaves the ISR at the next reconciliation."""
    avoided = set(avoid)
    leader = next((r for r in replicas if r not in avoided), replicas[0])
    return PartitionState(partition, replicas, leader, 0, replicas, controller_epoch)


def elect_leader(replicas: tuple[int, ...], isr: tuple[int, ...], eligible: Iterable[int],
                 unclean: bool = False, avoid: Iterable[int] = ()) -> tuple[int, str]:
    """The first eligible replica of the assignment that is in the ISR; else -1 (or, if
    ``unclean``, the first eligible replica). Eligible = registered and not shutting down.
    A broker in ``avoid`` (maintenance mode) is chosen only when no other eligible ISR member
    is: a partition it alone can lead stays available. Returns (leader, reason)."""
    alive = set(eligible)
    avoided = set(avoid)
    for r in replicas:
        if r in isr and r in alive and r not in avoided:
            return r, f"replica {r} is the first live replica in the ISR"
    for r in replicas:
        if r in isr and r in alive:
            return r, f"replica {r} (in maintenance) is the only live replica in the ISR"
    if unclean:
        for r in replicas:
            if r in alive:
                return r, f"UNCLEAN election of replica {r}: no live replica is in the ISR (data may be lost)"
    return NO_LEADER, "offline: no live replica in the ISR"


def reconcile_partition(state: PartitionState, live: Iterable[int], controller_epoch: int,
                        unclean: bool = False, shutting_down: Iterable[int] = (), avoid: Iterable[int] = ()
                        ) -> tuple[PartitionState | None, str]:
    """What the controller should write for one partition given the registered brokers.

    Returns (new state or None if nothing changes, reason).

    - A registered leader keeps its place; dead followers leave the ISR (leader epoch kept).
    - A dead or absent leader is replaced by ``elect_leader`` over the registered brokers that
      are not shutting down, brokers in maintenance (``avoid``) last (leader epoch + 1); the new ISR is the old one without dead and
      shutting-down brokers (``[leader]`` after an unclean election).
    - With no eligible ISR member the partition goes offline (leader -1, epoch + 1) and, as
      Kafka does, its ISR keeps only the last leader, so that replica is the one that gets the
      leadership back when it returns."""
    alive = set(live)
    eligible = alive - set(shutting_down)
    if state.leader != NO_LEADER and state.leader in alive:
        isr = tuple(r for r in state.isr if r in alive)
        if isr == state.isr:
            return None, f"leader {state.leader} is live"
        return (with_leader(state, state.leader, isr, controller_epoch),
                f"followers {sorted(set(state.isr) - alive)} are offline: shrink the ISR to {list(isr)}")
    leader, why = elect_leader(state.replicas, state.isr, eligible, unclean, avoid)
    if leader == NO_LEADER:
        if state.leader == NO_LEADER:
            return None, "still offline"
        last = (state.leader,) if state.leader in state.isr else state.isr
        return (with_leader(state, NO_LEADER, last, controller_epoch),
                f"leader {state.leader} is offline; {why}")
    isr = tuple(r for r in state.isr if r in eligible) if leader in state.isr else (leader,)
    was = "offline" if state.leader == NO_LEADER else f"leader {state.leader} is offline"
    return with_leader(state, leader, isr, controller_epoch), f"{was}; {why}"


def with_leader(state: PartitionState, leader: int, isr: tuple[int, ...], controller_epoch: int,
                replicas: tuple[int, ...] | None = None) -> PartitionState:
    """``state`` with a new leader and ISR: the leader epoch moves only when the leader does
    (Kafka's rule since KIP-841's partition epoch: ISR-only changes keep the leader epoch)."""
    epoch = state.leader_epoch + (1 if leader != state.leader else 0)
    return PartitionState(state.partition, replicas if replicas is not None else state.replicas,
                          leader, epoch, isr, controller_epoch, state.partition_epoch)
