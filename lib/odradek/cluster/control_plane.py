"""The control-plane contract: every route and body of the internal HTTP API
(``/internal/v1``, docs/control-plane.md), stated once for the servers and all their callers.

Owns: the route table (``Route``: method, aiohttp-style path template, the decoder of its
answer), one builder per call returning a ``Request`` (route, path, JSON body) that a client
sends and whose answer ``Request.decode`` turns into a model, and the request and answer
models: frozen dataclasses (or NamedTuples) with ``to_json``/``from_json``. A request model's
``from_json`` checks the body as the server needs it and raises INVALID_REQUEST; answers are
trusted. No I/O here: ``control_plane_http`` opens the connections.

Error bodies of every route are ``KafkaError.to_json()``.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Mapping, NamedTuple, TypeVar

from odradek.cluster.model import ClusterMetadata, PartitionState, TopicMetadata
from odradek.errors import ErrorCode, KafkaError, error_name

A = TypeVar("A")
PREFIX = "/internal/v1"


# --- routes ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Route(Generic[A]):
    method: str
    template: str  # path with ``{param}`` placeholders, as aiohttp's router reads it
    answer: Callable[[Any], A]

    def path(self, **params: object) -> str:
        return self.template.format(**{k: urllib.parse.quote(str(v), safe="") for k, v in params.items()})


@dataclass(frozen=True, slots=True)
class Request(Generic[A]):
    """One call, ready to send: ``method`` and ``path`` (to join to a base URL) and ``body``."""

    route: Route[A]
    path: str
    body: dict | None = None

    @property
    def method(self) -> str:
        return self.route.method

    def decode(self, payload: Any) -> A:
        return self.route.answer(payload)


def _bad(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, message)


def _field(body: Mapping, name: str, kind: type, default: Any = ..., nullable: bool = False) -> Any:
    if name not in body:
        if default is ...:
            raise _bad(f"missing field '{name}'")
        return default
    value = body[name]
    if value is None and nullable:
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _bad(f"field '{name}' must be {kind.__name__}")
    return value


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(value)
    return value


def _ids(value: Any, message: str) -> tuple[int, ...]:
    try:
        return tuple(_int(r) for r in value)
    except TypeError:
        raise _bad(message) from None


def _configs(value: Mapping, what: str) -> dict[str, str | None]:
    if not all(isinstance(k, str) and (v is None or isinstance(v, (str, int, float, bool)))
               for k, v in value.items()):
        raise _bad(f"'{what}' must map config names to string values")
    return {k: (None if v is None else str(v).lower() if isinstance(v, bool) else str(v))
            for k, v in value.items()}


# --- models shared by several routes ------------------------------------------------------------
class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def to_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition}

    @classmethod
    def from_json(cls, entry: Any, what: str = "partitions") -> "TopicPartition":
        if not isinstance(entry, dict):
            raise _bad(f"each of '{what}' must be an object with 'topic' and 'partition'")
        return cls(_field(entry, "topic", str), _field(entry, "partition", int))


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """One partition's outcome of an election or reassignment request (NONE on success)."""

    topic: str
    partition: int
    error: ErrorCode
    message: str | None = None

    def to_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "error_code": int(self.error),
                "error": error_name(self.error), "message": self.message}

    @classmethod
    def from_json(cls, d: Mapping) -> "PartitionResult":
        return cls(d["topic"], int(d["partition"]), ErrorCode(int(d["error_code"])), d.get("message"))


@dataclass(frozen=True, slots=True)
class PartitionResults:
    results: tuple[PartitionResult, ...]

    def to_json(self) -> dict:
        return {"results": [r.to_json() for r in self.results]}

    @classmethod
    def from_json(cls, d: Mapping) -> "PartitionResults":
        return cls(tuple(PartitionResult.from_json(r) for r in d["results"]))


# --- controller: state and topics ---------------------------------------------------------------
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


# --- controller: replication -----------------------------------------------------------------
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


# --- broker ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Accepted:
    """A broker's answer to a snapshot it took (a stale one gets 409 STALE_CONTROLLER_EPOCH)."""

    accepted: bool = True

    def to_json(self) -> dict:
        return {"accepted": self.accepted}

    @classmethod
    def from_json(cls, d: Mapping) -> "Accepted":
        return cls(bool(d["accepted"]))


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    """One log a broker hosts; the role fields are None for a log the snapshot does not place."""

    topic: str
    partition: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    role: str | None  # "leader", "follower"
    leader_epoch: int | None
    isr: tuple[int, ...] | None
    fetching_from: int | None  # the leader this follower fetches from
    leader_epochs: tuple[tuple[int, int], ...]  # (epoch, start offset)

    def to_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "log_start_offset": self.log_start_offset,
                "log_end_offset": self.log_end_offset, "high_watermark": self.high_watermark,
                "role": self.role, "leader_epoch": self.leader_epoch,
                "isr": None if self.isr is None else list(self.isr), "fetching_from": self.fetching_from,
                "leader_epochs": [list(e) for e in self.leader_epochs]}

    @classmethod
    def from_json(cls, d: Mapping) -> "ReplicaStatus":
        return cls(d["topic"], d["partition"], d["log_start_offset"], d["log_end_offset"], d["high_watermark"],
                   d["role"], d["leader_epoch"], None if d["isr"] is None else tuple(d["isr"]),
                   d["fetching_from"], tuple(tuple(e) for e in d["leader_epochs"]))


