"""The one path by which partition states change (Kafka's PartitionStateMachine's writes).

Owns: writing ``PartitionChange``s (elections, ISR changes) and reassignment ``Move``s
(states with their assignment) to the store, patching or reloading the cached snapshot after
them, the log line of each change written, and the count of leader changes the controller
wrote (Kafka's LeaderElectionRateAndTimeMs): every written state whose leader differs from
the one it replaced counts once, whatever decided it (a broker's death, a controlled
shutdown, a preferred or unclean election, the rebalance, a reassignment). A new partition's
first state is no change and no election: it is created with its topic (``TopicLifecycle``).

State writes are pipelined by the store (``MetadataStore.update_partition_states``: many
partitions a transaction, one a transaction again after a lost race). Store failures are
raised as the store raises them: the loop handles them itself, admin callers wrap a write in
``ControllerContext.guarded``. Holds no lock itself: callers hold the controller lock.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Iterable, Mapping, Sequence

from odradek.cluster.model import PartitionState

from . import decisions, reassignment
from .context import ControllerContext
from .decisions import PartitionChange
from .reassignment import Move
from .store import StoreSnapshot

log = logging.getLogger(__name__)


class PartitionStateWriter:
    def __init__(self, ctx: ControllerContext) -> None:
        self._ctx = ctx
        self.leader_elections = 0  # partition leader changes this instance wrote (metrics)

    async def write(self, changes: Sequence[PartitionChange]) -> list[PartitionChange]:
        """Write ``changes`` (each a compare-and-set on its state znode's version) and patch the
        cache with those written; returns those that lost a race, after which the cache is
        reloaded and the loop poked to reconcile. The caller publishes."""
        if not changes:
            return []
        ctx = self._ctx
        written = await asyncio.to_thread(ctx.store.update_partition_states,
                                          [(c.topic, c.state, c.version) for c in changes])
        done = [c for c, ok in zip(changes, written) if ok]
        failed = [c for c, ok in zip(changes, written) if not ok]
        for change in done:
            log.info("partition %s", change.reason)
        for change in failed:
            log.info("partition %s-%d moved meanwhile; reloading", change.topic, change.state.partition)
        self._count(ctx.snapshot, ((c.topic, c.state) for c in done))
        ctx.snapshot = decisions.with_changes(ctx.snapshot, done)
        if failed:
            await ctx.reload()
            ctx.poke()
        return failed

    async def write_reassignment(self, moves: Sequence[Move],
                                 requests: Mapping[tuple[str, int], tuple[int, ...]] | None) -> bool:
        """Write ``moves`` (assignments and states) and, unless None, ``requests`` as the new
        ``/admin/reassign_partitions`` in one transaction against the cached snapshot's
        versions; False if any moved (nothing written). The caller reloads the cache."""
        ctx = self._ctx
        snapshot = ctx.snapshot
        for move in moves:
            log.info("partition %s", move.reason)
        ok = await asyncio.to_thread(ctx.store.write_reassignments, reassignment.writes(snapshot, moves),
                                     requests, snapshot.reassign_version)
        if ok:
            self._count(snapshot, ((m.topic, m.state) for m in moves))
        return ok

    def _count(self, before: StoreSnapshot, written: Iterable[tuple[str, PartitionState]]) -> None:
        for topic, state in written:
            record = before.topics.get(topic)
            old = record.states.get(state.partition) if record is not None else None
            if old is None or old.leader != state.leader:
                self.leader_elections += 1
