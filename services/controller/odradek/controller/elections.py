"""Leader elections, the I/O side (the decisions are ``decisions``, ``placement``, ``replication``).

Owns: the elections and ISR shrinks that broker changes call for (Kafka's onBrokerFailure /
onBrokerStartup, offline partitions elected uncleanly where ``unclean.leader.election.enable``
says so), controlled shutdown (the set of brokers shutting down lives in the context),
elections on request (ElectLeaders: preferred or unclean) and the automatic preferred-leader
rebalance (Kafka's ``auto.leader.rebalance.enable`` loop). Every change goes through the
``PartitionStateWriter``.
"""

from __future__ import annotations

import logging
from typing import Sequence

from odradek.cluster import control_plane as cp
from odradek.errors import ErrorCode, KafkaError

from . import decisions, replication
from .context import ControllerContext
from .state_writer import PartitionStateWriter

log = logging.getLogger(__name__)


class Elections:
    def __init__(self, ctx: ControllerContext, writer: PartitionStateWriter) -> None:
        self._ctx = ctx
        self._writer = writer

    async def on_broker_changes(self, controller_epoch: int) -> bool:
        """The loop's share: leaders for partitions whose leader is gone, dead followers out of
        ISRs, over the cached snapshot. True if anything was to be written. Holds the lock;
        store failures are raised (the loop handles them)."""
        ctx = self._ctx
        changes = decisions.partition_changes(ctx.snapshot, controller_epoch, ctx.shutting_down)
        await self._writer.write(changes)
        return bool(changes)

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[cp.TopicPartition]:
        """Mark the broker as shutting down, move its leaderships and ISR memberships away;
        answers the leaderships it keeps (no other ISR member can take them)."""
        ctx = self._ctx
        async with ctx.acting() as (record, snapshot):
            cached = snapshot.broker(broker_id)
            if cached is None or broker_epoch not in (-1, cached.epoch):  # a registration newer than the cache
                record, snapshot = await ctx.fresh()
            broker = snapshot.broker(broker_id)
            if broker is None:
                raise KafkaError(ErrorCode.broker_not_available, f"Broker {broker_id} is not registered.")
            if broker_epoch != -1 and broker_epoch != broker.epoch:
                raise KafkaError(ErrorCode.stale_broker_epoch,
                                 f"Broker {broker_id} sent broker epoch {broker_epoch} but is registered "
                                 f"with epoch {broker.epoch}.")
            if broker_id not in ctx.shutting_down:
                log.info("broker %d (epoch %d) is shutting down", broker_id, broker.epoch)
            ctx.shutting_down[broker_id] = broker.epoch
            await ctx.guarded(self._writer.write(
                replication.shutdown_changes(snapshot, broker_id, ctx.shutting_down, record.epoch)))
            ctx.publish()
            remaining = replication.remaining_leaderships(ctx.snapshot, broker_id)
            if remaining:
                log.info("broker %d still leads %d partitions: %s", broker_id, len(remaining),
                         ", ".join(f"{t}-{p}" for t, p in remaining[:10]))
            return [cp.TopicPartition(t, p) for t, p in remaining]

    async def elect_leaders(self, election_type: int, partitions: Sequence[tuple[str, int]] | None
                            ) -> list[cp.PartitionResult]:
        """Kafka's ElectLeaders over the brokers registered now: one result per partition."""
        ctx = self._ctx
        async with ctx.acting():
            record, snapshot = await ctx.fresh()
            results, changes = replication.elect_leaders(snapshot, election_type, partitions,
                                                         ctx.shutting_down, record.epoch)
            failed = {(c.topic, c.state.partition) for c in await ctx.guarded(self._writer.write(changes))}
            if changes:
                ctx.publish()
            return [r if (r.topic, r.partition) not in failed else cp.PartitionResult(
                r.topic, r.partition, ErrorCode.unknown_server_error,
                "the partition state changed meanwhile; retry") for r in results]

    async def rebalance_loop(self) -> None:
        """Kafka's auto leader rebalance: every interval, preferred elections for the brokers
        whose share of partitions led by someone else exceeds the percentage."""
        ctx = self._ctx
        config = ctx.settings.config
        if not config.auto_leader_rebalance:
            return
        while not ctx.stopping.is_set():
            await ctx.wait(ctx.stopping, config.leader_imbalance_check_interval_s)
            if ctx.stopping.is_set() or not ctx.active:
                continue
            try:
                async with ctx.acting() as (record, snapshot):
                    await self._rebalance(record.epoch, snapshot, config.leader_imbalance_per_broker_percentage)
            except KafkaError as e:
                log.info("auto leader rebalance skipped: %s", e.message)

    async def _rebalance(self, controller_epoch: int, snapshot, percentage: float) -> None:
        ctx = self._ctx
        candidates = replication.rebalance_candidates(snapshot, ctx.shutting_down, percentage)
        if not candidates:
            return
        log.info("auto leader rebalance: preferred election for %s", ", ".join(f"{t}-{p}" for t, p in candidates))
        _, changes = replication.elect_leaders(snapshot, replication.PREFERRED, candidates,
                                               ctx.shutting_down, controller_epoch)
        await ctx.guarded(self._writer.write(changes))
        ctx.publish()
