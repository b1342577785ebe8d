"""Partition reassignment, Kafka's algorithm (KIP-455, ZooKeeper era), as pure decisions.

A partition with origin replicas ORS moving to target replicas TRS:

1. start: the assignment becomes ``RS = TRS + ORS`` (distinct, target first), with
   ``adding = RS - ORS`` and ``removing = RS - TRS`` kept in the topic znode; the snapshot
   pushed to brokers names the new replicas, which create the log and start fetching. A
   replacement of a running reassignment keeps its ORS and drops earlier adding replicas that
   the new target no longer has (from the ISR too).
2. complete, once every TRS member is in the ISR: if the leader is not in TRS, leadership
   moves to the first TRS member that is eligible and in the ISR (leader epoch + 1);
   assignment and ISR become TRS; removed replicas are no longer in the assignment (brokers
   drop those logs); the ``/admin/reassign_partitions`` entry goes.
3. cancel: revert to ORS at once (adding replicas leave assignment and ISR).

A reordering of the same replicas completes at once. Every step rewrites the partition's
state znode, so its version (the partition epoch) moves with the assignment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from odradek.cluster.control_plane import OngoingReassignment
from odradek.cluster.model import PartitionState
from odradek.errors import ErrorCode, KafkaError

from .placement import NO_LEADER, elect_leader, with_leader
from .store import StoreSnapshot, TopicRecord, TopicWrite

Key = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Move:
    topic: str
    partition: int
    replicas: tuple[int, ...]  # the new full assignment
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    state: PartitionState  # new state, written by CAS on ``version``
    version: int
    done: bool  # no reassignment left in progress: the znode entry goes
    reason: str


def _distinct(*lists: Iterable[int]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(r for rs in lists for r in rs))


def record_of(snapshot: StoreSnapshot, topic: str, partition: int) -> TopicRecord:
    record = snapshot.topics.get(topic)
    if (record is None or topic in snapshot.pending_deletions or partition not in record.assignment
            or partition not in record.states):
        raise KafkaError(ErrorCode.unknown_topic_or_partition,
                         f"The partition {topic}-{partition} does not exist.")
    return record


def validate_target(snapshot: StoreSnapshot, topic: str, partition: int, target: tuple[int, ...]) -> TopicRecord:
    """Kafka's checks on a new target: the partition exists, the list is not empty, has no
    duplicates and names registered brokers only (INVALID_REPLICA_ASSIGNMENT)."""
    record = record_of(snapshot, topic, partition)
    if not target:
        raise KafkaError(ErrorCode.invalid_replica_assignment,
                         f"The replica list of {topic}-{partition} cannot be empty.")
    if len(set(target)) != len(target):
        raise KafkaError(ErrorCode.invalid_replica_assignment,
                         f"The replica list {list(target)} of {topic}-{partition} contains duplicates.")
    unknown = [r for r in target if r not in snapshot.live_ids]
    if unknown:
        raise KafkaError(ErrorCode.invalid_replica_assignment,
                         f"Replica assignment {list(target)} of {topic}-{partition} has brokers that "
                         f"are not alive: {unknown}.")
    return record


def _narrow(state: PartitionState, replicas: tuple[int, ...], eligible: frozenset[int],
            controller_epoch: int) -> tuple[PartitionState, str]:
    """``state`` over a new replica set: ISR members outside it leave; a leader outside it is
    replaced by the first eligible ISR member (if none is left in the ISR, the first eligible
    replica: Kafka's revert does an unclean election in that corner)."""
    isr = tuple(r for r in state.isr if r in replicas)
    note = ""
    if state.leader in replicas or (state.leader == NO_LEADER and isr):
        leader = state.leader
    else:
        if not isr:
            isr = tuple(r for r in replicas if r in eligible)[:1] or replicas[:1]
            note = f"; no ISR member left in {list(replicas)}: UNCLEAN choice of {isr[0]}"
        leader, _ = elect_leader(replicas, isr, eligible)
    return with_leader(state, leader, isr, controller_epoch, replicas), note


def _finish(state: PartitionState, target: tuple[int, ...], eligible: frozenset[int],
            controller_epoch: int) -> PartitionState | None:
    """The completed state (assignment and ISR = target), or None while a target replica is
    out of the ISR or no target replica can lead."""
    if not set(target) <= set(state.isr):
        return None
    isr = tuple(r for r in state.isr if r in target)
    if state.leader in target:
        leader = state.leader
    else:
        leader, _ = elect_leader(target, isr, eligible)
        if leader == NO_LEADER:
            return None
    return with_leader(state, leader, isr, controller_epoch, target)


def start(record: TopicRecord, partition: int, target: tuple[int, ...], eligible: frozenset[int],
          controller_epoch: int) -> Move | None:
    """Start (or replace) a reassignment to ``target``; completed at once when possible.
    None when there is nothing to do (the target is already the assignment, or already the
    running reassignment's target)."""
    name, state = record.name, record.states[partition]
    version = record.state_versions[partition]
    if record.reassigning(partition) and record.target(partition) == target:
        return None
    if not record.reassigning(partition) and record.assignment[partition] == target:
        return None
    origin = record.origin(partition)
    replicas = _distinct(target, origin)
    adding = tuple(r for r in replicas if r not in origin)
    removing = tuple(r for r in replicas if r not in target)
    if not adding and not removing:
        return Move(name, partition, target, (), (), with_leader(state, state.leader, state.isr,
                                                                  controller_epoch, target),
                    version, True, f"{name}-{partition}: replicas reordered to {list(target)}")
    moving, note = _narrow(state, replicas, eligible, controller_epoch)
    finished = _finish(moving, target, eligible, controller_epoch)
    if finished is not None:
        return Move(name, partition, target, (), (), finished, version, True,
                    f"{name}-{partition}: reassigned from {list(origin)} to {list(target)} "
                    f"(every target replica already in the ISR){note}")
    return Move(name, partition, replicas, adding, removing, moving, version, False,
                f"{name}-{partition}: reassignment from {list(origin)} to {list(target)} started: "
                f"replicas {list(replicas)}, adding {list(adding)}, removing {list(removing)}{note}")


def complete(record: TopicRecord, partition: int, eligible: frozenset[int],
             controller_epoch: int) -> Move | None:
    """The completion of a running reassignment, if every target replica is in the ISR."""
    if not record.reassigning(partition):
        return None
    target = record.target(partition)
    finished = _finish(record.states[partition], target, eligible, controller_epoch)
    if finished is None:
        return None
    return Move(record.name, partition, target, (), (), finished, record.state_versions[partition], True,
                f"{record.name}-{partition}: reassignment to {list(target)} complete "
                f"(leader {finished.leader}, epoch {finished.leader_epoch})")


def cancel(record: TopicRecord, partition: int, eligible: frozenset[int], controller_epoch: int) -> Move:
    """Revert a running reassignment to its origin replicas."""
    origin = record.origin(partition)
    reverted, note = _narrow(record.states[partition], origin, eligible, controller_epoch)
    return Move(record.name, partition, origin, (), (), reverted, record.state_versions[partition], True,
                f"{record.name}-{partition}: reassignment cancelled, back to {list(origin)}{note}")


def plan_request(snapshot: StoreSnapshot, entries: Iterable[tuple[str, int, tuple[int, ...] | None]],
                 eligible: frozenset[int], controller_epoch: int
                 ) -> tuple[list[tuple[str, int, KafkaError | None]], list[Move], dict[Key, tuple[int, ...]]]:
    """``control_plane.REASSIGN`` (Kafka's AlterPartitionReassignments): per entry,
    start/replace (``replicas``) or cancel (``None``: NO_REASSIGNMENT_IN_PROGRESS if nothing
    runs). Returns (per-entry outcome, moves, the ``/admin/reassign_partitions`` entries after)."""
    requests = dict(snapshot.reassign_requests)
    moves: dict[Key, Move] = {}
    results: list[tuple[str, int, KafkaError | None]] = []
    for topic, p, target in entries:
        key = (topic, p)
        try:
            if target is None:
                record = record_of(snapshot, topic, p)
                if not record.reassigning(p) and key not in requests:
                    raise KafkaError(ErrorCode.no_reassignment_in_progress,
                                     f"No reassignment is in progress for partition {topic}-{p}.")
                requests.pop(key, None)
                if record.reassigning(p):
                    moves[key] = cancel(record, p, eligible, controller_epoch)
            else:
                record = validate_target(snapshot, topic, p, target)
                move = start(record, p, target, eligible, controller_epoch)
                if move is not None:
                    moves[key] = move
                if move is None and record.reassigning(p) or move is not None and not move.done:
                    requests[key] = target
                else:
                    requests.pop(key, None)
            results.append((topic, p, None))
        except KafkaError as e:
            results.append((topic, p, e))
    return results, list(moves.values()), requests


def in_progress(snapshot: StoreSnapshot) -> list[OngoingReassignment]:
    """``control_plane.LIST_REASSIGNMENTS``: running reassignments, as Kafka lists them."""
    out = []
    for name in sorted(snapshot.topics):
        record = snapshot.topics[name]
        if name in snapshot.pending_deletions:
            continue
        for p in sorted(record.assignment):
            if record.reassigning(p):
                out.append(OngoingReassignment(name, p, tuple(record.assignment[p]), tuple(record.adding.get(p, ())),
                                               tuple(record.removing.get(p, ()))))
    return out


def pending_work(snapshot: StoreSnapshot, eligible: frozenset[int], controller_epoch: int
                 ) -> tuple[list[Move], dict[Key, tuple[int, ...]], list[str]]:
    """What reconciliation does: start the ``/admin/reassign_partitions`` entries that are not
    running yet (a null ``replicas`` entry cancels), drop invalid entries, complete running
    reassignments that can complete. Returns (moves, the znode's entries afterwards, log lines
    about dropped entries)."""
    moves: dict[Key, Move] = {}
    requests = dict(snapshot.reassign_requests)
    notes = []
    for (name, p), target in sorted(snapshot.reassign_requests.items()):
        try:
            record = record_of(snapshot, name, p) if not target else validate_target(snapshot, name, p, target)
        except KafkaError as e:
            notes.append(f"dropping reassignment entry {name}-{p} -> {list(target)}: {e.message}")
            del requests[(name, p)]
            continue
        if not target:
            del requests[(name, p)]
            if record.reassigning(p):
                moves[(name, p)] = cancel(record, p, eligible, controller_epoch)
            continue
        move = start(record, p, target, eligible, controller_epoch)
        if move is not None:
            moves[(name, p)] = move
        elif not record.reassigning(p):
            del requests[(name, p)]  # nothing to do: already the assignment
    for name in sorted(snapshot.topics):
        record = snapshot.topics[name]
        if name in snapshot.pending_deletions:
            continue
        for p in sorted(record.assignment):
            if (name, p) not in moves and p in record.states:
                move = complete(record, p, eligible, controller_epoch)
                if move is not None:
                    moves[(name, p)] = move
    for key, move in moves.items():
        if move.done:
            requests.pop(key, None)
    return list(moves.values()), requests, notes


def writes(snapshot: StoreSnapshot, moves: Iterable[Move]) -> list[TopicWrite]:
    """Group moves into one ``TopicWrite`` per topic (full assignment and adding/removing maps)."""
    by_topic: dict[str, list[Move]] = {}
    for m in moves:
        by_topic.setdefault(m.topic, []).append(m)
    out = []
    for name, ms in sorted(by_topic.items()):
        record = snapshot.topics[name]
        assignment, adding, removing = dict(record.assignment), dict(record.adding), dict(record.removing)
        states: dict[int, tuple[PartitionState, int]] = {}
        for m in ms:
            assignment[m.partition] = m.replicas
            adding[m.partition], removing[m.partition] = m.adding, m.removing
            states[m.partition] = (m.state, m.version)
        out.append(TopicWrite(record, assignment, _nonempty(adding), _nonempty(removing), states))
    return out


def _nonempty(m: Mapping[int, tuple[int, ...]]) -> dict[int, tuple[int, ...]]:
    return {p: r for p, r in m.items() if r}
