"""In-process replication harness: brokers' ReplicaManagers behind real Kafka listeners,
and a fake controller that owns the partition states.

Each ``Node`` is a broker without ZooKeeper: a LogManager in its own directory, a
ReplicaManager, and the broker's own Dispatcher/handler table on a loopback port, so that
followers fetch from leaders over the real wire protocol. ``FakeController`` keeps one
``PartitionState`` per partition, answers alter-partition as the contract says (leader epoch
and partition epoch checked, partition epoch bumped) and pushes snapshots to the nodes it is
told can hear it (``reachable``), which is how tests partition the network.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

from odradek.broker.config import BrokerConfig
from odradek.broker.context import BrokerContext
from odradek.broker.dispatch import Dispatcher
from odradek.broker.handlers import table
from odradek.broker.partitions import ReplicaManager
from odradek.broker.storage import LogManager
from odradek.cluster import control_plane as cp
from odradek.cluster.model import BrokerInfo, ClusterMetadata, PartitionState, TopicMetadata
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.connection import KafkaConnection
from odradek.records import Record, build_batch

TOPIC = "t"
TOPIC_ID = str(uuid.uuid4())


def batch(*values: bytes) -> memoryview:
    return memoryview(build_batch([Record(v, key=b"k") for v in values]))


@dataclass
class Node:
    broker_id: int
    replicas: ReplicaManager
    server: asyncio.AbstractServer
    port: int

    @property
    def log(self):
        return self.replicas.logs.get(TOPIC, 0)


@dataclass
class FakeController:
    replicas: tuple[int, ...]
    min_isr: int = 1
    configs: dict[str, str] = field(default_factory=dict)   # the topic's other configs
    epoch: int = 1
    nodes: dict[int, Node] = field(default_factory=dict)
    reachable: set[int] = field(default_factory=set)
    state: PartitionState | None = None
    alters: list[dict] = field(default_factory=list)
    refusals: list[ErrorCode] = field(default_factory=list)  # answers to the next alter-partitions
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list = field(default_factory=list)

    async def start(self, tmp: Path, lag_ms: int = 30_000) -> None:
        for broker_id in self.replicas:
            config = BrokerConfig(broker_id, tmp / f"broker-{broker_id}", "unused", auto_create_topics=False)
            logs = LogManager(config.data_dir)
            logs.open_all()
            rm = ReplicaManager(broker_id, logs, controller_call=self.call, replica_lag_time_max_ms=lag_ms)
            dispatcher = Dispatcher(table(BrokerContext.create(config, rm, self)))
            server = await asyncio.get_running_loop().create_server(
                lambda d=dispatcher: KafkaConnection(d, max_frame_bytes=100 << 20), "127.0.0.1", 0)
            self.nodes[broker_id] = Node(broker_id, rm, server, server.sockets[0].getsockname()[1])
            self._tasks.append(asyncio.get_running_loop().create_task(rm.run(self._stop)))
        self.reachable = set(self.replicas)

    def snapshot(self) -> ClusterMetadata:
        brokers = tuple(BrokerInfo(n.broker_id, "127.0.0.1", n.port, "http://unused") for n in self.nodes.values())
        topic = TopicMetadata(TOPIC, TOPIC_ID, (self.state,), {"min.insync.replicas": str(self.min_isr), **self.configs})
        return ClusterMetadata("c", "fake", self.epoch, brokers, (topic,))

    def set_state(self, leader: int, leader_epoch: int, isr: tuple[int, ...]) -> None:
        pe = self.state.partition_epoch + 1 if self.state else 0
        self.state = PartitionState(0, self.replicas, leader, leader_epoch, isr, self.epoch, pe)
        self.push()

    def push(self) -> None:
        snap = self.snapshot()
        for broker_id in sorted(self.reachable):
            self.nodes[broker_id].replicas.apply(snap)

    async def call(self, request: cp.Request, *, timeout: float = 30.0):
        """``ControllerClient.call``, answering AlterPartitions only (of the one partition)."""
        assert request.route is cp.ALTER_PARTITIONS, request.path
        await asyncio.sleep(0)
        results = []
        for entry in request.body["partitions"]:
            self.alters.append(entry)
            if self.refusals:
                raise KafkaError(self.refusals.pop(0), "refused by the test")
            results.append({"topic": entry["topic"], "partition": entry["partition"], **self._alter(entry)})
        return request.decode({"results": results})

    def _alter(self, entry: dict) -> dict:
        s = self.state
        if entry["leader_epoch"] != s.leader_epoch:
            return {"error_code": int(ErrorCode.fenced_leader_epoch), "message": "stale leader epoch"}
        if entry["partition_epoch"] != s.partition_epoch:
            return {"error_code": int(ErrorCode.invalid_update_version), "message": "stale partition epoch"}
        self.state = replace(s, isr=tuple(entry["isr"]), partition_epoch=s.partition_epoch + 1)
        self.push()
        return {"error_code": 0, "state": self.state.to_json()}

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)
        for node in self.nodes.values():
            node.server.close()
            await node.replicas.close()
            node.replicas.logs.close()


async def eventually(condition, timeout: float, what: str, interval: float = 0.02):
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)
