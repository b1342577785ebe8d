"""Followers: one fetcher task per source broker (Kafka's ReplicaFetcherThread).

``ReplicaFetcherManager`` maps each followed partition to the fetcher of its leader.
A partition starts **truncating**: the fetcher asks the leader (OffsetForLeaderEpoch v4)
where our latest leader epoch ends and truncates to min(that end offset, our end offset for
the epoch the leader answered, our LEO) (KIP-101/KIP-279); without any epoch, to our HW.
Then it **fetches** from our LEO (Fetch v12 with ``replica_id`` = our id, 500 ms max wait,
min 1 byte; in a fetch session with the leader, KIP-227, so that only partitions whose
position changed are listed, see session_handler), appends with ``append_as_follower`` and sets HW = min(leader HW, our LEO).
The leader's long poll is what keeps an idle cluster idle: no busy loop here.

Replication throttles (``quotas.replication``, Kafka's RemoteLeaderEndPoint.buildFetch): while
the follower quota is exceeded, the throttled partitions not caught up (lag > 0, or not yet
known) are left out of the fetch, and so out of the session, until it is not; when nothing
else is left to fetch, the fetcher sleeps until the rate is back at the quota. Bytes appended
for throttled partitions are recorded against it.

What a fetch costs does not grow with the partitions followed when they are idle: a follower's
log moves only by this fetcher's own appends and truncations, so the positions computed for
the last fetch are kept and only the partitions its answer touched are read again. Every
partition is looked at again (a *walk*: which are ready, truncating, backing off, still have a
log) when one is added or removed, backs off or is due back from a backoff, after a snapshot,
and every ``WALK_INTERVAL_S`` (log start offsets moved by retention reach the leader then).
At 3,333 partitions from one leader the walk was most of an idle broker's CPU at 2 fetches a
second (py-spy, 2026-11-28).

Errors per partition: NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH and the rest back
off ``FETCH_BACKOFF_S`` (the next snapshot replaces the partition's state and retries at
once); OFFSET_MOVED_TO_TIERED_STORAGE rebuilds the log from the object store at the leader's local
log start (``tier_state``, KIP-405); OFFSET_OUT_OF_RANGE truncates fully to the leader's log start when that is past our
LEO, else truncates to the leader's HW. A broken connection backs off every partition.
A write failing with an OSError (an append, a truncation) is a storage failure
(``storage_failed``): the data directory goes offline and ``log_of`` answers None from then
on, so fetching stops.

Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from odradek.broker.metrics.stats import TopicStats
from odradek.broker.storage.checkpoint import grouped_writes
from odradek.broker.replication.client import Connector, KafkaClient
from odradek.broker.replication.fetch_request import VERSION as FETCH_VERSION, FollowerFetch
from odradek.broker.replication.session_handler import FetchSessionHandler
from odradek.broker.replication.tier_state import build_remote_state
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make
from kio.static.constants import EntityType

if TYPE_CHECKING:
    from odradek.broker.quotas.replication import ReplicationQuota
    from odradek.broker.storage import Log

log = logging.getLogger(__name__)

EPOCH_VERSION = 4
MAX_WAIT_MS = 500
MAX_BYTES = 10 * 1024 * 1024            # replica.fetch.response.max.bytes
PARTITION_MAX_BYTES = 1024 * 1024       # replica.fetch.max.bytes
MIN_THROTTLED_BYTES = 16 * 1024         # a throttled partition's least max bytes: a producer's default batch.size
FETCH_BACKOFF_S = 1.0                   # replica.fetch.backoff.ms
SOCKET_TIMEOUT_S = 30.0                 # replica.socket.timeout.ms
# Every partition looked at again at least this often: all it finds is a log start offset
# moved by the follower's own retention (checked every 40 s at 10,000 logs, by Kafka every 5
# minutes); at 5 s the walk was a third of an idle broker's remaining CPU at 10,000 replicas.
WALK_INTERVAL_S = 30.0

TP = tuple[str, int]
SESSION_ERRORS = frozenset({ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch,
                            ErrorCode.fetch_session_topic_id_error})  # retried at once with a full request


@dataclass(eq=False, slots=True)
class FetchState:
    topic: str
    partition: int
    leader_id: int
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0
    lag: int = -1  # the leader's HW minus our log end, as of the last fetch (Kafka's fetcher lag; -1: none yet)
    tiered: bool = False      # behind the leader's local log start: rebuilt from the store first (tier_state)
    leader_log_start: int = -1

    @property
    def in_sync(self) -> bool:
        """Caught up as of the last fetch (Kafka's PartitionFetchState.isReplicaInSync)."""
        return self.lag == 0


class ReplicaFetcherManager:
    def __init__(self, broker_id: int, log_of: Callable[[str, int], "Log | None"],
                 address_of: Callable[[int], tuple[str, int] | None], connector: Connector | None = None,
                 storage_failed: Callable[[str, OSError], object] = lambda _what, _e: None,
                 hw_advanced: Callable[[TP], None] = lambda _tp: None,
                 quota: "ReplicationQuota | None" = None) -> None:
        self.broker_id = broker_id
        self.quota = quota  # the follower replication throttle
        self.hw_advanced = hw_advanced  # consumers long-polling on this follower wake up (KIP-392)
        self.connector = connector  # opens the inter-broker listener's connections (TLS, SASL)
        self.log_of = log_of
        self.address_of = address_of
        self.storage_failed = storage_failed
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._source: dict[TP, int] = {}
        # topic -> (RemoteLogReader, topic id) with tiered storage on this broker (set by the ReplicaManager)
        self.remote: Callable[[str], tuple | None] = lambda _topic: None
        self.topic_stats = TopicStats()  # the broker's BrokerTopicMetrics (set by the ReplicaManager): rebuilds count there

    def add(self, tp: TP, leader_id: int, leader_epoch: int) -> None:
        """(Re)start following ``tp`` from ``leader_id``: truncation first."""
        self.remove(tp)
        fetcher = self._fetchers.get(leader_id)
        if fetcher is None:
            fetcher = self._fetchers[leader_id] = ReplicaFetcher(self, leader_id)
        fetcher.add(FetchState(tp[0], tp[1], leader_id, leader_epoch))
        self._source[tp] = leader_id

    def remove(self, tp: TP) -> None:
        source = self._source.pop(tp, None)
        if source is not None:
            self._fetchers[source].remove(tp)

    def following(self) -> dict[TP, int]:
        return dict(self._source)

    def max_lag(self) -> int:
        """Kafka's ReplicaFetcherManager MaxLag: the largest lag (in records) of a followed partition."""
        return max((max(s.lag, 0) for f in self._fetchers.values() for s in f.states.values()), default=0)

    def metadata_changed(self) -> None:
        """Leaders' addresses may have changed: wake fetchers sleeping on a backoff."""
        for fetcher in self._fetchers.values():
            fetcher.retry_now()

    async def close(self) -> None:
        await asyncio.gather(*(f.close() for f in self._fetchers.values()), return_exceptions=True)
        self._fetchers.clear()
        self._source.clear()


class ReplicaFetcher:
    def __init__(self, manager: ReplicaFetcherManager, source: int) -> None:
        self.manager = manager
        self.source = source
        self.states: dict[TP, FetchState] = {}
        self._changed = asyncio.Event()
        self._client: KafkaClient | None = None
        self.session = FetchSessionHandler()
        self._closed = False
        # the fetch positions kept between walks: what the next fetch asks, per partition
        self._asked: dict[TP, tuple[FetchState, int]] = {}
        self._wanted: dict[TP, tuple[int, int, int]] = {}
        self._touched: set[TP] = set()  # answered since the last fetch: positions to read again
        self._walk_at = 0.0             # monotonic time of the next walk (0: before the next fetch)
        self._walked = False            # positions recomputed since the last fetch was built
        self._held: set[TP] = set()     # left out of the last fetch by the follower throttle
        self._client_current = False    # the client's address checked since the last snapshot
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"replica-fetcher-{source}")

    def add(self, state: FetchState) -> None:
        self.states[(state.topic, state.partition)] = state
        self._walk_at = 0.0
        self._changed.set()

    def remove(self, tp: TP) -> None:
        self.states.pop(tp, None)
        self._walk_at = 0.0

    def retry_now(self) -> None:
        for state in self.states.values():
            state.delayed_until = 0.0
        self._walk_at = 0.0
        self._client_current = False   # the source's address may have changed with the snapshot
        self._changed.set()

    def _current(self, state: FetchState) -> "Log | None":
        """The log if ``state`` is still what we follow (else its answer is dropped)."""
        if self.states.get((state.topic, state.partition)) is not state:
            return None
        lg = self.manager.log_of(state.topic, state.partition)
        return lg if lg is not None and not lg.closed else None

    async def _run(self) -> None:
        while not self._closed:
            ready = None  # between walks: the kept positions
            if not (time.monotonic() < self._walk_at and self._wanted):
                ready = await self._walk()
                if not ready:
                    continue
            try:
                client = self._client_for_source()
                if not client.connected:   # awaited only to connect: a coroutine chain less per fetch
                    await client.connect()
                if ready is None:
                    await self._fetch(client, self._reread_touched())
                else:
                    await self._truncate_then_fetch(client, ready)
            except ConnectionError as e:
                log.info("fetcher from broker %d: %s; retrying in %.0f s", self.source, e, FETCH_BACKOFF_S)
                self._delay(ready if ready is not None else [state for state, _ in self._asked.values()])
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a bug must not stop replication for good; it is logged
                log.exception("fetcher from broker %d failed; retrying", self.source)
                self._delay(ready if ready is not None else [state for state, _ in self._asked.values()])

    async def _walk(self) -> list[FetchState]:
        """Every partition looked at: those ready to truncate or fetch (none: after waiting for
        the first backoff to end or a change)."""
        now = time.monotonic()
        ready = [s for s in self.states.values() if s.delayed_until <= now]
        if not ready:
            timeout = min((s.delayed_until for s in self.states.values()), default=now + 3600) - now
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), max(timeout, 0.01))
            except asyncio.TimeoutError:
                pass
            return []
        gone = [s for s in ready if self._current(s) is None]
        if gone:  # no log to write to (yet): wait for the next snapshot rather than spin
            self._delay(gone)
            ready = [s for s in ready if s not in gone]
        return ready

    async def _truncate_then_fetch(self, client: KafkaClient, ready: list[FetchState]) -> None:
        tiered = [s for s in ready if s.tiered]
        if tiered:
            await build_remote_state(self, client, tiered, SOCKET_TIMEOUT_S)
        truncating = [s for s in ready if s.truncating and not s.tiered]
        if truncating:
            await self._truncate(client, truncating)
        self._keep_positions([s for s in ready if not s.truncating and s.delayed_until <= time.monotonic()])
        if self._wanted:
            await self._fetch(client)

    def _reread_touched(self) -> set[TP]:
        """Between walks: the positions of the partitions the last answer touched, read again."""
        touched, self._touched = self._touched, set()
        for tp in touched:
            entry = self._asked.get(tp)
            lg = self._current(entry[0]) if entry is not None else None
            if lg is None:  # no longer followed, or its log went away: the next walk sorts it out
                self._walk_at = 0.0
                continue
            self._keep(entry[0], lg)
        return touched

    def _keep_positions(self, fetching: list[FetchState]) -> None:
        """After a walk: the positions of every partition to fetch, and when to walk next."""
        self._asked, self._wanted, self._touched = {}, {}, set()
        for state in fetching:
            lg = self._current(state)
            if lg is not None:
                self._keep(state, lg)
        now = time.monotonic()
        due_back = min((s.delayed_until for s in self.states.values() if s.delayed_until > now), default=now + 3600)
        self._walk_at = min(now + WALK_INTERVAL_S, due_back)
        self._walked = True

    def _keep(self, state: FetchState, lg: "Log") -> None:
        tp = (state.topic, state.partition)
        end = lg.log_end_offset
        self._asked[tp] = (state, end)
        self._wanted[tp] = (end, lg.log_start_offset, state.leader_epoch)

    def _delay(self, states: list[FetchState]) -> None:
        until = time.monotonic() + FETCH_BACKOFF_S
        for s in states:
            s.delayed_until = until
        if states:
            self._walk_at = 0.0  # out of the fetches until then

    def _client_for_source(self) -> KafkaClient:
        """The client to the source broker's current address (connected by the caller); the
        address is looked up again only after a snapshot (addresses come from snapshots)."""
        if self._client_current and self._client is not None:
            return self._client
        address = self.manager.address_of(self.source)
        if address is None:
            raise ConnectionError(f"broker {self.source} is not live")
        if self._client is not None and (self._client.host, self._client.port) != address:
            self._client.close()
            self._client = None
        if self._client is None:
            self._client = KafkaClient(*address, client_id=f"odradek-replica-{self.manager.broker_id}",
                                       security=self.manager.connector)
        self._client_current = True
        return self._client

    # -- truncation (OffsetForLeaderEpoch) ------------------------------------------------------
    async def _truncate(self, client: KafkaClient, states: list[FetchState]) -> None:
        s = Schemas(ApiKey.OFFSET_FOR_LEADER_EPOCH, EPOCH_VERSION, EntityType.request)
        asked: dict[TP, tuple[FetchState, int]] = {}
        for state in states:
            lg = self._current(state)
            if lg is None:
                continue
            epoch = lg.leader_epochs.latest_epoch
            if epoch < 0:  # no epoch known (empty log, lost checkpoint): Kafka falls back to the HW
                if self._truncate_log(lg, state, lg.high_watermark):
                    state.truncating = False
                continue
            asked[(state.topic, state.partition)] = (state, epoch)
        if not asked:
            return
        by_topic: dict[str, list] = {}
        for (topic, partition), (state, epoch) in asked.items():
            by_topic.setdefault(topic, []).append(make(
                s.OffsetForLeaderPartition, partition=partition, current_leader_epoch=state.leader_epoch,
                leader_epoch=epoch))
        request = make(s.OffsetForLeaderEpochRequest, replica_id=self.manager.broker_id,
                       topics=tuple(make(s.OffsetForLeaderTopic, topic=t, partitions=tuple(ps))
                                    for t, ps in by_topic.items()))
        response = await client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, EPOCH_VERSION, request, timeout=SOCKET_TIMEOUT_S)
        with self._checkpoints_grouped():  # leader-epoch truncations of many partitions: fsyncs together
            self._truncate_all(response, asked)

    @contextlib.contextmanager
    def _checkpoints_grouped(self):
        """``grouped_writes``; its OSError (a full disk) is a storage failure, as an append's is."""
        try:
            with grouped_writes():
                yield
        except OSError as e:
            self.manager.storage_failed(f"writing the leader-epoch checkpoints of partitions from broker {self.source}", e)

    def _truncate_all(self, response, asked: dict[TP, tuple[FetchState, int]]) -> None:
        for topic in response.topics:
            for p in topic.partitions:
                state, epoch = asked.get((topic.topic, p.partition), (None, -1))
                lg = self._current(state) if state is not None else None
                if lg is None:
                    continue
                if p.error_code != ErrorCode.none:
                    log.info("%s-%d: OffsetForLeaderEpoch from broker %d: %s", topic.topic, p.partition,
                             self.source, ErrorCode(p.error_code).name.upper())
                    self._delay([state])
                    continue
                target = self._truncation_offset(lg, epoch, p.leader_epoch, p.end_offset)
                if target < lg.log_end_offset:
                    log.info("%s-%d: truncating from %d to %d (leader %d says epoch %d ends at %d)", topic.topic,
                             p.partition, lg.log_end_offset, target, self.source, p.leader_epoch, p.end_offset)
                if self._truncate_log(lg, state, target):
                    state.truncating = False

    def _truncate_log(self, lg: "Log", state: FetchState, offset: int) -> bool:
        """Truncate ``lg`` to ``offset``; an OSError (a checkpoint on a full disk) is a storage
        failure, as for appends: the directory goes offline rather than the fetcher retrying."""
        try:
            lg.truncate_to(offset)
        except OSError as e:
            self.manager.storage_failed(f"truncating {lg.name}", e)
            self._delay([state])
            return False
        return True

    @staticmethod
    def _truncation_offset(lg: "Log", asked_epoch: int, leader_epoch: int, end_offset: int) -> int:
        leo = lg.log_end_offset
        if end_offset < 0:  # the leader knows no epoch at or below ours: keep what the HW covers
            return min(lg.high_watermark, leo)
        if leader_epoch != asked_epoch:  # the leader's answer is about an older epoch: ours for it
            _, ours = lg.end_offset_for_epoch(leader_epoch)
            if ours >= 0:
                return min(end_offset, ours, leo)
        return min(end_offset, leo)

    # -- fetching ---------------------------------------------------------------------------
    async def _fetch(self, client: KafkaClient, touched: set[TP] | None = None) -> None:
        """One fetch in our session with the leader: every kept partition is fetched, only
        those whose position changed are listed (KIP-227); ``touched``: the only ones that may
        have changed since the last fetch (None after a walk)."""
        asked = self._asked  # its answer is checked against these (changed only before the next fetch)
        session = self.session
        wanted, touched = self._unthrottled(touched)
        if not wanted:
            await self._wait_for_quota()
            return
        listed, forgotten = session.build(wanted, None if self._walked else touched)
        self._walked = False
        by_topic: dict[str, list] = {}
        throttled_max, catching_up = self._throttled_max_bytes(listed)
        for (topic, partition), (offset, start, epoch) in listed.items():
            max_bytes = throttled_max if (topic, partition) in catching_up else PARTITION_MAX_BYTES
            by_topic.setdefault(topic, []).append((partition, epoch, offset, start, max_bytes))
        gone: dict[str, list[int]] = {}
        for topic, partition in forgotten:
            gone.setdefault(topic, []).append(partition)
        request = FollowerFetch(self.manager.broker_id, MAX_WAIT_MS, 1, MAX_BYTES, session.session_id,
                                session.epoch, list(by_topic.items()), list(gone.items()))
        try:
            response = await client.request(ApiKey.FETCH, FETCH_VERSION, request,
                                            timeout=SOCKET_TIMEOUT_S + MAX_WAIT_MS / 1000)
        except ConnectionError:
            session.reset()
            raise
        if not session.handle_response(response.error_code, response.session_id):
            error = ErrorCode(response.error_code)
            if error not in SESSION_ERRORS:
                raise ConnectionError(f"fetch refused: {error.name.upper()}")
            log.info("fetch session with broker %d: %s; starting a new one", self.source, error.name.upper())
            return
        topics = response.responses
        if not topics or (len(topics) == 1 and len(topics[0].partitions) <= 1):
            self._apply_all(response, asked)   # one partition: nothing to group (its OSError is _apply_all's)
            return
        with self._checkpoints_grouped():  # first batches of a new epoch in many partitions: checkpoints together
            self._apply_all(response, asked)

    def _unthrottled(self, touched: set[TP] | None) -> tuple[dict[TP, tuple[int, int, int]], set[TP] | None]:
        """The positions to fetch, without the throttled partitions not caught up while the
        follower quota is exceeded; when that set changes, everything is compared (None): those
        left out are forgotten by the session, those let in again listed."""
        quota = self.manager.quota
        held: set[TP] = set()
        if quota is not None and quota.throttled_topics and quota.exceeded():
            held = {tp for tp, (state, _) in self._asked.items()
                    if not state.in_sync and quota.is_throttled(*tp) and tp in self._wanted}
        if not held and not self._held:
            return self._wanted, touched
        changed = held != self._held
        self._held = held
        wanted = {tp: v for tp, v in self._wanted.items() if tp not in held} if held else self._wanted
        return wanted, None if changed else touched

    def _throttled_max_bytes(self, listed) -> tuple[int, set[TP]]:
        """Each throttled, not caught-up partition's share of the follower quota's fetch budget
        (at least one producer batch: smaller, it would come only when first in the answer), and
        those partitions."""
        quota = self.manager.quota
        if quota is None or not quota.throttled_topics:
            return PARTITION_MAX_BYTES, set()
        catching_up = {tp for tp in listed if tp in self._asked and not self._asked[tp][0].in_sync
                       and quota.is_throttled(*tp)}
        if not catching_up:
            return PARTITION_MAX_BYTES, catching_up
        share = max(quota.fetch_budget() // len(catching_up), MIN_THROTTLED_BYTES)
        return min(PARTITION_MAX_BYTES, share), catching_up

    async def _wait_for_quota(self) -> None:
        """Every partition is held back: sleep until the follower rate is back at its quota (or
        a partition comes or goes)."""
        self._touched.update(self._held)  # their positions are read again after the sleep
        self._changed.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._changed.wait(), min(max(self.manager.quota.delay_s(), 0.01), FETCH_BACKOFF_S))

    def _apply_all(self, response, asked: dict[TP, tuple[FetchState, int]]) -> None:
        for topic in response.responses:
            for p in topic.partitions:
                state, offset = asked.get((topic.topic, p.partition_index), (None, -1))
                if state is not None:
                    self._touched.add((topic.topic, p.partition_index))
                lg = self._current(state) if state is not None else None
                if lg is None or lg.log_end_offset != offset:
                    continue
                try:
                    self._apply(lg, state, p)
                except KafkaError as e:
                    log.warning("%s-%d: cannot append what broker %d sent (%s); truncating again",
                                topic.topic, p.partition_index, self.source, e.message)
                    state.truncating = True
                    self._delay([state])
                except OSError as e:  # the data directory goes offline; log_of then answers None
                    self.manager.storage_failed(f"appending to {lg.name} as a follower", e)
                    self._delay([state])

    def _apply(self, lg: "Log", state: FetchState, p) -> None:
        if p.error_code == ErrorCode.none:   # no enum built for the usual answer
            if p.records:
                lg.append_as_follower(p.records)
                self._record(state, len(p.records))
            before = lg.high_watermark
            lg.high_watermark = min(p.high_watermark, lg.log_end_offset)
            if lg.high_watermark > before:
                self.manager.hw_advanced((state.topic, state.partition))
            state.lag = max(0, p.high_watermark - lg.log_end_offset)
            start = min(p.log_start_offset, lg.high_watermark)
            if start > lg.log_start_offset:
                lg.increment_log_start_offset(start)
            return
        error = ErrorCode(p.error_code)
        if error == ErrorCode.offset_moved_to_tiered_storage:   # in the store only: tier_state next
            state.tiered = state.truncating = True
            state.leader_log_start = p.log_start_offset
            self._walk_at = 0.0
        elif error == ErrorCode.offset_out_of_range:
            if p.log_start_offset > lg.log_end_offset:
                log.info("%s: the leader's log starts at %d, past our end %d: starting over there",
                         lg.name, p.log_start_offset, lg.log_end_offset)
                lg.truncate_fully_and_start_at(p.log_start_offset)
            elif 0 <= p.high_watermark < lg.log_end_offset:
                log.info("%s: our end %d is past the leader's log: truncating to its HW %d",
                         lg.name, lg.log_end_offset, p.high_watermark)
                lg.truncate_to(max(p.high_watermark, lg.log_start_offset))
            else:
                self._delay([state])
        else:
            log.info("%s: fetch from broker %d: %s; backing off", lg.name, self.source, error.name.upper())
            self._delay([state])

    def _record(self, state: FetchState, size: int) -> None:
        """Replication bytes in; a throttled partition's against the follower quota, caught up
        or not (Kafka's ReplicaFetcherThread.processPartitionData)."""
        quota = self.manager.quota
        if quota is not None:
            quota.bytes_total += size
            if quota.is_throttled(state.topic, state.partition):
                quota.record(size)

    async def close(self) -> None:
        self._closed = True  # the loop also ends if wait_for swallows the cancellation (bpo-42130)
        self._changed.set()
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        if self._client is not None:
            self._client.close()
