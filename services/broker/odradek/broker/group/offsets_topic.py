"""The broker's side of ``__consumer_offsets``: asking the controller to create it, writing
the coordinator's batches to it, and wiring the coordinator to who leads its partitions.

``OffsetsTopic.ensure`` is what FindCoordinator calls while the topic is missing: it starts
one creation task (compacted, ``offsets.topic.num.partitions``, RF =
min(``offsets.topic.replication.factor``, live brokers), RF 1 if the controller refuses
more) and starts another only once that one is done and ``_CREATE_RETRY_S`` has passed.
``OffsetsTopic.append`` is the coordinator's writer: the leader append at acks=all, answered
once the high watermark passes the batch. ``group_coordinator`` builds the broker's one
``GroupCoordinator`` and subscribes it to the ReplicaManager's snapshots.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import TYPE_CHECKING

from odradek.broker.group.config import OFFSETS_TOPIC, GroupConfig
from odradek.broker.group.coordinator import GroupCoordinator
from odradek.cluster import control_plane as cp
from odradek.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.broker.controller_client import ControllerClient
    from odradek.broker.partitions import ReplicaManager

log = logging.getLogger(__name__)
E = ErrorCode

OFFSETS_TOPIC_SEGMENT_BYTES = 100 * 1024 * 1024   # Kafka's offsets.topic.segment.bytes default
_COMMIT_TIMEOUT_S = 5.0  # offsets.commit.timeout.ms
_CREATE_RETRY_S = 1.0


class OffsetsTopic:
    def __init__(self, config: GroupConfig, replicas: ReplicaManager, controller: ControllerClient) -> None:
        self.config = config
        self.replicas = replicas
        self.controller = controller
        self._task: asyncio.Task | None = None
        self._started_at = 0.0

    def ensure(self) -> None:
        """Ask the controller to create the topic, unless an attempt is running or just ended."""
        task = self._task
        if task is not None and (not task.done() or time.monotonic() - self._started_at < _CREATE_RETRY_S):
            return
        self._started_at = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._create())

    def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def _create(self) -> None:
        config = self.config
        rf = max(1, min(config.offsets_replication_factor, len(self.replicas.live_brokers())))
        req = cp.CreateTopic(OFFSETS_TOPIC, config.offsets_partitions, rf, configs={
            "cleanup.policy": "compact", "segment.bytes": str(OFFSETS_TOPIC_SEGMENT_BYTES)})
        while True:
            try:
                await self.controller.call(cp.create_topic(req), timeout=10.0)
                log.info("asked the controller to create %s (%d partitions, RF %d)", OFFSETS_TOPIC,
                         req.partitions, req.replication_factor)
                return
            except KafkaError as e:
                if e.code == E.invalid_replication_factor and req.replication_factor > 1:
                    log.warning("the controller refused %s with RF %d (%s); creating it with RF 1",
                                OFFSETS_TOPIC, req.replication_factor, e.message)
                    req = dataclasses.replace(req, replication_factor=1)
                    continue
                if e.code != E.topic_already_exists:
                    log.warning("creating %s failed: %s", OFFSETS_TOPIC, e.message)
                return

    async def append(self, partition: int, batch: bytearray) -> None:
        """Leader append with acks=all; returns once the high watermark passes the batch."""
        replicas = self.replicas
        info = replicas.append(OFFSETS_TOPIC, partition, memoryview(batch), acks=-1)
        done = replicas.replicated(OFFSETS_TOPIC, partition, info.last_offset)
        try:
            error = await asyncio.wait_for(asyncio.shield(done), _COMMIT_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise KafkaError(E.request_timed_out, "the offsets write was not replicated in time") from None
        if error != E.none:
            raise KafkaError(error)


def group_coordinator(broker_id: int, offsets: OffsetsTopic) -> GroupCoordinator:
    """The broker's coordinator, writing through ``offsets`` and following every snapshot the
    ReplicaManager applies (it loads the offsets partitions this broker comes to lead)."""
    coord = GroupCoordinator(broker_id, offsets.config, offsets.append)
    replicas = offsets.replicas
    replicas.subscribe(lambda: coord.on_metadata(replicas))
    coord.on_metadata(replicas)
    return coord
