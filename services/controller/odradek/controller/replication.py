"""The controller's replication decisions: pure functions over a ``StoreSnapshot``, no I/O.

Owns, each with Kafka's error codes and a one-line reason for the log:

- AlterPartition (ISR changes asked for by a partition's leader): validation and new state;
- controlled shutdown: leaderships moved off a broker that is shutting down, its ISR
  memberships dropped, and the leaderships it must keep (no other ISR member);
- maintenance mode: leaderships moved off a broker that keeps running and replicating (its
  ISR memberships kept); brokers in maintenance (``StoreSnapshot.maintenance``) are elected
  last by every election here, and never by a preferred one;
- leader elections on request (preferred / unclean, Kafka's ElectLeaders) and the automatic
  preferred-leader rebalance (Kafka's ``leader.imbalance.per.broker.percentage`` rule);
- partition reassignment steps (Kafka's ORS/TRS algorithm): start or replace, cancel,
  complete once every target replica is in the ISR.

"Eligible" brokers are registered (``/brokers/ids/<id>``) and not shutting down.
"""

from __future__ import annotations

from typing import Iterable

from odradek.cluster.control_plane import AlterPartition, PartitionResult
from odradek.cluster.model import PartitionState
from odradek.errors import ErrorCode, KafkaError

from .decisions import PartitionChange
from .placement import NO_LEADER, elect_leader, with_leader
from .store import StoreSnapshot, TopicRecord

PREFERRED = 0
UNCLEAN = 1


def _unknown(topic: str, partition: int) -> KafkaError:
    return KafkaError(ErrorCode.unknown_topic_or_partition,
                      f"This server does not host this topic-partition: {topic}-{partition}")


def _record(snapshot: StoreSnapshot, topic: str, partition: int) -> TopicRecord:
    record = snapshot.topics.get(topic)
    if (record is None or topic in snapshot.pending_deletions or partition not in record.states
            or partition not in record.assignment):
        raise _unknown(topic, partition)
    return record


def eligible_ids(snapshot: StoreSnapshot, shutting_down: Iterable[int]) -> frozenset[int]:
    return frozenset(snapshot.live_ids) - frozenset(shutting_down)


# --- AlterPartition ----------------------------------------------------------------------------
def alter_partition(snapshot: StoreSnapshot, req: AlterPartition, shutting_down: Iterable[int],
                    controller_epoch: int) -> PartitionChange | PartitionState:
    """Validate a leader's ISR change as Kafka's AlterPartition does, in this order:
    STALE_BROKER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
    (a retry of a change already made answers the current state), INVALID_UPDATE_VERSION,
    INVALID_REQUEST (empty or duplicate ISR), INELIGIBLE_REPLICA.

    Returns the ``PartitionChange`` to write, or the current state when the ISR asked for is
    already the current one (a retried request whose answer was lost)."""
    registered = snapshot.broker(req.broker_id)
    if req.broker_epoch != -1 and (registered is None or registered.epoch != req.broker_epoch):
        current = "not registered" if registered is None else f"registered with epoch {registered.epoch}"
        raise KafkaError(ErrorCode.stale_broker_epoch,
                         f"Broker {req.broker_id} sent broker epoch {req.broker_epoch} but is {current}.")
    record = _record(snapshot, req.topic, req.partition)
    state = record.states[req.partition]
    if state.leader != req.broker_id:
        raise KafkaError(ErrorCode.not_leader_or_follower,
                         f"Broker {req.broker_id} is not the leader of {req.topic}-{req.partition} "
                         f"(leader {state.leader} at epoch {state.leader_epoch}).")
    if req.leader_epoch != state.leader_epoch:
        raise KafkaError(ErrorCode.fenced_leader_epoch,
                         f"Leader epoch {req.leader_epoch} of {req.topic}-{req.partition} is not the "
                         f"current leader epoch {state.leader_epoch}.")
    version = record.state_versions[req.partition]
    if req.isr == state.isr:
        return state
    if req.partition_epoch != version:
        raise KafkaError(ErrorCode.invalid_update_version,
                         f"Partition epoch {req.partition_epoch} of {req.topic}-{req.partition} is not "
                         f"the current partition epoch {version}.")
    if not req.isr or len(set(req.isr)) != len(req.isr):
        raise KafkaError(ErrorCode.invalid_request, f"The ISR {list(req.isr)} is empty or has duplicates.")
    replicas = record.assignment[req.partition]
    eligible = eligible_ids(snapshot, shutting_down) | {state.leader}
    if state.leader not in req.isr:
        raise KafkaError(ErrorCode.ineligible_replica,
                         f"The ISR {list(req.isr)} of {req.topic}-{req.partition} must contain its "
                         f"leader {state.leader}.")
    bad = [r for r in req.isr if r not in replicas or r not in eligible]
    if bad:
        raise KafkaError(ErrorCode.ineligible_replica,
                         f"Replicas {bad} in the ISR {list(req.isr)} of {req.topic}-{req.partition} are "
                         f"not live, non-shutting-down replicas of the assignment {list(replicas)}.")
    new = with_leader(state, state.leader, req.isr, controller_epoch)
    return PartitionChange(req.topic, new, version,
                       f"{req.topic}-{req.partition}: leader {state.leader} asks for ISR {list(req.isr)} "
                       f"(was {list(state.isr)})")


