"""Immutable cluster metadata: what ZooKeeper holds and what the controller pushes.

``ClusterMetadata`` is the body of ``control_plane.METADATA`` (controller -> broker):
a full snapshot, fenced by ``controller_epoch``. Brokers keep the newest snapshot whose
epoch is not older than the last one they accepted, and serve Kafka Metadata from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker, as registered in ``/brokers/ids/<id>`` (ephemeral)."""

    id: int
    host: str
    port: int
    internal_url: str  # http://host:port of the broker's control-plane API
    rack: str | None = None
    epoch: int = -1  # the registration znode's czxid
    # every listener's advertised address, (listener name, host, port); host/port above are the
    # first listener's (the only one's, without ``listeners``)
    endpoints: tuple[tuple[str, str, int], ...] = ()

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """The address a client of ``listener`` is told to use (Kafka answers Metadata with the
        endpoints of the listener the request came in on); None if the broker has no such listener.
        A registration without endpoints (one listener) answers for any."""
        if not self.endpoints:
            return self.host, self.port
        return next(((host, port) for name, host, port in self.endpoints if name == listener), None)

    def to_json(self) -> dict:
        return {"id": self.id, "host": self.host, "port": self.port,
                "internal_url": self.internal_url, "rack": self.rack, "epoch": self.epoch,
                "endpoints": [f"{name}://{host}:{port}" for name, host, port in self.endpoints]}

    @classmethod
    def from_json(cls, d: Mapping) -> "BrokerInfo":
        return cls(int(d["id"]), d["host"], int(d["port"]), d["internal_url"],
                   d.get("rack"), int(d.get("epoch", -1)), tuple(_endpoint(e) for e in d.get("endpoints", ())))


def _endpoint(text: str) -> tuple[str, str, int]:
    """``NAME://host:port`` (Kafka's form in ``/brokers/ids/<id>``) -> (NAME, host, port)."""
    name, _, address = text.partition("://")
    host, _, port = address.rpartition(":")
    return name, host.strip("[]"), int(port)


@dataclass(frozen=True, slots=True)
class PartitionState:
    """``/brokers/topics/<t>/partitions/<p>/state`` plus the assignment."""

    partition: int
    replicas: tuple[int, ...]
    leader: int  # -1 when offline
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int = 0
    partition_epoch: int = 0  # the state znode's version: bumped by every change (Kafka's partition epoch)

    def to_json(self) -> dict:
        return {"partition": self.partition, "replicas": list(self.replicas), "leader": self.leader,
                "leader_epoch": self.leader_epoch, "isr": list(self.isr),
                "controller_epoch": self.controller_epoch, "partition_epoch": self.partition_epoch}

    @classmethod
    def from_json(cls, d: Mapping) -> "PartitionState":
        return cls(int(d["partition"]), tuple(d["replicas"]), int(d["leader"]),
                   int(d["leader_epoch"]), tuple(d["isr"]), int(d.get("controller_epoch", 0)),
                   int(d.get("partition_epoch", 0)))


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: str  # UUID, canonical string form
    partitions: tuple[PartitionState, ...]
    configs: Mapping[str, str] = field(default_factory=dict)  # overrides only

    def to_json(self) -> dict:
        return {"name": self.name, "topic_id": self.topic_id, "configs": dict(self.configs),
                "partitions": [p.to_json() for p in self.partitions]}

    @classmethod
    def from_json(cls, d: Mapping) -> "TopicMetadata":
        parts = tuple(sorted((PartitionState.from_json(p) for p in d["partitions"]),
                             key=lambda p: p.partition))
        return cls(d["name"], d["topic_id"], parts, dict(d.get("configs", {})))


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    cluster_id: str
    controller_id: str
    controller_epoch: int
    brokers: tuple[BrokerInfo, ...]
    topics: tuple[TopicMetadata, ...]

    def topic(self, name: str) -> TopicMetadata | None:
        for t in self.topics:
            if t.name == name:
                return t
        return None

    def to_json(self) -> dict:
        return {"cluster_id": self.cluster_id, "controller_id": self.controller_id,
                "controller_epoch": self.controller_epoch,
                "brokers": [b.to_json() for b in self.brokers],
                "topics": [t.to_json() for t in self.topics]}

    @classmethod
    def from_json(cls, d: Mapping) -> "ClusterMetadata":
        return cls(d["cluster_id"], str(d["controller_id"]), int(d["controller_epoch"]),
                   tuple(BrokerInfo.from_json(b) for b in d["brokers"]),
                   tuple(TopicMetadata.from_json(t) for t in d["topics"]))
