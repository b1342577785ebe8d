"""The broker's producer-id manager: hands out ids for InitProducerId from blocks.

Producer ids come in blocks the active controller reserves in ZooKeeper ``/producer_id_block``
(Kafka's znode and JSON, compare-and-set on its version, fenced by the controller epoch) and
hands out on ``control_plane.PRODUCER_IDS``; a broker asks for the next block when its own
runs out. Ids of a block left unused at a restart are skipped, as in Kafka.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from odradek.cluster import control_plane as cp

if TYPE_CHECKING:
    from odradek.broker.controller_client import ControllerClient


class ProducerIdManager:
    def __init__(self, broker_id: int, controller: ControllerClient) -> None:
        self.broker_id = broker_id
        self.controller = controller
        self.next, self.end = 0, -1   # the current block's next id and last id
        self._lock = asyncio.Lock()

    async def allocate(self) -> int:
        async with self._lock:
            if self.next > self.end:
                block = await self.controller.call(cp.producer_ids(cp.ProducerIds(self.broker_id)))
                self.next, self.end = block.block_start, block.block_end
            self.next += 1
            return self.next - 1
