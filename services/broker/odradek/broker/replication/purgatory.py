"""Purgatories: requests parked until replication lets them finish (Kafka's DelayedProduce and
DelayedFetch, without a timer wheel: asyncio futures and events do the waking).

- ``ProducePurgatory`` (one per leader partition): acks=all produces wait until the high
  watermark reaches their last offset + 1. ``complete`` answers those that are due, with
  NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below ``min.insync.replicas`` meanwhile
  (Kafka's check at completion); ``fail_all`` answers every waiter with one error
  (leadership lost). The produce handler owns the request timeout.
- ``FetchWakeup`` (one per broker): long-polling fetches sleep on it; appends (new data for
  followers) and high-watermark advances (new data for consumers) wake them all; each then
  re-checks its own partitions.

Event-loop thread only.
"""

from __future__ import annotations

import asyncio

from odradek.errors import ErrorCode


class ProducePurgatory:
    def __init__(self) -> None:
        self._waiting: list[tuple[int, asyncio.Future]] = []

    def __len__(self) -> int:
        return len(self._waiting)

    def park(self, required_offset: int) -> asyncio.Future:
        """A future resolved with an ErrorCode once the HW reaches ``required_offset``."""
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((required_offset, future))
        return future

    def complete(self, high_watermark: int, isr_size: int, min_isr: int) -> None:
        if not self._waiting:
            return
        code = ErrorCode.none if isr_size >= min_isr else ErrorCode.not_enough_replicas_after_append
        kept = []
        for required, future in self._waiting:
            if future.done():
                continue
            if required <= high_watermark:
                future.set_result(code)
            else:
                kept.append((required, future))
        self._waiting = kept

    def fail_all(self, code: ErrorCode) -> None:
        waiting, self._waiting = self._waiting, []
        for _, future in waiting:
            if not future.done():
                future.set_result(code)


class FetchWakeup:
    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.waiting = 0  # parked fetches (Kafka's Fetch purgatory size)

    def notify(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait(self, timeout: float) -> None:
        """Sleep until the next ``notify`` or ``timeout`` seconds."""
        if timeout <= 0:
            return
        self.waiting += 1
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            self.waiting -= 1
