"""The broker's side of ``__consumer_offsets``: the internal topic (created through the
controller once as many brokers are live as ``offsets.topic.replication.factor``, compacted,
``offsets.topic.num.partitions``) the group coordinator writes to, and the wiring of the
coordinator to who leads its partitions. ``group_coordinator`` builds the broker's one ``GroupCoordinator`` and
subscribes it to the ReplicaManager's snapshots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.group.config import OFFSETS_TOPIC, GroupConfig
from odradek.broker.group.coordinator import GroupCoordinator
from odradek.broker.internal_topic import InternalTopic

if TYPE_CHECKING:
    from odradek.broker.controller_client import ControllerClient
    from odradek.broker.partitions import ReplicaManager

OFFSETS_TOPIC_SEGMENT_BYTES = 100 * 1024 * 1024   # Kafka's offsets.topic.segment.bytes default


class OffsetsTopic(InternalTopic):
    def __init__(self, config: GroupConfig, replicas: ReplicaManager, controller: ControllerClient) -> None:
        super().__init__(OFFSETS_TOPIC, config.offsets_partitions, config.offsets_replication_factor,
                         {"cleanup.policy": "compact", "segment.bytes": str(OFFSETS_TOPIC_SEGMENT_BYTES)},
                         replicas, controller, "offsets.topic.replication.factor")
        self.config = config


def group_coordinator(broker_id: int, offsets: OffsetsTopic) -> GroupCoordinator:
    """The broker's coordinator, writing through ``offsets`` and following every snapshot the
    ReplicaManager applies (it loads the offsets partitions this broker comes to lead)."""
    coord = GroupCoordinator(broker_id, offsets.config, offsets.append, sequence=offsets.next_sequence)
    replicas = offsets.replicas
    replicas.subscribe(lambda: coord.on_metadata(replicas))
    coord.on_metadata(replicas)
    return coord
