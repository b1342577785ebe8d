"""The control-plane bodies of the controller's replication routes (``control_plane``'s
``ALTER_PARTITION(S)``, ``CONTROLLED_SHUTDOWN``, ``PRODUCER_IDS``, ``ELECT_LEADERS``,
``REASSIGN``, ``LIST_REASSIGNMENTS``, the ``*MAINTENANCE`` routes): frozen dataclasses (or NamedTuples) with
``to_json``/``from_json``; a request's ``from_json`` raises INVALID_REQUEST. Part of
``control_plane``'s contract (which re-exports every name here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, NamedTuple

from odradek.cluster.control_plane_base import TopicPartition, _bad, _field, _ids
from odradek.cluster.model import PartitionState
from odradek.errors import ErrorCode, error_name


@dataclass(frozen=True, slots=True)
class AlterPartition:
    """A leader's ISR change, based on the leader and partition epochs it knows."""

    broker_id: int
    broker_epoch: int  # czxid of the leader's registration; -1 = not checked
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]

    def to_json(self) -> dict:
        return {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch, "topic": self.topic,
                "partition": self.partition, "leader_epoch": self.leader_epoch,
                "partition_epoch": self.partition_epoch, "isr": list(self.isr)}

    @classmethod
    def from_json(cls, body: Mapping) -> "AlterPartition":
        isr = _ids(_field(body, "isr", list), "'isr' must be a list of broker ids")
        return cls(_field(body, "broker_id", int), _field(body, "broker_epoch", int, -1),
                   _field(body, "topic", str), _field(body, "partition", int),
                   _field(body, "leader_epoch", int), _field(body, "partition_epoch", int), isr)


MAX_ALTER_PARTITIONS = 2_000  # per request: ~250 KB, well inside the server's 1 MiB body limit


@dataclass(frozen=True, slots=True)
class AlterPartitions:
    """A leader's ISR changes for many partitions at once (Kafka's AlterPartition request):
    one broker id and epoch, then per partition what ``AlterPartition`` carries."""

    broker_id: int
    broker_epoch: int  # -1 = not checked
    partitions: tuple[AlterPartition, ...]

    def to_json(self) -> dict:
        return {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch,
                "partitions": [{"topic": a.topic, "partition": a.partition, "leader_epoch": a.leader_epoch,
                                "partition_epoch": a.partition_epoch, "isr": list(a.isr)}
                               for a in self.partitions]}

    @classmethod
    def from_json(cls, body: Mapping) -> "AlterPartitions":
        broker_id, broker_epoch = _field(body, "broker_id", int), _field(body, "broker_epoch", int, -1)
        entries = _field(body, "partitions", list)
        if len(entries) > MAX_ALTER_PARTITIONS:
            raise _bad(f"at most {MAX_ALTER_PARTITIONS} partitions per request, got {len(entries)}")
        if not all(isinstance(e, dict) for e in entries):
            raise _bad("each of 'partitions' must be an object")
        return cls(broker_id, broker_epoch, tuple(
            AlterPartition.from_json({**e, "broker_id": broker_id, "broker_epoch": broker_epoch}) for e in entries))


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    """One partition's outcome: its state after the change, or the error refusing it."""

    topic: str
    partition: int
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    state: PartitionState | None = None

    def to_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "error_code": int(self.error),
                "error": error_name(self.error), "message": self.message,
                "state": None if self.state is None else self.state.to_json()}

    @classmethod
    def from_json(cls, d: Mapping) -> "AlterPartitionResult":
        state = d.get("state")
        return cls(d["topic"], int(d["partition"]), ErrorCode(int(d["error_code"])), d.get("message"),
                   None if state is None else PartitionState.from_json(state))


@dataclass(frozen=True, slots=True)
class AlterPartitionResults:
    results: tuple[AlterPartitionResult, ...]

    def to_json(self) -> dict:
        return {"results": [r.to_json() for r in self.results]}

    @classmethod
    def from_json(cls, d: Mapping) -> "AlterPartitionResults":
        return cls(tuple(AlterPartitionResult.from_json(r) for r in d["results"]))


@dataclass(frozen=True, slots=True)
class ControlledShutdown:
    broker_epoch: int = -1  # -1 = not checked

    def to_json(self) -> dict:
        return {"broker_epoch": self.broker_epoch}

    @classmethod
    def from_json(cls, body: Mapping) -> "ControlledShutdown":
        return cls(_field(body, "broker_epoch", int, -1))


