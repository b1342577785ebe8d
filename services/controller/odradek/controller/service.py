"""The controller's loop: contend for ``/controller``, then keep ZooKeeper and brokers in line.

Owns: the HA loop (a standby contends whenever ``/controller`` disappears; the winner
reconciles and pushes), the reconciliation after every watch event (reload, check we still
lead, finish pending deletions, drop handled log directory events, elections for broker
changes, reassignment steps, publish), kazoo's watch and session callbacks (marshalled into
the loop with ``call_soon_threadsafe``; they only set events), resigning on shutdown, and the
small requests that are no part's own (health, the cluster view, users, producer ids).

The work is done by parts over one ``ControllerContext`` (role, cached snapshot, the lock
that serialises every action, pusher): ``Elections`` (broker changes, controlled shutdown,
preferred / unclean elections, the rebalance), ``IsrChanges`` (AlterPartition),
``Maintenance`` (a broker's maintenance mode),
``Reassigner`` and ``TopicLifecycle``; every partition state they change is written by the
one ``PartitionStateWriter``, which also counts leader elections. Store calls run in threads
(``asyncio.to_thread``).

Role changes: a suspended ZooKeeper connection makes the instance answer NOT_CONTROLLER at
once; a lost session, a ``/controller`` that no longer names it, or a fenced write make it a
standby again. Brokers in controlled shutdown are remembered in memory only (as in Kafka): a
broker that re-registers, or a new controller, starts without it, and a broker retries its
shutdown request anyway.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.cluster import control_plane as cp
from odradek.cluster.model import ClusterMetadata

from . import decisions, replication
from .config import Settings
from .context import ControllerContext
from .elections import Elections
from .isr_changes import IsrChanges
from .maintenance import Maintenance
from .reassigner import Reassigner
from .state_writer import PartitionStateWriter
from .store import ControllerMoved, ControllerRecord, MetadataStore, StoreSnapshot, StoreUnavailable
from .topic_lifecycle import TopicLifecycle

log = logging.getLogger(__name__)
RESIGN_TIMEOUT_S = 5.0


class Controller:
    def __init__(self, store: MetadataStore, settings: Settings) -> None:
        self.ctx = ctx = ControllerContext(store, settings)
        ctx.reconcile = self._reconcile
        self.states = PartitionStateWriter(ctx)
        self.topics = TopicLifecycle(ctx)
        self.reassigner = Reassigner(ctx, self.states)
        self.elections = Elections(ctx, self.states)
        self.isr = IsrChanges(ctx, self.states, self.reassigner)
        self.maintenance = Maintenance(ctx, self.states)
        self.zk_state: str | None = None  # the ZooKeeper session's last state (metrics)
        self.elections_won = 0            # times this instance became the active controller (metrics)

    # --- role (read by the API and the metrics) ------------------------------------------------
    @property
    def settings(self) -> Settings:
        return self.ctx.settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        self.ctx.settings = settings

    @property
    def active(self) -> bool:
        return self.ctx.active

    @property
    def active_snapshot(self) -> StoreSnapshot | None:
        """The cached snapshot while active, else None (metrics)."""
        return self.ctx.snapshot if self.active else None

    @property
    def epoch(self) -> int | None:
        return self.ctx.record.epoch if self.ctx.record else None

    @property
    def leader_elections(self) -> int:
        """Partition leader changes this instance wrote (metrics)."""
        return self.states.leader_elections

    # --- kazoo threads -> loop ------------------------------------------------------------------
    def _on_topics(self, names: list[str]) -> None:
        """Reconcile when a topic appeared or went behind our back (a tool writing ZooKeeper),
        not for our own creations: the cache has them already, and a full reload for each was
        most of the controller's time while 1,000 topics were created at 10,000 partitions."""
        known = self.ctx.snapshot.topics if self.ctx.snapshot is not None else {}
        listed = set(names)
        if listed - known.keys() - self.topics.creating or known.keys() - listed:
            self.ctx.poke()

    def _on_session(self, state: str) -> None:
        log.info("ZooKeeper session %s", state)
        ctx = self.ctx
        ctx.connected = state == "connected"
        self.zk_state = state.upper()
        if state == "lost" and ctx.record is not None:
            asyncio.ensure_future(ctx.step_down("ZooKeeper session lost"))
        ctx.dirty.set()
        ctx.vacant.set()

    def _on_controller(self, record: ControllerRecord | None) -> None:
        if record is None:
            self.ctx.vacant.set()
        if self.ctx.record is not None and record != self.ctx.record:
            self.ctx.dirty.set()  # the next reconcile checks whether we still hold it

    # --- the loop ------------------------------------------------------------------------------
    async def run(self) -> None:
        ctx, store = self.ctx, self.ctx.store
        loop = asyncio.get_running_loop()
        await asyncio.to_thread(store.start)
        ctx.connected = True
        self.zk_state = "CONNECTED"
        self.cluster_id = await asyncio.to_thread(store.cluster_id)
        log.info("controller %s at %s, cluster %s", self.settings.id, self.settings.url, self.cluster_id)

        def threadsafe(fn):
            def call(*args):
                try:
                    loop.call_soon_threadsafe(fn, *args)
                except RuntimeError:  # the loop is closed: we are shutting down
                    pass
            return call
        store.on_session(threadsafe(self._on_session))
        store.watch_controller(threadsafe(self._on_controller))
        store.watch_brokers(threadsafe(ctx.poke))
        store.watch_topics(threadsafe(self._on_topics), threadsafe(ctx.poke))
        store.watch_reassignments(threadsafe(ctx.poke))
        store.watch_log_dir_events(threadsafe(ctx.poke))
        # a cluster default of unclean.leader.election.enable=true elects offline partitions at
        # once, as Kafka's controller does on that dynamic change
        store.watch_cluster_defaults(threadsafe(ctx.poke))
        rebalancer = asyncio.create_task(self.elections.rebalance_loop(), name="leader-rebalance")
        try:
            await self._loop()
        finally:
            rebalancer.cancel()

    async def _loop(self) -> None:
        ctx = self.ctx
        while not ctx.stopping.is_set():
            if ctx.record is None:
                await self._contend()
            else:
                await ctx.wait(ctx.dirty, self.settings.config.resync_interval_s)
                ctx.dirty.clear()
                if ctx.record is not None and not ctx.stopping.is_set():
                    async with ctx.lock:
                        await self._reconcile()

    async def _contend(self) -> None:
        ctx = self.ctx
        ctx.vacant.clear()
        if not ctx.connected:
            await ctx.wait(ctx.vacant, 1.0)
            return
        try:
            current = await asyncio.to_thread(ctx.store.read_controller)
            contend, why = decisions.should_contend(current, self.settings.id)
            record = await asyncio.to_thread(ctx.store.elect, self.settings.id, self.settings.url) \
                if contend else None
        except StoreUnavailable as e:
            log.warning("cannot contend for controller: %s", e)
            await ctx.wait(ctx.vacant, 1.0)
            return
        if record is None:
            log.info("standing by: %s", why if not contend else "another instance won the election")
            await ctx.wait(ctx.vacant, self.settings.config.resync_interval_s)
            return
        log.info("elected controller %s at epoch %d (%s)", record.id, record.epoch, why)
        ctx.record = record
        self.elections_won += 1
        async with ctx.lock:
            await self._reconcile()

    async def _reconcile(self) -> None:
        """Reload, check we still lead, finish deletions, elect leaders, push. Holds the lock."""
        ctx = self.ctx
        mine = ctx.record
        if mine is None:
            return
        try:
            snapshot = await asyncio.to_thread(ctx.store.load)
            ok, why = decisions.still_controller(snapshot, mine)
            if not ok:
                await ctx.step_down(why)
                return
            ctx.snapshot = snapshot
            ctx.shutting_down = {i: e for i, e in ctx.shutting_down.items()
                                 if (b := snapshot.broker(i)) is not None and b.epoch == e}
            for topic in sorted(snapshot.pending_deletions):
                await self.topics.finish_deletion(topic)
            for broker_id in sorted(snapshot.offline_dir_ids):
                log.warning("broker %d reported its log directory offline: its replicas are offline", broker_id)
            handled = decisions.handled_log_dir_events(snapshot)
            if handled:
                await asyncio.to_thread(ctx.store.delete_log_dir_events, handled)
            if await self.elections.on_broker_changes(mine.epoch) or snapshot.pending_deletions:
                await ctx.reload()
            if await self.reassigner.advance(mine.epoch):
                await ctx.reload()
            ctx.publish()
        except ControllerMoved as e:
            await ctx.step_down(str(e))
        except StoreUnavailable as e:
            log.warning("reconcile postponed: %s", e)
            asyncio.get_running_loop().call_later(1.0, ctx.dirty.set)

    # --- requests of no part's own (called by the HTTP API) -----------------------------------------
    def health(self) -> cp.Health:
        """This instance's role and, when active, the replication counts (None on a standby)."""
        snapshot = self.active_snapshot
        return cp.Health(self.settings.id, self.settings.url, self.active, self.epoch,
                         replication.under_replicated(snapshot) if snapshot else None,
                         replication.offline(snapshot) if snapshot else None,
                         tuple(sorted(self.ctx.shutting_down)) if snapshot else None)

    def metadata(self) -> ClusterMetadata:
        record, snapshot = self.ctx.require_active()
        return decisions.cluster_metadata(snapshot, record)

    async def users(self, call):
        """``call(UserAdmin)`` (credentials, ACLs, quotas of OdradekUsers) as the active controller."""
        async with self.ctx.acting():
            return await self.ctx.write(self.ctx.store.user_call, call)

    async def allocate_producer_ids(self, broker_id: int, size: int = 1000) -> cp.ProducerIdBlock:
        """A block of producer ids for a broker's InitProducerId answers (Kafka's block size)."""
        async with self.ctx.acting():
            start, end = await self.ctx.write(self.ctx.store.allocate_producer_id_block, broker_id, size)
            return cp.ProducerIdBlock(broker_id, start, end)

    # --- shutdown --------------------------------------------------------------------------------
    async def shutdown(self) -> None:
        """Resign: stop the loop, stop pushing, delete our ``/controller`` znode, close the store."""
        ctx = self.ctx
        ctx.stopping.set()
        record, ctx.record = ctx.record, None
        await ctx.pusher.stop()
        if record is not None:
            # A request to an unreachable ZooKeeper waits for a reconnection that may never come:
            # bounded, so that SIGTERM ends the process (/controller then goes with the session).
            try:
                await asyncio.wait_for(asyncio.to_thread(ctx.store.resign, record), RESIGN_TIMEOUT_S)
                log.info("resigned as controller (epoch %d)", record.epoch)
            except (StoreUnavailable, asyncio.TimeoutError) as e:
                log.warning("could not resign cleanly: %s", str(e) or "ZooKeeper unreachable")
        await asyncio.to_thread(ctx.store.close)  # also fails the requests still waiting
