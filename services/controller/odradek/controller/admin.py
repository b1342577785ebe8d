"""Topic admin decisions: pure functions from a request and a store snapshot to what to write.

Owns: Kafka's validation order and error codes for CreateTopics, CreatePartitions,
IncrementalAlterConfigs and DeleteTopics (raised as ``KafkaError``) and applying the defaults
for ``-1`` partitions / replication factor (``ControllerConfig``). The replication factor ranges over 1..live brokers
(``placement.assign_replicas`` says "larger than available brokers"). The service executes
the plans against the store; nothing here does I/O.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from typing import Mapping

from odradek.cluster.control_plane import MAX_PARTITIONS_PER_REQUEST, TOO_MANY_PARTITIONS, CreateTopic
from odradek.cluster.model import PartitionState
from odradek.config import TOPIC_CONFIGS, validate_topic_configs
from odradek.config.topic import KAFKA_ONLY_TOPIC_CONFIGS, check_remote_storage
from odradek.errors import ErrorCode, KafkaError
from odradek import topics

from . import placement
from .config import ControllerConfig
from .store import StoreSnapshot, TopicRecord

# Kafka's controller refuses an operation producing more records than one batch holds (10,000)
# with POLICY_VIOLATION and this message; the ZooKeeper store's own bound is smaller (zkstore).
TOO_LARGE_BATCH = "Unable to perform excessively large batch operation."


@dataclass(frozen=True, slots=True)
class TopicPlan:
    """A topic to create: its id, the first state of every partition, its config overrides."""

    name: str
    topic_id: str
    states: Mapping[int, PartitionState]
    configs: Mapping[str, str]


def _existing(snapshot: StoreSnapshot, name: str) -> TopicRecord:
    record = snapshot.topics.get(name)
    if record is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition,
                         f"This server does not host this topic-partition: topic {name} does not exist.")
    return record


def _not_being_deleted(snapshot: StoreSnapshot, name: str) -> None:
    if name in snapshot.pending_deletions:
        raise KafkaError(ErrorCode.invalid_topic_exception, f"The topic {name} is queued for deletion.")


def plan_create(req: CreateTopic, snapshot: StoreSnapshot, defaults: ControllerConfig,
                controller_epoch: int) -> TopicPlan:
    """``defaults``: ``num.partitions`` and ``default.replication.factor`` for -1."""
    asked = len(req.assignments) if req.assignments else defaults.num_partitions if req.partitions == -1 \
        else req.partitions
    if asked > MAX_PARTITIONS_PER_REQUEST:
        raise KafkaError(ErrorCode.policy_violation, TOO_MANY_PARTITIONS)
    topics.validate_name(req.name)
    if req.name in snapshot.topics:
        suffix = " and is marked for deletion" if req.name in snapshot.pending_deletions else ""
        raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{req.name}' already exists{suffix}.")
    other = topics.colliding_topic(req.name, snapshot.topics)
    if other is not None:
        raise KafkaError(ErrorCode.invalid_topic_exception,
                         f"Topic '{req.name}' collides with existing topic: {other}")
    live = snapshot.live_ids
    if req.assignments:
        assignment = _checked_assignment(req, live)
    else:
        partitions = defaults.num_partitions if req.partitions == -1 else req.partitions
        rf = defaults.default_replication_factor if req.replication_factor == -1 else req.replication_factor
        if partitions <= 0:
            raise KafkaError(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
        if rf <= 0:
            raise KafkaError(ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0.")
        assignment = placement.assign_replicas(partitions, rf, live, placement.start_offset(req.name, len(live)),
                                               racks=_racks(snapshot))
    configs = validate_topic_configs(req.configs or {})
    states = {p: placement.initial_state(p, replicas, controller_epoch, snapshot.maintenance)
              for p, replicas in assignment.items()}
    return TopicPlan(req.name, str(uuid.uuid4()), states, configs)


def _racks(snapshot: StoreSnapshot) -> dict[int, str | None]:
    return {b.id: b.rack for b in snapshot.brokers}


def with_created(snapshot: StoreSnapshot, plan: TopicPlan) -> StoreSnapshot:
    """The snapshot once ``plan`` was written (every new znode at version 0): creating topic
    after topic patches the cache instead of reading every topic back from the store."""
    record = TopicRecord(plan.name, plan.topic_id, {p: s.replicas for p, s in plan.states.items()}, 0,
                         dict(plan.states), {p: 0 for p in plan.states}, dict(plan.configs), 0)
    return dataclasses.replace(snapshot, topics={**snapshot.topics, plan.name: record})


def _checked_assignment(req: CreateTopic, live: tuple[int, ...]) -> dict[int, tuple[int, ...]]:
    if req.partitions != -1 or req.replication_factor != -1:
        raise KafkaError(ErrorCode.invalid_request,
                         "Both numPartitions or replicationFactor and replicasAssignments were set. "
                         "Both cannot be used at the same time.")
    assignment = {int(p): tuple(r) for p, r in req.assignments.items()}
    if sorted(assignment) != list(range(len(assignment))):
        raise KafkaError(ErrorCode.invalid_replica_assignment,
                         "Partitions should be a consecutive 0-based integer sequence")
    sizes = {len(r) for r in assignment.values()}
    if 0 in sizes or len(sizes) != 1:
        raise KafkaError(ErrorCode.invalid_replica_assignment,
                         "All partitions should have the same number of replicas, at least one")
    for p, replicas in assignment.items():
        if len(set(replicas)) != len(replicas):
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"Duplicate brokers not allowed in replica assignment: {list(replicas)} "
                             f"for partition id {p}.")
        unknown = [r for r in replicas if r not in live]
        if unknown:
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"Unknown broker(s) {unknown} in replica assignment of partition {p}.")
    return assignment


def plan_partitions(snapshot: StoreSnapshot, name: str, count: int,
                    controller_epoch: int) -> tuple[TopicRecord, dict[int, PartitionState]]:
    """New partitions ``current .. count-1`` placed by the topic's own rotation."""
    record = _existing(snapshot, name)
    _not_being_deleted(snapshot, name)
    current = len(record.assignment)
    if count < current:
        raise KafkaError(ErrorCode.invalid_partitions,
                         f"The topic {name} currently has {current} partition(s); {count} would not be an "
                         f"increase.")
    if count == current:
        raise KafkaError(ErrorCode.invalid_partitions, f"Topic already has {current} partition(s).")
    if count - current > MAX_PARTITIONS_PER_REQUEST:
        raise KafkaError(ErrorCode.policy_violation, TOO_LARGE_BATCH)
    rf = len(record.target(0))  # a running reassignment counts by its target
    live = snapshot.live_ids
    racks = _racks(snapshot)
    new = placement.assign_replicas(count, rf, live, placement.increase_start(record.assignment, live, racks),
                                    first_partition=current, racks=racks)
    return record, {p: placement.initial_state(p, r, controller_epoch, snapshot.maintenance) for p, r in new.items()}


def plan_configs(snapshot: StoreSnapshot, name: str, set_: Mapping[str, str | None],
                 delete: list[str]) -> tuple[TopicRecord, dict[str, str]]:
    """The topic's overrides after an incremental alter (SET and DELETE operations)."""
    record = _existing(snapshot, name)
    _not_being_deleted(snapshot, name)
    both = set(set_) & set(delete)
    if both:
        raise KafkaError(ErrorCode.invalid_request,
                         f"Error due to duplicate config keys: {', '.join(sorted(both))}")
    validated = validate_topic_configs(set_)
    unknown = [k for k in delete if k not in TOPIC_CONFIGS and k not in KAFKA_ONLY_TOPIC_CONFIGS]
    if unknown:
        raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {unknown[0]}")
    configs = {k: v for k, v in record.configs.items() if k not in delete}
    configs.update(validated)
    check_remote_storage(configs)  # the request's keys against those it leaves as they are
    return record, configs


def check_deletable(snapshot: StoreSnapshot, name: str) -> None:
    _existing(snapshot, name)
