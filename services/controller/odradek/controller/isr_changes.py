"""ISR changes from partition leaders (Kafka's AlterPartition), the I/O side (the decision is
``replication.alter_partition``).

Owns: the answers to ``ALTER_PARTITION`` and ``ALTER_PARTITIONS`` and the batch step the
``AlterBatcher`` runs: every request queued so far decided against the cached snapshot,
written in one pipelined go through the ``PartitionStateWriter``, published once, and a
running reassignment advanced when a change put its target replicas in the ISR.
"""

from __future__ import annotations

import asyncio

from odradek.cluster import control_plane as cp
from odradek.cluster.model import PartitionState
from odradek.errors import ErrorCode, KafkaError

from . import replication
from .alter_batch import AlterBatcher, registered, result, settle
from .context import ControllerContext
from .decisions import PartitionChange
from .reassigner import Reassigner
from .state_writer import PartitionStateWriter


class IsrChanges:
    def __init__(self, ctx: ControllerContext, writer: PartitionStateWriter, reassigner: Reassigner) -> None:
        self._ctx = ctx
        self._writer = writer
        self._reassigner = reassigner
        self._alters = AlterBatcher(self._batch)

    async def alter_partition(self, req: cp.AlterPartition) -> PartitionState:
        """AlterPartition from a partition's leader; answers the partition's state afterwards.
        Requests arriving together are decided and written as one batch (``_batch``)."""
        self._ctx.require_active()
        return await self._alters.submit(req)

    async def alter_partitions(self, req: cp.AlterPartitions) -> cp.AlterPartitionResults:
        """A leader's ISR changes for many partitions: each decided and written as
        ``alter_partition``'s are (in the same batches), each answered with its own outcome."""
        self._ctx.require_active()
        outcomes = await asyncio.gather(*(self._alters.submit(a) for a in req.partitions), return_exceptions=True)
        return cp.AlterPartitionResults(tuple(result(a, o) for a, o in zip(req.partitions, outcomes)))

    async def _batch(self, batch: list[tuple[cp.AlterPartition, asyncio.Future]]) -> None:
        """Decide every request against the cached snapshot, write the changes pipelined, patch
        the cache, publish once (Kafka's controller takes many partitions per AlterPartition).
        A request whose partition already has a change in this batch waits for the next one."""
        ctx = self._ctx
        async with ctx.acting() as (record, snapshot):
            if any(not registered(snapshot, req) for req, _ in batch):
                record, snapshot = await ctx.fresh()  # the cache may predate a re-registration
            changes = self._decide(batch, snapshot, record.epoch)
            if not changes:
                return
            lost = {(c.topic, c.state.partition) for c in
                    await ctx.guarded(self._writer.write([c for c, _ in changes]))}
            done = [c for c, _ in changes if (c.topic, c.state.partition) not in lost]
            if any(ctx.snapshot.topics[c.topic].reassigning(c.state.partition) for c in done):
                async with ctx.store_trouble_as_kafka_errors():
                    if await self._reassigner.advance(record.epoch):
                        await ctx.reload()
            ctx.publish()
            for change, fut in changes:
                topic, p = change.topic, change.state.partition
                if (topic, p) in lost:
                    settle(fut, error=KafkaError(ErrorCode.invalid_update_version,
                                                 f"The state of {topic}-{p} changed meanwhile."))
                else:
                    settle(fut, ctx.snapshot.topics[topic].states[p])

    def _decide(self, batch, snapshot, controller_epoch: int) -> list[tuple[PartitionChange, asyncio.Future]]:
        """The changes to write, each with its request's future; the other requests are
        answered (an error, or the current state for a retry) or requeued."""
        changes: list[tuple[PartitionChange, asyncio.Future]] = []
        touched: set[tuple[str, int]] = set()
        for req, fut in batch:
            if (req.topic, req.partition) in touched:
                self._alters.requeue(req, fut)
                continue
            try:
                outcome = replication.alter_partition(snapshot, req, self._ctx.shutting_down, controller_epoch)
            except KafkaError as e:
                settle(fut, error=e)
                continue
            if isinstance(outcome, PartitionChange):
                changes.append((outcome, fut))
                touched.add((req.topic, req.partition))
            else:
                settle(fut, outcome)
        return changes
