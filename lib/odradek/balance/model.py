"""The balancer's input and output: a cluster's brokers and partitions as it sees them (frozen
value types built by whoever gathered them: the rebalance CLI over Kafka's admin API, or a
test), and the proposal it answers (moves, bytes to move, per-broker before and after).

Pure data: no I/O. A partition's ``replicas`` are in Kafka's order (the first is the preferred
leader); ``size`` is its log's bytes on the leader (what a new replica has to copy), and
``bytes_in_rate`` the produce bytes/s it takes on its leader (0 when no metric reached us).
"""

from __future__ import annotations

from dataclasses import dataclass, field

Key = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Broker:
    id: int
    rack: str | None = None
    max_replicas: int | None = None   # Cruise Control's replica capacity; None: unbounded
    disk_bytes: int | None = None     # its disk's capacity; None: unbounded


@dataclass(frozen=True, slots=True)
class Partition:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int = -1            # -1: no leader now (the preferred one is assumed after election)
    size: int = 0
    bytes_in_rate: float = 0.0

    @property
    def key(self) -> Key:
        return (self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class ClusterModel:
    brokers: tuple[Broker, ...]
    partitions: tuple[Partition, ...]

    def broker_ids(self) -> tuple[int, ...]:
        return tuple(sorted(b.id for b in self.brokers))

    def rack_of(self) -> dict[int, str | None]:
        return {b.id: b.rack for b in self.brokers}


@dataclass(frozen=True, slots=True)
class Move:
    """One partition's reassignment: ``before`` -> ``after`` (a reordering alone copies nothing)."""

    topic: str
    partition: int
    before: tuple[int, ...]
    after: tuple[int, ...]
    size: int

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(r for r in self.after if r not in self.before)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(r for r in self.before if r not in self.after)

    @property
    def bytes_to_move(self) -> int:
        return self.size * len(self.adding)

    @property
    def moves_leader(self) -> bool:
        """The current preferred leader leaves the replica list (moved last: followers first)."""
        return bool(self.before) and self.before[0] not in self.after

    def to_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "before": list(self.before),
                "after": list(self.after), "bytes": self.bytes_to_move}


@dataclass(frozen=True, slots=True)
class BrokerLoad:
    replicas: int = 0
    leaders: int = 0
    bytes: int = 0

    def to_json(self) -> dict:
        return {"replicas": self.replicas, "leaders": self.leaders, "bytes": self.bytes}


@dataclass(frozen=True, slots=True)
class Proposal:
    """What a plan does: its moves (followers' first), the bytes new replicas copy, and each
    broker's load before and after (leaders counted as preferred leaders after election)."""

    mode: str
    moves: tuple[Move, ...]
    before: dict[int, BrokerLoad] = field(default_factory=dict)
    after: dict[int, BrokerLoad] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def bytes_to_move(self) -> int:
        return sum(m.bytes_to_move for m in self.moves)

    @property
    def replica_moves(self) -> int:
        return sum(len(m.adding) for m in self.moves)

    def to_json(self) -> dict:
        return {"mode": self.mode, "moves": [m.to_json() for m in self.moves],
                "replica_moves": self.replica_moves, "bytes_to_move": self.bytes_to_move,
                "brokers": {str(b): {"before": self.before.get(b, BrokerLoad()).to_json(),
                                     "after": self.after.get(b, BrokerLoad()).to_json()}
                            for b in sorted(set(self.before) | set(self.after))},
                "notes": list(self.notes)}

    def summary(self) -> str:
        lines = [f"mode {self.mode}: {len(self.moves)} partitions to reassign, {self.replica_moves} replicas "
                 f"to move, {self.bytes_to_move} bytes to copy",
                 "broker  replicas before->after  leaders before->after  bytes before->after"]
        for b in sorted(set(self.before) | set(self.after)):
            x, y = self.before.get(b, BrokerLoad()), self.after.get(b, BrokerLoad())
            lines.append(f"{b:>6}  {x.replicas:>8} -> {y.replicas:<8}  {x.leaders:>7} -> {y.leaders:<7}  "
                         f"{x.bytes:>12} -> {y.bytes}")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)
