"""Maintenance mode for one broker (Redpanda's ``rpk cluster maintenance enable|disable|status``),
the I/O side; the decisions are ``replication.maintenance_moves`` and the elections' ``avoid``.

A broker in maintenance keeps running and replicating (it stays in its ISRs, so it stays
ready), but leads nothing it can hand over: enabling moves each of its leaderships to the first
other in-sync replica, and while it lasts every election (broker changes, controlled shutdown,
preferred, the automatic rebalance) passes it over, electing it only where it is the last
live ISR member (an available partition beats an offline one). Disabling runs a preferred
election for the partitions whose preferred replica it is, as ``kafka-leader-election
--election-type preferred`` would. The state is ``/admin/maintenance/<id>`` in ZooKeeper,
loaded with every snapshot, so it survives a controller failover. One broker at a time, as
Redpanda allows: draining a second would leave the first's leaderships nowhere to go.
"""

from __future__ import annotations

import logging

from odradek.cluster import control_plane as cp
from odradek.cluster import versions
from odradek.errors import ErrorCode, KafkaError

from . import replication
from .context import ControllerContext
from .state_writer import PartitionStateWriter
from .store import StoreSnapshot

log = logging.getLogger(__name__)


class Maintenance:
    def __init__(self, ctx: ControllerContext, writer: PartitionStateWriter) -> None:
        self._ctx = ctx
        self._writer = writer

    def status(self, broker_id: int) -> cp.Maintenance:
        _, snapshot = self._ctx.require_active()
        return _answer(snapshot, broker_id)

    async def enable(self, broker_id: int) -> cp.Maintenance:
        ctx = self._ctx
        # a controller of the previous release (a failover while rolling) would not read the znode
        versions.require(ctx.settings.protocol_version, versions.MAINTENANCE, "maintenance mode")
        async with ctx.acting():
            record, snapshot = await ctx.fresh()
            if snapshot.broker(broker_id) is None:
                raise KafkaError(ErrorCode.broker_not_available, f"Broker {broker_id} is not registered.")
            others = sorted(snapshot.maintenance - {broker_id})
            if others:
                raise KafkaError(ErrorCode.invalid_request, f"Broker {others[0]} is in maintenance already: "
                                                            "one broker at a time.")
            if broker_id not in snapshot.maintenance:
                await ctx.write(ctx.store.set_maintenance, broker_id, True)
                snapshot = await ctx.guarded(ctx.reload())
                log.info("broker %d enters maintenance", broker_id)
            await ctx.guarded(self._writer.write(
                replication.maintenance_moves(snapshot, broker_id, ctx.shutting_down, record.epoch)))
            ctx.publish()
            return _answer(ctx.snapshot, broker_id)

    async def disable(self, broker_id: int) -> cp.Maintenance:
        ctx = self._ctx
        async with ctx.acting():
            record, snapshot = await ctx.fresh()
            if broker_id in snapshot.maintenance:
                await ctx.write(ctx.store.set_maintenance, broker_id, False)
                snapshot = await ctx.guarded(ctx.reload())
                log.info("broker %d leaves maintenance", broker_id)
            partitions = replication.preferred_of(snapshot, broker_id)
            if partitions:
                _, changes = replication.elect_leaders(snapshot, replication.PREFERRED, partitions,
                                                       ctx.shutting_down, record.epoch)
                await ctx.guarded(self._writer.write(changes))
            ctx.publish()
            return _answer(ctx.snapshot, broker_id)


def _answer(snapshot: StoreSnapshot, broker_id: int) -> cp.Maintenance:
    return cp.Maintenance(broker_id, broker_id in snapshot.maintenance,
                          len(replication.remaining_leaderships(snapshot, broker_id)))
