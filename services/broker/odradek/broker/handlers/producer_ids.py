"""InitProducerId (key 22, v0-4) for idempotent producers; transactions are not served.

Producer ids are unique across brokers and restarts without the controller: broker ``b``
hands out ``b << 40 | n``, and reserves ``n`` in blocks of ``BLOCK_SIZE`` by writing the
block's end to ``<data dir>/producer_id_block`` (fsynced) before using it. (The controller's
ZooKeeper ``/producer_id_block`` of Kafka is not done yet.)

A transactional id gets COORDINATOR_NOT_AVAILABLE, what Kafka answers while no transaction
coordinator can serve it. Without a transactional id Kafka's coordinator ignores the producer
id and epoch a v3+ request carries (epoch bumps are for transactional ids) and hands out a new
producer id at epoch 0: so does this.
"""

from __future__ import annotations

import os
from pathlib import Path

from odradek.broker.dispatch import ZERO
from odradek.errors import ErrorCode
from odradek.protocol.codec import Schemas, make

INIT_PRODUCER_ID = 22
BLOCK_SIZE = 1000


class ProducerIdAllocator:
    def __init__(self, data_dir: Path, broker_id: int) -> None:
        self.path = Path(data_dir) / "producer_id_block"
        self.prefix = broker_id << 40
        self.next = self.end = int(self.path.read_text()) if self.path.exists() else 0

    def allocate(self) -> int:
        if self.next >= self.end:
            self._reserve(self.next + BLOCK_SIZE)
        self.next += 1
        return self.prefix | (self.next - 1)

    def _reserve(self, end: int) -> None:
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(str(end))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self.end = end


def _allocator(broker) -> ProducerIdAllocator:
    if getattr(broker, "producer_ids", None) is None:
        broker.producer_ids = ProducerIdAllocator(broker.config.data_dir, broker.config.broker_id)
    return broker.producer_ids


async def init_producer_id(broker, header, req):
    s = Schemas(INIT_PRODUCER_ID, header.api_version)
    if req.transactional_id is not None:
        return make(s.InitProducerIdResponse, throttle_time=ZERO, error_code=ErrorCode.coordinator_not_available,
                    producer_id=-1, producer_epoch=-1)
    return make(s.InitProducerIdResponse, throttle_time=ZERO, error_code=ErrorCode.none,
                producer_id=_allocator(broker).allocate(), producer_epoch=0)