# --- controlled shutdown ------------------------------------------------------------------------
def shutdown_changes(snapshot: StoreSnapshot, broker_id: int, shutting_down: Iterable[int],
                     controller_epoch: int) -> list[PartitionChange]:
    """Kafka's controlled shutdown over partitions with more than one replica: each partition
    the broker leads goes to the first replica in assignment order that is in the ISR and
    eligible (leader epoch + 1, ISR without shutting-down brokers); a partition where it is
    only a follower loses it from the ISR (leader epoch kept). Partitions with no other
    eligible ISR member keep their leader (``remaining_leaderships``)."""
    down = frozenset(shutting_down) | {broker_id}
    eligible = frozenset(snapshot.live_ids) - down
    changes = []
    for name, record in _live_topics(snapshot):
        for p in sorted(record.states):
            state = record.states[p]
            if len(state.replicas) <= 1 or broker_id not in state.replicas:
                continue
            if state.leader == broker_id:
                leader, _ = elect_leader(state.replicas, state.isr, eligible, avoid=snapshot.maintenance)
                if leader == NO_LEADER:
                    continue
                isr = tuple(r for r in state.isr if r not in down)
                why = f"broker {broker_id} is shutting down: leadership moves to {leader}"
            elif broker_id in state.isr and state.leader != NO_LEADER:
                leader, isr = state.leader, tuple(r for r in state.isr if r != broker_id)
                why = f"broker {broker_id} is shutting down: it leaves the ISR"
            else:
                continue
            changes.append(PartitionChange(name, with_leader(state, leader, isr, controller_epoch),
                                       record.state_versions[p], f"{name}-{p}: {why}"))
    return changes


def maintenance_moves(snapshot: StoreSnapshot, broker_id: int, shutting_down: Iterable[int],
                      controller_epoch: int) -> list[PartitionChange]:
    """Redpanda's maintenance mode: each partition ``broker_id`` leads goes to the first other
    eligible ISR member in assignment order that is not in maintenance (leader epoch + 1, ISR
    kept: the broker goes on replicating); a partition with no such member keeps its leader."""
    eligible = eligible_ids(snapshot, shutting_down) - snapshot.maintenance - {broker_id}
    changes = []
    for name, record in _live_topics(snapshot):
        for p in sorted(record.states):
            state = record.states[p]
            if state.leader != broker_id or len(state.replicas) <= 1:
                continue
            leader, _ = elect_leader(state.replicas, state.isr, eligible)
            if leader != NO_LEADER:
                changes.append(PartitionChange(
                    name, with_leader(state, leader, state.isr, controller_epoch), record.state_versions[p],
                    f"{name}-{p}: broker {broker_id} is in maintenance: leadership moves to {leader}"))
    return changes


def preferred_of(snapshot: StoreSnapshot, broker_id: int) -> list[tuple[str, int]]:
    """Partitions whose preferred (first) replica is ``broker_id`` and that someone else leads."""
    return [(name, p) for name, record in _live_topics(snapshot) for p in sorted(record.states)
            if record.states[p].replicas[:1] == (broker_id,) and record.states[p].leader != broker_id]


def remaining_leaderships(snapshot: StoreSnapshot, broker_id: int) -> list[tuple[str, int]]:
    """Partitions with more than one replica that ``broker_id`` still leads (Kafka leaves
    single-replica partitions out: nobody could take them over)."""
    return [(name, p) for name, record in _live_topics(snapshot) for p in sorted(record.states)
            if record.states[p].leader == broker_id and len(record.states[p].replicas) > 1]


def _live_topics(snapshot: StoreSnapshot) -> list[tuple[str, TopicRecord]]:
    return [(n, snapshot.topics[n]) for n in sorted(snapshot.topics)
            if n not in snapshot.pending_deletions and snapshot.topics[n].complete()]


