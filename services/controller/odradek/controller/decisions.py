"""The controller loop's decisions: pure functions over a ``StoreSnapshot``, each with a reason.

Owns: what the active controller must write after a change (partition leaders and ISRs
over the live brokers, less those whose log directory is offline), which log directory
events are handled, which topic deletions are pending, and the ``ClusterMetadata``
snapshot that brokers receive (topics queued for deletion and incomplete ones left out).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterable, Sequence

from odradek.cluster.model import ClusterMetadata, PartitionState
from odradek.config import TOPIC_CONFIGS

from . import placement
from .store import ControllerRecord, StoreSnapshot

UNCLEAN = "unclean.leader.election.enable"
BROKER_UNCLEAN = TOPIC_CONFIGS[UNCLEAN].broker_name  # the dynamic cluster default's name


@dataclass(frozen=True, slots=True)
class PartitionChange:
    topic: str
    state: PartitionState
    version: int  # the state znode's version the CAS expects
    reason: str


def partition_changes(snapshot: StoreSnapshot, controller_epoch: int,
                      shutting_down: Iterable[int] = ()) -> list[PartitionChange]:
    """Leader elections and ISR shrinks the registered broker set calls for (brokers shutting
    down are registered but not elected, brokers in maintenance only as a last resort; a broker
    whose log directory went offline in its current registration counts as dead: its replicas
    are offline, as Kafka's controller treats them after a log directory event)."""
    live = set(snapshot.live_ids) - snapshot.offline_dir_ids
    changes = []
    for name in sorted(snapshot.topics):
        if name in snapshot.pending_deletions:
            continue
        record = snapshot.topics[name]
        unclean = snapshot.topic_config(record, UNCLEAN, BROKER_UNCLEAN, "false").lower() == "true"
        for p in sorted(record.states):
            new, reason = placement.reconcile_partition(record.states[p], live, controller_epoch, unclean,
                                                        shutting_down, snapshot.maintenance)
            if new is not None:
                changes.append(PartitionChange(name, new, record.state_versions[p], f"{name}-{p}: {reason}"))
    return changes


def with_changes(snapshot: StoreSnapshot, changes: Sequence[PartitionChange]) -> StoreSnapshot:
    """The snapshot once ``changes`` were written (each state znode's version +1): one copy per
    topic touched and one of the topic map, however many partitions changed."""
    by_topic: dict[str, list[PartitionChange]] = {}
    for change in changes:
        by_topic.setdefault(change.topic, []).append(change)
    topics = dict(snapshot.topics)
    for name, mine in by_topic.items():
        record = topics[name]
        states, versions = dict(record.states), dict(record.state_versions)
        for change in mine:
            p = change.state.partition
            states[p] = dataclasses.replace(change.state, partition_epoch=change.version + 1)
            versions[p] = change.version + 1
        topics[name] = dataclasses.replace(record, states=states, state_versions=versions)
    return dataclasses.replace(snapshot, topics=topics)


def handled_log_dir_events(snapshot: StoreSnapshot) -> list[str]:
    """Log directory events that no longer matter: their broker's registration is gone or
    newer (it restarted with its directory back), so the znodes can go."""
    current = {(b.id, b.epoch) for b in snapshot.brokers}
    return sorted(name for name, event in snapshot.log_dir_events.items() if event not in current)


def still_controller(snapshot: StoreSnapshot, mine: ControllerRecord) -> tuple[bool, str]:
    """Whether ``/controller`` still names us (it goes with our ZooKeeper session)."""
    if snapshot.controller == mine:
        return True, f"/controller still names {mine.id} at epoch {mine.epoch}"
    if snapshot.controller is None:
        return False, "/controller is gone (our ZooKeeper session ended)"
    return False, (f"/controller names {snapshot.controller.id} at epoch {snapshot.controller.epoch}, "
                   f"not us ({mine.id} at epoch {mine.epoch})")


def should_contend(current: ControllerRecord | None, my_id: str) -> tuple[bool, str]:
    if current is None:
        return True, "no active controller"
    return False, f"controller {current.id} is active at epoch {current.epoch}"


def cluster_metadata(snapshot: StoreSnapshot, controller: ControllerRecord) -> ClusterMetadata:
    topics = tuple(snapshot.topics[n].metadata() for n in sorted(snapshot.topics)
                   if n not in snapshot.pending_deletions and snapshot.topics[n].complete())
    return ClusterMetadata(snapshot.cluster_id, controller.id, controller.epoch, snapshot.brokers, topics)
