"""The partitions this broker hosts, as the controller's newest snapshot assigns them.

``ReplicaManager`` applies metadata snapshots (fenced by controller epoch), creates and
deletes partition logs, answers "am I the leader of t-p?", appends as leader and wakes
long-polling fetches. Used from the broker's single event-loop thread.

Until replication lands every partition has one replica, so the high watermark is the log
end offset right after each append.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from odradek.broker.storage import AppendInfo, Log, LogManager
from odradek.cluster.model import BrokerInfo, ClusterMetadata, PartitionState, TopicMetadata
from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LeaderPartition:
    topic: TopicMetadata
    state: PartitionState
    log: Log


class ReplicaManager:
    def __init__(self, broker_id: int, logs: LogManager) -> None:
        self.broker_id = broker_id
        self.logs = logs
        self.metadata: ClusterMetadata | None = None
        self._topics: dict[str, TopicMetadata] = {}
        self._live: dict[int, BrokerInfo] = {}
        self._data_arrived = asyncio.Event()  # replaced at every append: wakes all waiters
        self.metadata_changed = asyncio.Event()

    # -- metadata ------------------------------------------------------------------------
    def apply(self, snapshot: ClusterMetadata) -> None:
        """Adopt a full snapshot from the controller; older controller epochs are refused."""
        current = self.metadata
        if current is not None and snapshot.controller_epoch < current.controller_epoch:
            raise KafkaError(ErrorCode.stale_controller_epoch,
                             f"controller epoch {snapshot.controller_epoch} is older than "
                             f"{current.controller_epoch}")
        for topic in snapshot.topics:
            for p in topic.partitions:
                if self.broker_id in p.replicas:
                    self.logs.get_or_create(topic.name, p.partition, dict(topic.configs))
            if topic.name in self._topics and self._topics[topic.name].configs != topic.configs:
                self.logs.update_config(topic.name, dict(topic.configs))
        kept = {t.name for t in snapshot.topics}
        for name in {lg.topic for lg in self.logs.logs()} - kept:
            log.info("deleting the logs of topic %s (no longer in the controller's metadata)", name)
            self.logs.delete_topic(name)
        self.metadata = snapshot
        self._topics = {t.name: t for t in snapshot.topics}
        self._live = {b.id: b for b in snapshot.brokers}
        self.metadata_changed.set()
        self.metadata_changed = asyncio.Event()

    def topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: str) -> TopicMetadata | None:
        return next((t for t in self._topics.values() if t.topic_id == topic_id), None)

    def live_brokers(self) -> list[BrokerInfo]:
        return sorted(self._live.values(), key=lambda b: b.id)

    def is_live(self, broker_id: int) -> bool:
        return broker_id in self._live

    def leader(self, topic: str, partition: int) -> LeaderPartition:
        """The partition if this broker leads it, else the error Kafka gives."""
        meta = self._topics.get(topic)
        if meta is None or not 0 <= partition < len(meta.partitions):
            raise KafkaError(ErrorCode.unknown_topic_or_partition,
                             f"This server does not host this topic-partition: {topic}-{partition}")
        state = meta.partitions[partition]
        partition_log = self.logs.get(topic, partition)
        if state.leader != self.broker_id or partition_log is None:
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"broker {self.broker_id} is not the leader of {topic}-{partition}")
        return LeaderPartition(meta, state, partition_log)

    # -- data ----------------------------------------------------------------------------
    def append(self, topic: str, partition: int, records: memoryview) -> AppendInfo:
        lp = self.leader(topic, partition)
        info = lp.log.append(records, leader_epoch=lp.state.leader_epoch)
        lp.log.high_watermark = lp.log.log_end_offset
        arrived, self._data_arrived = self._data_arrived, asyncio.Event()
        arrived.set()
        return info

    async def wait_for_data(self, timeout: float) -> None:
        """Sleep until any partition here gets new data, or ``timeout`` seconds pass."""
        if timeout <= 0:
            return
        try:
            await asyncio.wait_for(self._data_arrived.wait(), timeout)
        except asyncio.TimeoutError:
            pass
