"""What the controller's parts share (Kafka's ControllerContext plus its event queue's lock).

Owns: the instance's role (``record``: our election, None on a standby; ``connected``), the
cached ``StoreSnapshot``, the single lock that serialises every controller action, the events
the loop waits on (``dirty``: something changed in ZooKeeper; ``vacant``: ``/controller`` may
be free; ``stopping``), the brokers in controlled shutdown (in memory only, as in Kafka), the
pusher with the coalescing of its snapshots, and how a store failure reaches an admin caller
(NOT_CONTROLLER, POLICY_VIOLATION). Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Awaitable, Callable, TypeVar

from odradek.errors import ErrorCode, KafkaError

from . import admin, decisions
from .config import Settings
from .push import Pusher
from .store import ControllerMoved, ControllerRecord, MetadataStore, StoreSnapshot, StoreUnavailable, TooLarge

log = logging.getLogger(__name__)
T = TypeVar("T")

PUBLISH_COALESCE_S = 0.02  # changes within this much time go out in one snapshot


class ControllerContext:
    def __init__(self, store: MetadataStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.record: ControllerRecord | None = None
        self.connected = False
        self.snapshot: StoreSnapshot | None = None
        self.lock = asyncio.Lock()
        self.dirty = asyncio.Event()
        self.vacant = asyncio.Event()
        self.stopping = asyncio.Event()
        self.pusher = Pusher(on_stale=lambda b: self.poke(), tls=settings.tls, version=settings.protocol_version)
        self.shutting_down: dict[int, int] = {}  # broker id -> epoch of the registration shutting down
        self._publish_handle: asyncio.TimerHandle | None = None
        # the loop's reconciliation, for the parts that need a fresh view (set by the Controller)
        self.reconcile: Callable[[], Awaitable[None]] = _no_reconcile

    # --- role -------------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        """Elected, connected to ZooKeeper, and holding a snapshot loaded since the election."""
        return self.record is not None and self.connected and self.snapshot is not None

    def require_active(self) -> tuple[ControllerRecord, StoreSnapshot]:
        if not self.active:
            raise KafkaError(ErrorCode.not_controller, f"{self.settings.id} is not the active controller")
        return self.record, self.snapshot

    async def step_down(self, reason: str) -> None:
        if self.record is not None:
            log.warning("stepping down as controller (epoch %d): %s", self.record.epoch, reason)
        self.record = None
        self.snapshot = None
        self.shutting_down = {}
        self.vacant.set()
        await self.pusher.stop()

    def poke(self) -> None:
        self.dirty.set()

    async def wait(self, event: asyncio.Event, timeout: float) -> None:
        """Until ``event`` or ``stopping`` is set, or ``timeout`` s passed."""
        stop = asyncio.ensure_future(self.stopping.wait())
        other = asyncio.ensure_future(event.wait())
        await asyncio.wait({stop, other}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        other.cancel()

    @contextlib.asynccontextmanager
    async def acting(self):
        """Hold the controller lock as the active controller; give up with NOT_CONTROLLER as
        soon as we stop being active while waiting (a loop stuck on a cut-off ZooKeeper)."""
        self.require_active()
        acquire = asyncio.ensure_future(self.lock.acquire())
        while not acquire.done():
            await asyncio.wait({acquire}, timeout=0.1)
            if not acquire.done() and not self.active:
                acquire.cancel()
                self.require_active()
        try:
            yield self.require_active()
        finally:
            self.lock.release()

    async def fresh(self) -> tuple[ControllerRecord, StoreSnapshot]:
        """Reconcile now (fresh registrations, pending elections), then the active view. Holds the lock."""
        await self.reconcile()
        return self.require_active()

    # --- publishing ---------------------------------------------------------------------------
    def publish(self) -> None:
        """Publish soon: a burst of changes (topics created one after the other, ISR batches)
        builds and sends one snapshot, not one per change (at 10,000 partitions a snapshot
        costs tens of milliseconds to build)."""
        if self._publish_handle is None:
            self._publish_handle = asyncio.get_running_loop().call_later(PUBLISH_COALESCE_S, self.publish_now)

    def publish_now(self) -> None:
        if self._publish_handle is not None:
            self._publish_handle.cancel()
            self._publish_handle = None
        if self.record is not None and self.snapshot is not None:
            self.pusher.publish(decisions.cluster_metadata(self.snapshot, self.record))

    # --- the store, as admin callers see it ------------------------------------------------------
    @contextlib.asynccontextmanager
    async def store_trouble_as_kafka_errors(self):
        """Admin requests see a fenced or unreachable store as NOT_CONTROLLER (callers retry), and
        a write too large for the store as Kafka's controller answers an operation too large for
        one batch of its records: POLICY_VIOLATION."""
        try:
            yield
        except ControllerMoved as e:
            await self.step_down(str(e))
            raise KafkaError(ErrorCode.not_controller, f"no longer the controller: {e}") from None
        except StoreUnavailable as e:
            raise KafkaError(ErrorCode.not_controller, f"controller cannot reach ZooKeeper: {e}") from None
        except TooLarge as e:
            log.warning("refused a write: %s", e)
            raise KafkaError(ErrorCode.policy_violation, admin.TOO_LARGE_BATCH) from None

    async def guarded(self, work: Awaitable[T]) -> T:
        """``work`` with store failures as admin callers see them."""
        async with self.store_trouble_as_kafka_errors():
            return await work

    async def write(self, fn: Callable[..., T], *args) -> T:
        """A store call in a thread, with store failures as admin callers see them."""
        return await self.guarded(asyncio.to_thread(fn, *args))

    async def reload(self) -> StoreSnapshot:
        """The cache read again from the store (store failures raised as the store raises them)."""
        self.snapshot = await asyncio.to_thread(self.store.load)
        return self.snapshot

    async def reload_after_write(self) -> StoreSnapshot:
        await self.guarded(self.reload())
        self.publish()
        return self.snapshot


async def _no_reconcile() -> None:
    raise RuntimeError("the controller's reconciliation is not wired")