@dataclass(frozen=True, slots=True)
class BrokerStatus:
    broker_id: int
    kafka_port: int
    controller_epoch: int | None  # of the newest snapshot taken; None before the first
    partitions: tuple[ReplicaStatus, ...]

    def to_json(self) -> dict:
        return {"broker_id": self.broker_id, "kafka_port": self.kafka_port,
                "controller_epoch": self.controller_epoch, "partitions": [p.to_json() for p in self.partitions]}

    @classmethod
    def from_json(cls, d: Mapping) -> "BrokerStatus":
        return cls(d["broker_id"], d["kafka_port"], d["controller_epoch"],
                   tuple(ReplicaStatus.from_json(p) for p in d["partitions"]))


# --- the route table -----------------------------------------------------------------------------
# The controller's routes (every instance serves them; only the active one acts)...
HEALTH = Route("GET", PREFIX + "/health", Health.from_json)
CLUSTER = Route("GET", PREFIX + "/cluster", ClusterView.from_json)
CREATE_TOPIC = Route("POST", PREFIX + "/topics", TopicMetadata.from_json)
DELETE_TOPIC = Route("DELETE", PREFIX + "/topics/{name}", DeletedTopic.from_json)
CREATE_PARTITIONS = Route("POST", PREFIX + "/topics/{name}/partitions", TopicMetadata.from_json)
ALTER_CONFIGS = Route("PATCH", PREFIX + "/topics/{name}/configs", TopicConfigs.from_json)
# One partition a request: what brokers before the batched route send (kept for a rolling upgrade).
ALTER_PARTITION = Route("POST", PREFIX + "/alter-partition", PartitionState.from_json)
ALTER_PARTITIONS = Route("POST", PREFIX + "/alter-partitions", AlterPartitionResults.from_json)
CONTROLLED_SHUTDOWN = Route("POST", PREFIX + "/brokers/{id}/controlled-shutdown", RemainingLeaderships.from_json)
PRODUCER_IDS = Route("POST", PREFIX + "/producer-ids", ProducerIdBlock.from_json)
ELECT_LEADERS = Route("POST", PREFIX + "/elect-leaders", PartitionResults.from_json)
REASSIGN = Route("POST", PREFIX + "/reassignments", PartitionResults.from_json)
LIST_REASSIGNMENTS = Route("GET", PREFIX + "/reassignments", Reassignments.from_json)
CONTROLLER_ROUTES = (HEALTH, CLUSTER, CREATE_TOPIC, DELETE_TOPIC, CREATE_PARTITIONS, ALTER_CONFIGS,
                     ALTER_PARTITION, ALTER_PARTITIONS, CONTROLLED_SHUTDOWN, PRODUCER_IDS, ELECT_LEADERS,
                     REASSIGN, LIST_REASSIGNMENTS)
# ...and each broker's.
METADATA = Route("POST", PREFIX + "/metadata", Accepted.from_json)
STATUS = Route("GET", PREFIX + "/status", BrokerStatus.from_json)
BROKER_ROUTES = (METADATA, STATUS)


def health() -> Request[Health]:
    return Request(HEALTH, HEALTH.path())


def cluster() -> Request[ClusterView]:
    return Request(CLUSTER, CLUSTER.path())


def create_topic(req: CreateTopic) -> Request[TopicMetadata]:
    return Request(CREATE_TOPIC, CREATE_TOPIC.path(), req.to_json())


def delete_topic(name: str) -> Request[DeletedTopic]:
    return Request(DELETE_TOPIC, DELETE_TOPIC.path(name=name))


def create_partitions(name: str, req: CreatePartitions) -> Request[TopicMetadata]:
    return Request(CREATE_PARTITIONS, CREATE_PARTITIONS.path(name=name), req.to_json())


def alter_configs(name: str, req: AlterConfigs) -> Request[TopicConfigs]:
    return Request(ALTER_CONFIGS, ALTER_CONFIGS.path(name=name), req.to_json())


def alter_partitions(req: AlterPartitions) -> Request[AlterPartitionResults]:
    return Request(ALTER_PARTITIONS, ALTER_PARTITIONS.path(), req.to_json())


def controlled_shutdown(broker_id: int, req: ControlledShutdown) -> Request[RemainingLeaderships]:
    return Request(CONTROLLED_SHUTDOWN, CONTROLLED_SHUTDOWN.path(id=broker_id), req.to_json())


def producer_ids(req: ProducerIds) -> Request[ProducerIdBlock]:
    return Request(PRODUCER_IDS, PRODUCER_IDS.path(), req.to_json())


def elect_leaders(req: ElectLeaders) -> Request[PartitionResults]:
    return Request(ELECT_LEADERS, ELECT_LEADERS.path(), req.to_json())


def reassign(req: Reassign) -> Request[PartitionResults]:
    return Request(REASSIGN, REASSIGN.path(), req.to_json())


def list_reassignments() -> Request[Reassignments]:
    return Request(LIST_REASSIGNMENTS, LIST_REASSIGNMENTS.path())


def push_metadata(snapshot: ClusterMetadata) -> Request[Accepted]:
    return Request(METADATA, METADATA.path(), snapshot.to_json())


def status() -> Request[BrokerStatus]:
    return Request(STATUS, STATUS.path())
