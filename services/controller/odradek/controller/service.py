"""The controller's loop: contend for ``/controller``, then keep ZooKeeper and brokers in line.

Owns: the instance's role (standby or active at an epoch), the cached ``StoreSnapshot``,
the single lock that serialises every controller action (Kafka's controller event queue),
and the admin operations the HTTP API calls. Store calls run in threads
(``asyncio.to_thread``); kazoo's watch and session callbacks are marshalled into the loop
with ``call_soon_threadsafe`` and only set events.

Replication duties (issue 3): leader elections when brokers come and go, the leader's ISR
changes (AlterPartition), controlled shutdown, preferred / unclean elections on request and
the automatic preferred-leader rebalance, partition reassignment. The set of brokers in
controlled shutdown lives in memory only (as in Kafka): a broker that re-registers, or a new
controller, starts without it, and a broker retries its shutdown request anyway.

Role changes: a standby contends whenever ``/controller`` disappears; the winner reconciles
(pending deletions, leader elections, reassignments) and pushes. A suspended ZooKeeper
connection makes the instance answer NOT_CONTROLLER at once; a lost session, a
``/controller`` that no longer names it, or a fenced write make it a standby again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from dataclasses import dataclass
from typing import Sequence

from odradek.cluster import control_plane as cp
from odradek.cluster.control_plane_tls import ControlPlaneTls
from odradek.cluster.model import ClusterMetadata, PartitionState, TopicMetadata
from odradek.errors import ErrorCode, KafkaError

from . import admin, decisions, reassignment, replication
from .alter_batch import AlterBatcher, registered as _registered, result as _alter_result, settle as _settle
from .decisions import PartitionChange
from .push import Pusher
from .store import ControllerMoved, ControllerRecord, MetadataStore, StoreSnapshot, StoreUnavailable, TooLarge

log = logging.getLogger(__name__)
RESIGN_TIMEOUT_S = 5.0

PUBLISH_COALESCE_S = 0.02  # changes within this much time go out in one snapshot


@dataclass(frozen=True, slots=True)
class Settings:
    id: str
    url: str
    defaults: admin.Defaults = admin.Defaults()
    # A full reload even without watch events (a safety net: every change the controller acts
    # on has a watch). Each reads every partition's state: at 10,000 partitions, every 10 s
    # kept the controller at ~20% of a core and ZooKeeper at ~12% on an idle cluster.
    resync_interval: float = 60.0
    delete_push_timeout: float = 5.0  # how long deletion waits for brokers to drop a topic
    auto_leader_rebalance: bool = True  # Kafka's auto.leader.rebalance.enable
    leader_imbalance_check_interval: float = 300.0  # leader.imbalance.check.interval.seconds
    leader_imbalance_per_broker_percentage: float = 10.0  # leader.imbalance.per.broker.percentage
    tls: ControlPlaneTls | None = None  # the control plane's mutual TLS (None: plaintext HTTP)


class Controller:
    def __init__(self, store: MetadataStore, settings: Settings) -> None:
        self._store = store
        self.settings = settings
        self._record: ControllerRecord | None = None
        self._connected = False
        self._snapshot: StoreSnapshot | None = None
        self._lock = asyncio.Lock()
        self._dirty = asyncio.Event()  # active: something changed in ZooKeeper
        self._vacant = asyncio.Event()  # standby: /controller may be free
        self._stopping = asyncio.Event()
        self._pusher = Pusher(on_stale=lambda b: self._poke(), tls=settings.tls)
        self._shutting_down: dict[int, int] = {}  # broker id -> epoch of the registration shutting down
        self._creating: set[str] = set()  # topics being written by create_topic
        self._publish_handle: asyncio.TimerHandle | None = None
        self._alters = AlterBatcher(self._alter_batch)
        self.zk_state: str | None = None  # the ZooKeeper session's last state (metrics)
        self.elections_won = 0            # times this instance became the active controller (metrics)
        self.leader_elections = 0         # partition leader changes this instance wrote (metrics)

    # --- role -------------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        """Elected, connected to ZooKeeper, and holding a snapshot loaded since the election."""
        return self._record is not None and self._connected and self._snapshot is not None

    @property
    def active_snapshot(self) -> StoreSnapshot | None:
        """The cached snapshot while active, else None (metrics)."""
        return self._snapshot if self.active else None

    @property
    def epoch(self) -> int | None:
        return self._record.epoch if self._record else None

    def _require_active(self) -> tuple[ControllerRecord, StoreSnapshot]:
        if not self.active:
            raise KafkaError(ErrorCode.not_controller, f"{self.settings.id} is not the active controller")
        return self._record, self._snapshot

    async def _step_down(self, reason: str) -> None:
        if self._record is not None:
            log.warning("stepping down as controller (epoch %d): %s", self._record.epoch, reason)
        self._record = None
        self._snapshot = None
        self._shutting_down = {}
        self._vacant.set()
        await self._pusher.stop()

    # --- kazoo threads -> loop ------------------------------------------------------------------
    def _poke(self) -> None:
        self._dirty.set()

    def _on_topics(self, names: list[str]) -> None:
        """Reconcile when a topic appeared or went behind our back (a tool writing ZooKeeper),
        not for our own creations: the cache has them already, and a full reload for each was
        most of the controller's time while 1,000 topics were created at 10,000 partitions."""
        known = self._snapshot.topics if self._snapshot is not None else {}
        listed = set(names)
        if listed - known.keys() - self._creating or known.keys() - listed:
            self._poke()

    def _on_session(self, state: str) -> None:
        log.info("ZooKeeper session %s", state)
        self._connected = state == "connected"
        self.zk_state = state.upper()
        if state == "lost" and self._record is not None:
            asyncio.ensure_future(self._step_down("ZooKeeper session lost"))
        self._dirty.set()
        self._vacant.set()

    def _on_controller(self, record: ControllerRecord | None) -> None:
        if record is None:
            self._vacant.set()
        if self._record is not None and record != self._record:
            self._dirty.set()  # the next reconcile checks whether we still hold it

    # --- the loop ------------------------------------------------------------------------------
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._store.start)
        self._connected = True
        self.zk_state = "CONNECTED"
        self.cluster_id = await asyncio.to_thread(self._store.cluster_id)
        log.info("controller %s at %s, cluster %s", self.settings.id, self.settings.url, self.cluster_id)

        def threadsafe(fn):
            def call(*args):
                try:
                    loop.call_soon_threadsafe(fn, *args)
                except RuntimeError:  # the loop is closed: we are shutting down
                    pass
            return call
        self._store.on_session(threadsafe(self._on_session))
        self._store.watch_controller(threadsafe(self._on_controller))
        self._store.watch_brokers(threadsafe(self._poke))
        self._store.watch_topics(threadsafe(self._on_topics), threadsafe(self._poke))
        self._store.watch_reassignments(threadsafe(self._poke))
        self._store.watch_log_dir_events(threadsafe(self._poke))
        # a cluster default of unclean.leader.election.enable=true elects offline partitions at
        # once, as Kafka's controller does on that dynamic change
        self._store.watch_cluster_defaults(threadsafe(self._poke))
        rebalancer = asyncio.create_task(self._rebalance_loop(), name="leader-rebalance")
        try:
            await self._loop()
        finally:
            rebalancer.cancel()

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            if self._record is None:
                await self._contend()
            else:
                await self._wait(self._dirty, self.settings.resync_interval)
                self._dirty.clear()
                if self._record is not None and not self._stopping.is_set():
                    async with self._lock:
                        await self._reconcile()

    async def _wait(self, event: asyncio.Event, timeout: float) -> None:
        stop = asyncio.ensure_future(self._stopping.wait())
        other = asyncio.ensure_future(event.wait())
        await asyncio.wait({stop, other}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        other.cancel()

    async def _contend(self) -> None:
        self._vacant.clear()
        if not self._connected:
            await self._wait(self._vacant, 1.0)
            return
        try:
            current = await asyncio.to_thread(self._store.read_controller)
            contend, why = decisions.should_contend(current, self.settings.id)
            record = await asyncio.to_thread(self._store.elect, self.settings.id, self.settings.url) \
                if contend else None
        except StoreUnavailable as e:
            log.warning("cannot contend for controller: %s", e)
            await self._wait(self._vacant, 1.0)
            return
        if record is None:
            log.info("standing by: %s", why if not contend else "another instance won the election")
            await self._wait(self._vacant, self.settings.resync_interval)
            return
        log.info("elected controller %s at epoch %d (%s)", record.id, record.epoch, why)
        self._record = record
        self.elections_won += 1
        async with self._lock:
            await self._reconcile()

    async def _reconcile(self) -> None:
        """Reload, check we still lead, finish deletions, elect leaders, push. Holds the lock."""
        mine = self._record
        if mine is None:
            return
        try:
            snapshot = await asyncio.to_thread(self._store.load)
            ok, why = decisions.still_controller(snapshot, mine)
            if not ok:
                await self._step_down(why)
                return
            self._snapshot = snapshot
            self._shutting_down = {i: e for i, e in self._shutting_down.items()
                                   if (b := snapshot.broker(i)) is not None and b.epoch == e}
            for topic in sorted(snapshot.pending_deletions):
                await self._finish_deletion(topic)
            for broker_id in sorted(snapshot.offline_dir_ids):
                log.warning("broker %d reported its log directory offline: its replicas are offline", broker_id)
            handled = decisions.handled_log_dir_events(snapshot)
            if handled:
                await asyncio.to_thread(self._store.delete_log_dir_events, handled)
            changes = decisions.partition_changes(self._snapshot, mine.epoch, self._shutting_down)
            for change in changes:
                log.info("partition %s", change.reason)
            written = await asyncio.to_thread(self._store.update_partition_states,
                                              [(c.topic, c.state, c.version) for c in changes]) if changes else []
            for change, ok in zip(changes, written):
                if not ok:
                    log.info("partition %s-%d moved meanwhile; reloading", change.topic,
                             change.state.partition)
                    self._dirty.set()
            if changes or snapshot.pending_deletions:
                self._snapshot = await asyncio.to_thread(self._store.load)
            if await self._advance_reassignments(mine):
                self._snapshot = await asyncio.to_thread(self._store.load)
            self._publish()
        except ControllerMoved as e:
            await self._step_down(str(e))
        except StoreUnavailable as e:
            log.warning("reconcile postponed: %s", e)
            asyncio.get_running_loop().call_later(1.0, self._dirty.set)

    async def _advance_reassignments(self, mine: ControllerRecord) -> bool:
        """Start entries of ``/admin/reassign_partitions``, complete running reassignments whose
        target replicas are all in the ISR. True if anything was written. Holds the lock."""
        snapshot = self._snapshot
        eligible = replication.eligible_ids(snapshot, self._shutting_down)
        moves, requests, notes = reassignment.pending_work(snapshot, eligible, mine.epoch)
        for note in notes:
            log.warning("%s", note)
        same = requests == dict(snapshot.reassign_requests)
        if not moves and same:
            return False
        for move in moves:
            log.info("partition %s", move.reason)
        if not await asyncio.to_thread(self._store.write_reassignments, reassignment.writes(snapshot, moves),
                                       None if same else requests, snapshot.reassign_version):
            log.info("reassignment state moved meanwhile; reloading")
            self._dirty.set()
        return True

    def _publish(self) -> None:
        """Publish soon: a burst of changes (topics created one after the other, ISR batches)
        builds and sends one snapshot, not one per change (at 10,000 partitions a snapshot
        costs tens of milliseconds to build)."""
        if self._publish_handle is None:
            self._publish_handle = asyncio.get_running_loop().call_later(PUBLISH_COALESCE_S, self._publish_now)

    def _publish_now(self) -> None:
        if self._publish_handle is not None:
            self._publish_handle.cancel()
            self._publish_handle = None
        if self._record is not None and self._snapshot is not None:
            self._pusher.publish(decisions.cluster_metadata(self._snapshot, self._record))

    async def _finish_deletion(self, topic: str) -> None:
        """Deletion's second half: brokers get a snapshot without the topic, then znodes go."""
        log.info("deleting topic %s: pushing a snapshot without it", topic)
        self._publish_now()
        if not await self._pusher.wait_delivered(self.settings.delete_push_timeout):
            log.info("deleting topic %s: not every broker answered; they drop it on their next push", topic)
        await asyncio.to_thread(self._store.delete_topic, topic)
        snapshot = self._snapshot
        self._snapshot = dataclasses.replace(
            snapshot, topics={n: t for n, t in snapshot.topics.items() if n != topic},
            pending_deletions=snapshot.pending_deletions - {topic})
        log.info("deleted topic %s", topic)

    # --- admin operations (called by the HTTP API) ------------------------------------------
    def metadata(self) -> ClusterMetadata:
        record, snapshot = self._require_active()
        return decisions.cluster_metadata(snapshot, record)

    @contextlib.asynccontextmanager
    async def _acting(self):
        """Hold the controller lock as the active controller; give up with NOT_CONTROLLER as
        soon as we stop being active while waiting (a loop stuck on a cut-off ZooKeeper)."""
        self._require_active()
        acquire = asyncio.ensure_future(self._lock.acquire())
        while not acquire.done():
            await asyncio.wait({acquire}, timeout=0.1)
            if not acquire.done() and not self.active:
                acquire.cancel()
                self._require_active()
        try:
            yield self._require_active()
        finally:
            self._lock.release()

    @contextlib.asynccontextmanager
    async def _store_trouble_as_kafka_errors(self):
        """Admin requests see a fenced or unreachable store as NOT_CONTROLLER (callers retry), and
        a write too large for the store as Kafka's controller answers an operation too large for
        one batch of its records: POLICY_VIOLATION."""
        try:
            yield
        except ControllerMoved as e:
            await self._step_down(str(e))
            raise KafkaError(ErrorCode.not_controller, f"no longer the controller: {e}") from None
        except StoreUnavailable as e:
            raise KafkaError(ErrorCode.not_controller, f"controller cannot reach ZooKeeper: {e}") from None
        except TooLarge as e:
            log.warning("refused a write: %s", e)
            raise KafkaError(ErrorCode.policy_violation, admin.TOO_LARGE_BATCH) from None

    async def _write(self, fn, *args):
        async with self._store_trouble_as_kafka_errors():
            return await asyncio.to_thread(fn, *args)

    async def _reload_after_write(self) -> StoreSnapshot:
        self._snapshot = await self._write(self._store.load)
        self._publish()
        return self._snapshot

    async def create_topic(self, req: admin.CreateTopic) -> TopicMetadata:
        async with self._acting() as (record, snapshot):
            plan = admin.plan_create(req, snapshot, self.settings.defaults, record.epoch)
            metadata = TopicMetadata(plan.name, plan.topic_id,
                                     tuple(plan.states[p] for p in sorted(plan.states)), plan.configs)
            if req.validate_only:
                return metadata
            self._creating.add(plan.name)  # its znode's watch event may come before the cache has it
            try:
                if not await self._write(self._store.create_topic, plan.name, plan.topic_id,
                                         plan.states, plan.configs):
                    await self._reload_after_write()
                    raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{req.name}' already exists.")
            finally:
                self._creating.discard(plan.name)
            log.info("created topic %s (%s) with %d partitions", plan.name, plan.topic_id, len(plan.states))
            self._snapshot = admin.with_created(self._snapshot, plan)  # no reload of every topic
            self._publish()
            return metadata

    async def create_partitions(self, name: str, count: int, validate_only: bool) -> TopicMetadata:
        async with self._acting() as (record, snapshot):
            topic, new_states = admin.plan_partitions(snapshot, name, count, record.epoch)
            if validate_only:
                return TopicMetadata(name, topic.topic_id, tuple(topic.states[p] for p in sorted(topic.states))
                                     + tuple(new_states[p] for p in sorted(new_states)), dict(topic.configs))
            if not await self._write(self._store.add_partitions, topic, new_states):
                await self._reload_after_write()
                raise KafkaError(ErrorCode.invalid_partitions,
                                 f"Topic {name} changed while adding partitions; retry.")
            log.info("topic %s now has %d partitions", name, count)
            return (await self._reload_after_write()).topics[name].metadata()

    async def alter_configs(self, name: str, set_: dict, delete: list[str], validate_only: bool) -> dict:
        async with self._acting() as (_, snapshot):
            topic, configs = admin.plan_configs(snapshot, name, set_, delete)
            if validate_only:
                return configs
            if not await self._write(self._store.set_topic_configs, topic, configs):
                await self._reload_after_write()
                raise KafkaError(ErrorCode.invalid_config, f"Configs of topic {name} changed meanwhile; retry.")
            log.info("topic %s configs now %s", name, configs)
            await self._reload_after_write()
            self._poke()  # e.g. unclean.leader.election.enable=true elects offline partitions
            return configs

    async def delete_topic(self, name: str) -> None:
        async with self._acting() as (_, snapshot):
            admin.check_deletable(snapshot, name)
            await self._write(self._store.mark_for_deletion, name)
            self._snapshot = dataclasses.replace(
                snapshot, pending_deletions=snapshot.pending_deletions | {name})
            async with self._store_trouble_as_kafka_errors():
                await self._finish_deletion(name)

    # --- replication operations (called by the HTTP API) -----------------------------------------
    def health(self) -> cp.Health:
        """This instance's role and, when active, the replication counts (None on a standby)."""
        snapshot = self._snapshot if self.active else None
        return cp.Health(self.settings.id, self.settings.url, self.active, self.epoch,
                         replication.under_replicated(snapshot) if snapshot else None,
                         replication.offline(snapshot) if snapshot else None,
                         tuple(sorted(self._shutting_down)) if snapshot else None)

    async def _apply(self, changes: list[PartitionChange]) -> list[PartitionChange]:
        """Write each change by CAS and patch the cache; returns the changes that lost a race
        (the cache is reloaded then). Holds the lock; the caller publishes."""
        failed = []
        for change in changes:
            log.info("partition %s", change.reason)
        written = await self._write(self._store.update_partition_states,
                                    [(c.topic, c.state, c.version) for c in changes]) if changes else []
        done = []
        for change, ok in zip(changes, written):
            record = self._snapshot.topics.get(change.topic)
            before = record.states.get(change.state.partition) if record is not None else None
            if ok:
                done.append(change)
                if before is None or before.leader != change.state.leader:
                    self.leader_elections += 1
            else:
                failed.append(change)
        self._snapshot = decisions.with_changes(self._snapshot, done)
        if failed:
            self._snapshot = await self._write(self._store.load)
            self._dirty.set()
        return failed

    async def _fresh(self) -> tuple[ControllerRecord, StoreSnapshot]:
        """Reconcile now (fresh registrations, pending elections), then the active view."""
        await self._reconcile()
        return self._require_active()

    async def alter_partition(self, req: cp.AlterPartition) -> PartitionState:
        """AlterPartition from a partition's leader; answers the partition's state afterwards.
        Requests arriving together are decided and written as one batch (``_alter_batch``)."""
        self._require_active()
        return await self._alters.submit(req)

    async def alter_partitions(self, req: cp.AlterPartitions) -> cp.AlterPartitionResults:
        """A leader's ISR changes for many partitions: each decided and written as
        ``alter_partition``'s are (in the same batches), each answered with its own outcome."""
        self._require_active()
        outcomes = await asyncio.gather(*(self._alters.submit(a) for a in req.partitions), return_exceptions=True)
        return cp.AlterPartitionResults(tuple(_alter_result(a, o) for a, o in zip(req.partitions, outcomes)))

    async def _alter_batch(self, batch: list[tuple[cp.AlterPartition, asyncio.Future]]) -> None:
        """Decide every request against the cached snapshot, write the changes pipelined, patch
        the cache, publish once (Kafka's controller takes many partitions per AlterPartition).
        A request whose partition already has a change in this batch waits for the next one."""
        async with self._acting() as (record, snapshot):
            if any(not _registered(snapshot, req) for req, _ in batch):
                record, snapshot = await self._fresh()  # the cache may predate a re-registration
            changes: list[tuple[PartitionChange, asyncio.Future]] = []
            touched: set[tuple[str, int]] = set()
            for req, fut in batch:
                if (req.topic, req.partition) in touched:
                    self._alters.requeue(req, fut)
                    continue
                try:
                    outcome = replication.alter_partition(snapshot, req, self._shutting_down, record.epoch)
                except KafkaError as e:
                    _settle(fut, error=e)
                    continue
                if isinstance(outcome, PartitionChange):
                    changes.append((outcome, fut))
                    touched.add((req.topic, req.partition))
                else:
                    _settle(fut, outcome)
            if not changes:
                return
            written = await self._write(self._store.update_partition_states,
                                        [(c.topic, c.state, c.version) for c, _ in changes])
            done = [c for (c, _), ok in zip(changes, written) if ok]
            for change in done:
                log.info("partition %s", change.reason)
            self._snapshot = decisions.with_changes(self._snapshot, done)
            if len(done) < len(changes):
                await self._reload_after_write()
            if any(self._snapshot.topics[c.topic].reassigning(c.state.partition) for c in done):
                async with self._store_trouble_as_kafka_errors():
                    if await self._advance_reassignments(record):
                        self._snapshot = await asyncio.to_thread(self._store.load)
            self._publish()
            for (change, fut), ok in zip(changes, written):
                topic, p = change.topic, change.state.partition
                _settle(fut, self._snapshot.topics[topic].states[p] if ok else None,
                        None if ok else KafkaError(ErrorCode.invalid_update_version,
                                                   f"The state of {topic}-{p} changed meanwhile."))

    async def users(self, call):
        """``call(UserAdmin)`` (credentials, ACLs, quotas of OdradekUsers) as the active controller."""
        async with self._acting():
            return await self._write(self._store.user_call, call)

    async def allocate_producer_ids(self, broker_id: int, size: int = 1000) -> cp.ProducerIdBlock:
        """A block of producer ids for a broker's InitProducerId answers (Kafka's block size)."""
        async with self._acting():
            start, end = await self._write(self._store.allocate_producer_id_block, broker_id, size)
            return cp.ProducerIdBlock(broker_id, start, end)

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[cp.TopicPartition]:
        """Mark the broker as shutting down, move its leaderships and ISR memberships away;
        answers the leaderships it keeps (no other ISR member can take them)."""
        async with self._acting() as (record, snapshot):
            cached = snapshot.broker(broker_id)
            if cached is None or broker_epoch not in (-1, cached.epoch):  # a registration newer than the cache
                record, snapshot = await self._fresh()
            broker = snapshot.broker(broker_id)
            if broker is None:
                raise KafkaError(ErrorCode.broker_not_available, f"Broker {broker_id} is not registered.")
            if broker_epoch != -1 and broker_epoch != broker.epoch:
                raise KafkaError(ErrorCode.stale_broker_epoch,
                                 f"Broker {broker_id} sent broker epoch {broker_epoch} but is registered "
                                 f"with epoch {broker.epoch}.")
            if broker_id not in self._shutting_down:
                log.info("broker %d (epoch %d) is shutting down", broker_id, broker.epoch)
            self._shutting_down[broker_id] = broker.epoch
            await self._apply(replication.shutdown_changes(snapshot, broker_id, self._shutting_down,
                                                           record.epoch))
            self._publish()
            remaining = replication.remaining_leaderships(self._snapshot, broker_id)
            if remaining:
                log.info("broker %d still leads %d partitions: %s", broker_id, len(remaining),
                         ", ".join(f"{t}-{p}" for t, p in remaining[:10]))
            return [cp.TopicPartition(t, p) for t, p in remaining]

    async def elect_leaders(self, election_type: int, partitions: Sequence[tuple[str, int]] | None
                            ) -> list[cp.PartitionResult]:
        async with self._acting():
            record, snapshot = await self._fresh()  # answers about the brokers registered now
            results, changes = replication.elect_leaders(snapshot, election_type, partitions,
                                                         self._shutting_down, record.epoch)
            failed = {(c.topic, c.state.partition) for c in await self._apply(changes)}
            if changes:
                self._publish()
            return [r if (r.topic, r.partition) not in failed else cp.PartitionResult(
                r.topic, r.partition, ErrorCode.unknown_server_error,
                "the partition state changed meanwhile; retry") for r in results]

    async def _rebalance_loop(self) -> None:
        """Kafka's auto leader rebalance: every interval, preferred elections for the brokers
        whose share of partitions led by someone else exceeds the percentage."""
        if not self.settings.auto_leader_rebalance:
            return
        while not self._stopping.is_set():
            await self._wait(self._stopping, self.settings.leader_imbalance_check_interval)
            if self._stopping.is_set() or not self.active:
                continue
            try:
                async with self._acting() as (record, snapshot):
                    candidates = replication.rebalance_candidates(
                        snapshot, self._shutting_down, self.settings.leader_imbalance_per_broker_percentage)
                    if not candidates:
                        continue
                    log.info("auto leader rebalance: preferred election for %s",
                             ", ".join(f"{t}-{p}" for t, p in candidates))
                    _, changes = replication.elect_leaders(snapshot, replication.PREFERRED, candidates,
                                                           self._shutting_down, record.epoch)
                    await self._apply(changes)
                    self._publish()
            except KafkaError as e:
                log.info("auto leader rebalance skipped: %s", e.message)

    def reassignments(self) -> list[cp.OngoingReassignment]:
        _, snapshot = self._require_active()
        return reassignment.in_progress(snapshot)

    async def reassign(self, entries: Sequence[cp.Reassignment]) -> list[cp.PartitionResult]:
        """AlterPartitionReassignments: one result per entry."""
        async with self._acting():
            record, _ = await self._fresh()  # targets are checked against the brokers registered now
            for _attempt in range(3):
                snapshot = self._snapshot
                eligible = replication.eligible_ids(snapshot, self._shutting_down)
                results, moves, requests = reassignment.plan_request(snapshot, entries, eligible, record.epoch)
                same = requests == dict(snapshot.reassign_requests)
                if not moves and same:
                    break
                for move in moves:
                    log.info("partition %s", move.reason)
                if await self._write(self._store.write_reassignments, reassignment.writes(snapshot, moves),
                                     None if same else requests, snapshot.reassign_version):
                    await self._reload_after_write()
                    break
                self._snapshot = await self._write(self._store.load)  # lost a race: plan again
            else:
                raise KafkaError(ErrorCode.request_timed_out,
                                 "/admin/reassign_partitions kept changing; retry.")
            return [cp.PartitionResult(t, p, e.code if e else ErrorCode.none, e.message if e else None)
                    for t, p, e in results]

    # --- shutdown --------------------------------------------------------------------------------
    async def shutdown(self) -> None:
        """Resign: stop the loop, stop pushing, delete our ``/controller`` znode, close the store."""
        self._stopping.set()
        record, self._record = self._record, None
        await self._pusher.stop()
        if record is not None:
            # A request to an unreachable ZooKeeper waits for a reconnection that may never come:
            # bounded, so that SIGTERM ends the process (/controller then goes with the session).
            try:
                await asyncio.wait_for(asyncio.to_thread(self._store.resign, record), RESIGN_TIMEOUT_S)
                log.info("resigned as controller (epoch %d)", record.epoch)
            except (StoreUnavailable, asyncio.TimeoutError) as e:
                log.warning("could not resign cleanly: %s", str(e) or "ZooKeeper unreachable")
        await asyncio.to_thread(self._store.close)  # also fails the requests still waiting