@dataclass(frozen=True, slots=True)
class RemainingLeaderships:
    """Partitions with other replicas that the broker still leads: it retries until none."""

    remaining_leaderships: tuple[TopicPartition, ...]

    def to_json(self) -> dict:
        return {"remaining_leaderships": [tp.to_json() for tp in self.remaining_leaderships]}

    @classmethod
    def from_json(cls, d: Mapping) -> "RemainingLeaderships":
        return cls(tuple(TopicPartition(e["topic"], int(e["partition"])) for e in d["remaining_leaderships"]))


@dataclass(frozen=True, slots=True)
class Maintenance:
    """A broker's maintenance mode (Redpanda's ``rpk cluster maintenance``): the answer of its
    three routes. ``leaders``: partitions with other replicas that it still leads (as controlled
    shutdown counts them; 0 once draining is done, while in maintenance)."""

    broker: int
    maintenance: bool
    leaders: int

    def to_json(self) -> dict:
        return {"broker": self.broker, "maintenance": self.maintenance, "leaders": self.leaders}

    @classmethod
    def from_json(cls, d: Mapping) -> "Maintenance":
        return cls(int(d["broker"]), bool(d["maintenance"]), int(d["leaders"]))


@dataclass(frozen=True, slots=True)
class ProducerIds:
    broker_id: int

    def to_json(self) -> dict:
        return {"broker_id": self.broker_id}

    @classmethod
    def from_json(cls, body: Mapping) -> "ProducerIds":
        return cls(_field(body, "broker_id", int))


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Producer ids ``block_start`` .. ``block_end`` (inclusive), reserved for ``broker``."""

    broker: int
    block_start: int
    block_end: int

    def to_json(self) -> dict:
        return {"broker": self.broker, "block_start": self.block_start, "block_end": self.block_end}

    @classmethod
    def from_json(cls, d: Mapping) -> "ProducerIdBlock":
        return cls(int(d["broker"]), int(d["block_start"]), int(d["block_end"]))


@dataclass(frozen=True, slots=True)
class ElectLeaders:
    election_type: int  # 0 preferred, 1 unclean
    partitions: tuple[TopicPartition, ...] | None = None  # None: every partition

    def to_json(self) -> dict:
        return {"election_type": self.election_type,
                "partitions": None if self.partitions is None else [tp.to_json() for tp in self.partitions]}

    @classmethod
    def from_json(cls, body: Mapping) -> "ElectLeaders":
        partitions = _field(body, "partitions", list, None, nullable=True)
        return cls(_field(body, "election_type", int),
                   None if partitions is None else tuple(TopicPartition.from_json(e) for e in partitions))


class Reassignment(NamedTuple):
    topic: str
    partition: int
    replicas: tuple[int, ...] | None  # None cancels

    def to_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition,
                "replicas": None if self.replicas is None else list(self.replicas)}


@dataclass(frozen=True, slots=True)
class Reassign:
    reassignments: tuple[Reassignment, ...]

    def to_json(self) -> dict:
        return {"reassignments": [r.to_json() for r in self.reassignments]}

    @classmethod
    def from_json(cls, body: Mapping) -> "Reassign":
        entries = []
        for e in _field(body, "reassignments", list):
            topic, partition = TopicPartition.from_json(e, "reassignments")
            if "replicas" not in e:
                raise _bad("each reassignment needs 'replicas' (a list of broker ids, or null to cancel)")
            replicas = e["replicas"]
            entries.append(Reassignment(topic, partition, None if replicas is None else
                                        _ids(replicas, "'replicas' must be a list of broker ids or null")))
        keys = [(t, p) for t, p, _ in entries]
        if len(set(keys)) != len(keys):
            raise _bad("a partition appears more than once in 'reassignments'")
        return cls(tuple(entries))


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]

    def to_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "replicas": list(self.replicas),
                "adding_replicas": list(self.adding_replicas), "removing_replicas": list(self.removing_replicas)}

    @classmethod
    def from_json(cls, d: Mapping) -> "OngoingReassignment":
        return cls(d["topic"], int(d["partition"]), tuple(d["replicas"]), tuple(d["adding_replicas"]),
                   tuple(d["removing_replicas"]))


@dataclass(frozen=True, slots=True)
class Reassignments:
    reassignments: tuple[OngoingReassignment, ...]

    def to_json(self) -> dict:
        return {"reassignments": [r.to_json() for r in self.reassignments]}

    @classmethod
    def from_json(cls, d: Mapping) -> "Reassignments":
        return cls(tuple(OngoingReassignment.from_json(r) for r in d["reassignments"]))
