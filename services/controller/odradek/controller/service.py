"""The controller's loop: contend for ``/controller``, then keep ZooKeeper and brokers in line.

Owns: the instance's role (standby or active at an epoch), the cached ``StoreSnapshot``,
the single lock that serialises every controller action (Kafka's controller event queue),
and the admin operations the HTTP API calls. Store calls run in threads
(``asyncio.to_thread``); kazoo's watch and session callbacks are marshalled into the loop
with ``call_soon_threadsafe`` and only set events.

Role changes: a standby contends whenever ``/controller`` disappears; the winner reconciles
(pending deletions, leader elections) and pushes. A suspended ZooKeeper connection makes the
instance answer NOT_CONTROLLER at once; a lost session, a ``/controller`` that no longer
names it, or a fenced write make it a standby again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from dataclasses import dataclass

from odradek.cluster.model import ClusterMetadata, TopicMetadata
from odradek.errors import ErrorCode, KafkaError

from . import admin, decisions
from .push import Pusher
from .store import ControllerMoved, ControllerRecord, MetadataStore, StoreSnapshot, StoreUnavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Settings:
    id: str
    url: str
    defaults: admin.Defaults = admin.Defaults()
    resync_interval: float = 10.0  # full reload even without watch events
    delete_push_timeout: float = 5.0  # how long deletion waits for brokers to drop a topic


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
        self._pusher = Pusher(on_stale=lambda b: self._poke())

    # --- role -------------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        """Elected, connected to ZooKeeper, and holding a snapshot loaded since the election."""
        return self._record is not None and self._connected and self._snapshot is not None

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
        self._vacant.set()
        await self._pusher.stop()

    # --- kazoo threads -> loop ------------------------------------------------------------------
    def _poke(self) -> None:
        self._dirty.set()

    def _on_session(self, state: str) -> None:
        log.info("ZooKeeper session %s", state)
        self._connected = state == "connected"
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
        await asyncio.to_thread(self._store.start, 30.0)
        self._connected = True
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
        self._store.watch_topics(threadsafe(self._poke))
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
            for topic in sorted(snapshot.pending_deletions):
                await self._finish_deletion(topic)
            changes = decisions.partition_changes(self._snapshot, mine.epoch)
            for change in changes:
                log.info("partition %s", change.reason)
                if not await asyncio.to_thread(self._store.update_partition_state, change.topic,
                                               change.state, change.version):
                    log.info("partition %s-%d moved meanwhile; reloading", change.topic,
                             change.state.partition)
                    self._dirty.set()
            if changes or snapshot.pending_deletions:
                self._snapshot = await asyncio.to_thread(self._store.load)
            self._publish()
        except ControllerMoved as e:
            await self._step_down(str(e))
        except StoreUnavailable as e:
            log.warning("reconcile postponed: %s", e)
            asyncio.get_running_loop().call_later(1.0, self._dirty.set)

    def _publish(self) -> None:
        if self._record is not None and self._snapshot is not None:
            self._pusher.publish(decisions.cluster_metadata(self._snapshot, self._record))

    async def _finish_deletion(self, topic: str) -> None:
        """Deletion's second half: brokers get a snapshot without the topic, then znodes go."""
        log.info("deleting topic %s: pushing a snapshot without it", topic)
        self._publish()
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
    async def _store_trouble_as_not_controller(self):
        """Admin requests see a fenced or unreachable store as NOT_CONTROLLER (callers retry)."""
        try:
            yield
        except ControllerMoved as e:
            await self._step_down(str(e))
            raise KafkaError(ErrorCode.not_controller, f"no longer the controller: {e}") from None
        except StoreUnavailable as e:
            raise KafkaError(ErrorCode.not_controller, f"controller cannot reach ZooKeeper: {e}") from None

    async def _write(self, fn, *args):
        async with self._store_trouble_as_not_controller():
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
            if not await self._write(self._store.create_topic, plan.name, plan.topic_id,
                                     plan.states, plan.configs):
                await self._reload_after_write()
                raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{req.name}' already exists.")
            log.info("created topic %s (%s) with %d partitions", plan.name, plan.topic_id, len(plan.states))
            await self._reload_after_write()
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
            return configs

    async def delete_topic(self, name: str) -> None:
        async with self._acting() as (_, snapshot):
            admin.check_deletable(snapshot, name)
            await self._write(self._store.mark_for_deletion, name)
            self._snapshot = dataclasses.replace(
                snapshot, pending_deletions=snapshot.pending_deletions | {name})
            async with self._store_trouble_as_not_controller():
                await self._finish_deletion(name)

    # --- shutdown --------------------------------------------------------------------------------
    async def shutdown(self) -> None:
        """Resign: stop the loop, stop pushing, delete our ``/controller`` znode, close the store."""
        self._stopping.set()
        record, self._record = self._record, None
        await self._pusher.stop()
        if record is not None:
            try:
                await asyncio.to_thread(self._store.resign, record)
                log.info("resigned as controller (epoch %d)", record.epoch)
            except StoreUnavailable as e:
                log.warning("could not resign cleanly: %s", e)
        await asyncio.to_thread(self._store.close)
