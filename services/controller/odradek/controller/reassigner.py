"""Partition reassignment, the I/O side (the decisions, Kafka's algorithm, are ``reassignment``).

Owns: AlterPartitionReassignments requests (planned against the brokers registered now,
planned again after a lost race, three times at most), ListPartitionReassignments, and the
loop's share: starting the entries other tools wrote into ``/admin/reassign_partitions`` and
completing running reassignments whose target replicas are all in the ISR. Every write goes
through the ``PartitionStateWriter``.
"""

from __future__ import annotations

import logging
from typing import Sequence

from odradek.cluster import control_plane as cp
from odradek.errors import ErrorCode, KafkaError

from . import reassignment, replication
from .context import ControllerContext
from .state_writer import PartitionStateWriter

log = logging.getLogger(__name__)


class Reassigner:
    def __init__(self, ctx: ControllerContext, writer: PartitionStateWriter) -> None:
        self._ctx = ctx
        self._writer = writer

    def ongoing(self) -> list[cp.OngoingReassignment]:
        _, snapshot = self._ctx.require_active()
        return reassignment.in_progress(snapshot)

    async def advance(self, controller_epoch: int) -> bool:
        """Start entries of ``/admin/reassign_partitions``, complete running reassignments whose
        target replicas are all in the ISR. True if anything was written (the caller reloads).
        Holds the lock; store failures are raised."""
        ctx = self._ctx
        snapshot = ctx.snapshot
        eligible = replication.eligible_ids(snapshot, ctx.shutting_down)
        moves, requests, notes = reassignment.pending_work(snapshot, eligible, controller_epoch)
        for note in notes:
            log.warning("%s", note)
        same = requests == dict(snapshot.reassign_requests)
        if not moves and same:
            return False
        if not await self._writer.write_reassignment(moves, None if same else requests):
            log.info("reassignment state moved meanwhile; reloading")
            ctx.poke()
        return True

    async def reassign(self, entries: Sequence[cp.Reassignment]) -> list[cp.PartitionResult]:
        """AlterPartitionReassignments: one result per entry."""
        ctx = self._ctx
        async with ctx.acting():
            record, _ = await ctx.fresh()  # targets are checked against the brokers registered now
            for _attempt in range(3):
                snapshot = ctx.snapshot
                eligible = replication.eligible_ids(snapshot, ctx.shutting_down)
                results, moves, requests = reassignment.plan_request(snapshot, entries, eligible, record.epoch)
                same = requests == dict(snapshot.reassign_requests)
                if not moves and same:
                    break
                if await ctx.guarded(self._writer.write_reassignment(moves, None if same else requests)):
                    await ctx.reload_after_write()
                    break
                await ctx.guarded(ctx.reload())  # lost a race: plan again
            else:
                raise KafkaError(ErrorCode.request_timed_out,
                                 "/admin/reassign_partitions kept changing; retry.")
            return [cp.PartitionResult(t, p, e.code if e else ErrorCode.none, e.message if e else None)
                    for t, p, e in results]
