"""Batching of AlterPartition requests: many partitions decided and written together.

Owns: the queue of waiting requests (each with the future its HTTP handler awaits) and the
one drain task that hands everything queued so far to the controller as a batch, again and
again until the queue is empty. Kafka's AlterPartition carries many partitions per request
and its controller writes them with pipelined asynchronous ZooKeeper writes; so do leaders
here (``control_plane.ALTER_PARTITIONS``), and whatever arrives while one batch is being
written, from one leader or several, forms the next. A restarted broker rejoining 10,000
ISRs costs a few batches instead of 10,000 sequential compare-and-set round trips.

Also the small helpers the batch uses: whether a request's broker epoch matches the cached
registration, settling a future its handler may have abandoned (a client that disconnected
cancels it), and one partition's answer to a batched request. Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from odradek.cluster.control_plane import AlterPartition, AlterPartitionResult
from odradek.cluster.model import PartitionState
from odradek.errors import ErrorCode, KafkaError

from .store import StoreSnapshot

log = logging.getLogger(__name__)

Item = tuple[AlterPartition, asyncio.Future]


class AlterBatcher:
    def __init__(self, handle: Callable[[list[Item]], Awaitable[None]]) -> None:
        self._handle = handle
        self._queue: list[Item] = []
        self._task: asyncio.Task | None = None

    def submit(self, req: AlterPartition) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self.requeue(req, fut)
        return fut

    def requeue(self, req: AlterPartition, fut: asyncio.Future) -> None:
        """Queue (again) for the next batch; starts the drain task if none runs."""
        self._queue.append((req, fut))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain(), name="alter-partition-batches")

    async def _drain(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                await self._handle(batch)
            except KafkaError as e:  # NOT_CONTROLLER, an unreachable store: every request hears it
                for _, fut in batch:
                    settle(fut, error=e)
            except Exception as e:  # a bug: the handlers answer UNKNOWN_SERVER_ERROR with it
                log.exception("an AlterPartition batch of %d requests failed", len(batch))
                for _, fut in batch:
                    settle(fut, error=e)
            for _, fut in batch:  # a request neither answered nor requeued would hang its leader
                if not fut.done() and not any(f is fut for _, f in self._queue):
                    settle(fut, error=RuntimeError("AlterPartition request left unanswered"))


def registered(snapshot: StoreSnapshot, req: AlterPartition) -> bool:
    """The request's broker epoch is the cached registration's (or not checked: -1)."""
    if req.broker_epoch == -1:
        return True
    broker = snapshot.broker(req.broker_id)
    return broker is not None and broker.epoch == req.broker_epoch


def settle(fut: asyncio.Future, state: PartitionState | None = None, error: BaseException | None = None) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(state)


def result(req: AlterPartition, outcome: PartitionState | BaseException) -> AlterPartitionResult:
    """One partition's entry in an ``ALTER_PARTITIONS`` answer."""
    if isinstance(outcome, PartitionState):
        return AlterPartitionResult(req.topic, req.partition, state=outcome)
    if isinstance(outcome, KafkaError):
        return AlterPartitionResult(req.topic, req.partition, outcome.code, outcome.message)
    return AlterPartitionResult(req.topic, req.partition, ErrorCode.unknown_server_error,
                                f"{type(outcome).__name__}: {outcome}")
