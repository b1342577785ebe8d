"""InitProducerId (key 22, v0-4) for idempotent producers; transactions are not served.

Producer ids come in blocks the active controller reserves in ZooKeeper ``/producer_id_block``
(Kafka's znode and JSON, compare-and-set on its version, fenced by the controller epoch) and
hands out on ``POST /internal/v1/producer-ids``; a broker asks for the next block when its own
runs out. Ids of a block left unused at a restart are skipped, as in Kafka.

A transactional id gets COORDINATOR_NOT_AVAILABLE, what Kafka answers while no transaction
coordinator can serve it. Without a transactional id Kafka's coordinator ignores the producer
id and epoch a v3+ request carries (epoch bumps are for transactional ids) and hands out a new
producer id at epoch 0: so does this.
"""

from __future__ import annotations

import asyncio

from odradek.broker.dispatch import ZERO
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.codec import Schemas, make

INIT_PRODUCER_ID = 22


class ProducerIdAllocator:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.next, self.end = 0, -1   # the current block's next id and last id
        self._lock = asyncio.Lock()

    async def allocate(self) -> int:
        async with self._lock:
            if self.next > self.end:
                block = await self.broker.controller.call(
                    "POST", "/internal/v1/producer-ids", {"broker_id": self.broker.config.broker_id})
                self.next, self.end = int(block["block_start"]), int(block["block_end"])
            self.next += 1
            return self.next - 1


def _allocator(broker) -> ProducerIdAllocator:
    if getattr(broker, "producer_ids", None) is None:
        broker.producer_ids = ProducerIdAllocator(broker)
    return broker.producer_ids


def _response(s, code: ErrorCode, producer_id: int = -1, epoch: int = -1):
    return make(s.InitProducerIdResponse, throttle_time=ZERO, error_code=code, producer_id=producer_id,
                producer_epoch=epoch)


async def init_producer_id(broker, header, req):
    s = Schemas(INIT_PRODUCER_ID, header.api_version)
    if req.transactional_id is not None:
        return _response(s, ErrorCode.coordinator_not_available)
    try:
        return _response(s, ErrorCode.none, await _allocator(broker).allocate(), 0)
    except KafkaError as e:  # no reachable active controller: retriable for the client
        return _response(s, e.code if e.retriable else ErrorCode.coordinator_not_available)
