"""The control-plane bodies of each broker's routes (``control_plane``'s ``METADATA``, the
controller's push, ``STATUS`` and ``READY``): frozen dataclasses with ``to_json``/``from_json``. Part of
``control_plane``'s contract (which re-exports every name here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


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


# Kafka's BrokerState names (the ones a broker with its internal API up can be in).
STARTING, RUNNING = "STARTING", "RUNNING"
PENDING_CONTROLLED_SHUTDOWN, SHUTTING_DOWN = "PENDING_CONTROLLED_SHUTDOWN", "SHUTTING_DOWN"


@dataclass(frozen=True, slots=True)
class Readiness:
    """A broker's answer to ``READY`` (HTTP 200 when ``ready``, 503 otherwise): ready once it
    serves clients (Kafka's RUNNING) and is in the ISR of every partition with a leader that it
    replicates (``out_of_isr`` counts the others); docs/broker.md, "Broker states and readiness"."""

    broker_id: int
    state: str          # STARTING, RUNNING, PENDING_CONTROLLED_SHUTDOWN, SHUTTING_DOWN
    out_of_isr: int

    @property
    def ready(self) -> bool:
        return self.state == RUNNING and self.out_of_isr == 0

    def to_json(self) -> dict:
        return {"broker_id": self.broker_id, "ready": self.ready, "state": self.state, "out_of_isr": self.out_of_isr}

    @classmethod
    def from_json(cls, d: Mapping) -> "Readiness":
        return cls(d["broker_id"], d["state"], d["out_of_isr"])
