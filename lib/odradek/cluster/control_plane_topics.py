"""The control-plane bodies of the controller's state and topic routes (``control_plane``'s
``HEALTH``, ``CLUSTER``, ``CREATE_TOPIC``, ``DELETE_TOPIC``, ``CREATE_PARTITIONS``,
``ALTER_CONFIGS``): frozen dataclasses with ``to_json``/``from_json``; a request's ``from_json``
raises INVALID_REQUEST. Part of ``control_plane``'s contract (which re-exports every name here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from odradek.cluster.control_plane_base import _bad, _configs, _field, _int
from odradek.cluster.model import ClusterMetadata


@dataclass(frozen=True, slots=True)
class Health:
    """Any instance's answer (never NOT_CONTROLLER); the counts are None on a standby."""

    id: str
    url: str
    active: bool
    epoch: int | None
    under_replicated_partitions: int | None = None
    offline_partitions: int | None = None
    shutting_down_brokers: tuple[int, ...] | None = None

    def to_json(self) -> dict:
        return {"id": self.id, "url": self.url, "active": self.active, "epoch": self.epoch,
                "under_replicated_partitions": self.under_replicated_partitions,
                "offline_partitions": self.offline_partitions,
                "shutting_down_brokers": None if self.shutting_down_brokers is None
                else list(self.shutting_down_brokers)}

    @classmethod
    def from_json(cls, d: Mapping) -> "Health":
        down = d.get("shutting_down_brokers")
        return cls(d["id"], d["url"], bool(d["active"]), d.get("epoch"), d.get("under_replicated_partitions"),
                   d.get("offline_partitions"), None if down is None else tuple(down))


@dataclass(frozen=True, slots=True)
class ClusterView:
    """The active controller's snapshot plus its under-replicated count (not pushed to brokers)."""

    metadata: ClusterMetadata
    under_replicated_partitions: int

    def to_json(self) -> dict:
        return {**self.metadata.to_json(), "under_replicated_partitions": self.under_replicated_partitions}

    @classmethod
    def from_json(cls, d: Mapping) -> "ClusterView":
        return cls(ClusterMetadata.from_json(d), int(d.get("under_replicated_partitions", 0)))


# Kafka's controller refuses a CreateTopics request asking for more partitions than this in all
# (POLICY_VIOLATION with this message, before any other check): the broker sums a request's
# topics, the controller checks each topic it is asked to create.
MAX_PARTITIONS_PER_REQUEST = 10_000
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."


@dataclass(frozen=True, slots=True)
class CreateTopic:
    """-1 partitions / replication factor: the controller's defaults."""

    name: str
    partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, tuple[int, ...]] | None = None
    configs: Mapping[str, str | None] | None = None
    validate_only: bool = False

    def to_json(self) -> dict:
        return {"name": self.name, "partitions": self.partitions, "replication_factor": self.replication_factor,
                "assignments": None if self.assignments is None
                else {str(p): list(r) for p, r in self.assignments.items()},
                "configs": dict(self.configs or {}), "validate_only": self.validate_only}

    @classmethod
    def from_json(cls, body: Mapping) -> "CreateTopic":
        assignments = _field(body, "assignments", dict, None, nullable=True)
        parsed = None
        if assignments:
            try:
                parsed = {int(p): tuple(_int(r) for r in replicas) for p, replicas in assignments.items()}
            except (TypeError, ValueError):
                raise _bad("'assignments' must map partition numbers to lists of broker ids") from None
        return cls(name=_field(body, "name", str), partitions=_field(body, "partitions", int, -1),
                   replication_factor=_field(body, "replication_factor", int, -1), assignments=parsed,
                   configs=_configs(_field(body, "configs", dict, {}, nullable=True), "configs"),
                   validate_only=_field(body, "validate_only", bool, False))


@dataclass(frozen=True, slots=True)
class DeletedTopic:
    name: str

    def to_json(self) -> dict:
        return {"name": self.name}

    @classmethod
    def from_json(cls, d: Mapping) -> "DeletedTopic":
        return cls(d["name"])


@dataclass(frozen=True, slots=True)
class CreatePartitions:
    count: int
    validate_only: bool = False

    def to_json(self) -> dict:
        return {"count": self.count, "validate_only": self.validate_only}

    @classmethod
    def from_json(cls, body: Mapping) -> "CreatePartitions":
        return cls(_field(body, "count", int), _field(body, "validate_only", bool, False))


@dataclass(frozen=True, slots=True)
class AlterConfigs:
    """Incremental: ``set_configs`` overrides to write, ``delete_configs`` overrides to remove."""

    set_configs: Mapping[str, str | None] = field(default_factory=dict)
    delete_configs: tuple[str, ...] = ()
    validate_only: bool = False

    def to_json(self) -> dict:
        return {"set": dict(self.set_configs), "delete": list(self.delete_configs),
                "validate_only": self.validate_only}

    @classmethod
    def from_json(cls, body: Mapping) -> "AlterConfigs":
        delete = _field(body, "delete", list, [], nullable=True)
        if not all(isinstance(k, str) for k in delete):
            raise _bad("'delete' must be a list of config names")
        return cls(_configs(_field(body, "set", dict, {}, nullable=True), "set"), tuple(delete),
                   _field(body, "validate_only", bool, False))


@dataclass(frozen=True, slots=True)
class TopicConfigs:
    """The topic's config overrides after an AlterConfigs."""

    configs: Mapping[str, str]

    def to_json(self) -> dict:
        return {"configs": dict(self.configs)}

    @classmethod
    def from_json(cls, d: Mapping) -> "TopicConfigs":
        return cls(dict(d["configs"]))