# --- elections on request and the automatic rebalance ---------------------------------------------
def elect_leaders(snapshot: StoreSnapshot, election_type: int,
                  partitions: list[tuple[str, int]] | None, shutting_down: Iterable[int],
                  controller_epoch: int) -> tuple[list[PartitionResult], list[PartitionChange]]:
    """Kafka's ElectLeaders. Preferred: the first replica of the assignment becomes leader if it
    is eligible and in the ISR (ISR kept); ELECTION_NOT_NEEDED if it leads already,
    PREFERRED_LEADER_NOT_AVAILABLE otherwise. Unclean: only for partitions without a leader:
    the first eligible ISR member, else the first eligible replica (ISR = [it]);
    ELECTION_NOT_NEEDED for a partition that has a leader, ELIGIBLE_LEADERS_NOT_AVAILABLE with
    no eligible replica. ``partitions`` None means every partition, and then the results leave
    out ELECTION_NOT_NEEDED (as Kafka does). Successful results carry error NONE."""
    if election_type not in (PREFERRED, UNCLEAN):
        raise KafkaError(ErrorCode.invalid_request,
                         f"Unknown election type {election_type}: 0 (preferred) or 1 (unclean).")
    eligible = eligible_ids(snapshot, shutting_down)
    every = partitions is None
    if every:
        partitions = [(n, p) for n, record in _live_topics(snapshot) for p in sorted(record.states)]
    results, changes = [], []
    for topic, p in dict.fromkeys(partitions):
        try:
            record = _record(snapshot, topic, p)
        except KafkaError as e:
            results.append(PartitionResult(topic, p, e.code, e.message))
            continue
        state = record.states[p]
        if election_type == PREFERRED:
            error, message, change = _preferred(topic, record, state, eligible - snapshot.maintenance,
                                                controller_epoch)
        else:
            error, message, change = _unclean(topic, record, state, eligible, controller_epoch, snapshot.maintenance)
        if change is not None:
            changes.append(change)
        if not (every and error == ErrorCode.election_not_needed):
            results.append(PartitionResult(topic, p, error, message))
    return results, changes


def _preferred(topic: str, record: TopicRecord, state: PartitionState, eligible: frozenset[int],
               controller_epoch: int) -> tuple[ErrorCode, str | None, PartitionChange | None]:
    preferred = state.replicas[0]
    if state.leader == preferred:
        return ErrorCode.election_not_needed, f"Leader {preferred} is already the preferred replica.", None
    if preferred not in eligible or preferred not in state.isr:
        return (ErrorCode.preferred_leader_not_available,
                f"Failed to elect leader for partition {topic}-{state.partition} under strategy "
                f"PreferredReplicaPartitionLeaderElectionStrategy: preferred replica {preferred} is "
                f"{'not live or in maintenance' if preferred not in eligible else 'not in the ISR'}.", None)
    new = with_leader(state, preferred, state.isr, controller_epoch)
    return ErrorCode.none, None, PartitionChange(
        topic, new, record.state_versions[state.partition],
        f"{topic}-{state.partition}: preferred replica {preferred} takes the leadership back from {state.leader}")


def _unclean(topic: str, record: TopicRecord, state: PartitionState, eligible: frozenset[int],
             controller_epoch: int, avoid: frozenset[int]) -> tuple[ErrorCode, str | None, PartitionChange | None]:
    if state.leader != NO_LEADER:
        return ErrorCode.election_not_needed, f"Partition has leader {state.leader}.", None
    leader, why = elect_leader(state.replicas, state.isr, eligible, unclean=True, avoid=avoid)
    if leader == NO_LEADER:
        return (ErrorCode.eligible_leaders_not_available,
                f"Failed to elect leader for partition {topic}-{state.partition} under strategy "
                f"OfflinePartitionLeaderElectionStrategy: no replica of {list(state.replicas)} is live.", None)
    isr = tuple(r for r in state.isr if r in eligible) if leader in state.isr else (leader,)
    new = with_leader(state, leader, isr, controller_epoch)
    return ErrorCode.none, None, PartitionChange(topic, new, record.state_versions[state.partition],
                                             f"{topic}-{state.partition}: elect-leaders: {why}")


def rebalance_candidates(snapshot: StoreSnapshot, shutting_down: Iterable[int],
                         imbalance_percentage: float) -> list[tuple[str, int]]:
    """Kafka's auto leader rebalance: group partitions by preferred replica; for a broker whose
    share of such partitions it does not lead exceeds the percentage, the partitions where it
    can lead again (eligible, in the ISR). Topics being deleted and partitions being
    reassigned are left alone."""
    eligible = eligible_ids(snapshot, shutting_down) - snapshot.maintenance
    by_preferred: dict[int, list[tuple[str, int, PartitionState]]] = {}
    for name, record in _live_topics(snapshot):
        for p in sorted(record.states):
            if not record.reassigning(p):
                state = record.states[p]
                by_preferred.setdefault(state.replicas[0], []).append((name, p, state))
    candidates = []
    for broker, owned in sorted(by_preferred.items()):
        elsewhere = [(n, p, s) for n, p, s in owned if s.leader != broker]
        if len(elsewhere) / len(owned) > imbalance_percentage / 100:
            candidates += [(n, p) for n, p, s in elsewhere if broker in eligible and broker in s.isr]
    return candidates


def under_replicated(snapshot: StoreSnapshot) -> int:
    """Partitions whose ISR is smaller than their assignment (offline ones included)."""
    return sum(1 for _, record in _live_topics(snapshot) for s in record.states.values()
               if len(s.isr) < len(s.replicas))


def offline(snapshot: StoreSnapshot) -> int:
    return sum(1 for _, record in _live_topics(snapshot) for s in record.states.values()
               if s.leader == NO_LEADER)
