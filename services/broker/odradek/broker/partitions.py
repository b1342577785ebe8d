"""The partitions this broker hosts, as the controller's newest snapshot assigns them
(Kafka's ReplicaManager).

``apply`` adopts a snapshot (fenced by controller epoch) and runs each hosted partition's
state machine: named leader with a new epoch -> lead (stop fetching it); anything else ->
follow (parked acks=all produces fail with NOT_LEADER_OR_FOLLOWER, the fetcher of the new
leader truncates and fetches). Logs of partitions no longer assigned here are deleted
(reassignment), and of topics gone from the snapshot (deletion).

Handlers come here for "am I the leader of t-p?" (``leader``), leader appends, reads
(``read``: Kafka's fetchMessages, consumers' and followers' alike, long polls included; the
pass over the logs and its value types are in ``replication.read``), follower fetch positions
(``record_follower_fetch``, which moves the HW, completes parked produces and deletions,
wakes parked consumer fetches and asks for ISR expansion) and DeleteRecords
(``delete_records``: Kafka's deleteRecordsOnLeader and DelayedDeleteRecords).
Appends carry their origin: a client's to an internal topic is refused, and with
``verify_transactions`` (``transaction.partition.verification.enable``) a client's transactional
batch needs an open transaction or the guard of ``start_verification`` (``replication.txn_guard``).
Once the data directory is offline (an append failed with an OSError, see
storage.failure) every partition answers KAFKA_STORAGE_ERROR.
The replication parts live in ``odradek.broker.replication`` (partition state, fetchers,
ISR changes, purgatories). Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable, NamedTuple

from odradek import logs
from odradek.broker.replication.connector import ClientSecurity
from odradek.broker.metrics.stats import TopicStats, remote_time
from odradek.broker.quotas.replication import ReplicationQuotas
from odradek.broker.replication.fetch_session import FetchContext, FetchSession
from odradek.broker.replication.fetcher import ReplicaFetcherManager
from odradek.broker.replication.insync import OutOfIsr
from odradek.broker.replication.isr import IsrManager, now_ms
from odradek.broker.replication.partition import Partition
from odradek.broker.replication.purgatory import FetchWakeup
from odradek.broker.replication.read import FetchParams, FetchResult, read_logs
from odradek.broker.replication.remote_fetch import complete_remote
from odradek.broker.replication.txn_guard import Origin, VerificationGuard, check_origin
from odradek.broker.storage import AppendInfo, Log, LogManager
from odradek.broker.storage.config import LogConfig
from odradek.broker.storage.checkpoint import grouped_writes
from odradek.cluster.model import BrokerInfo, ClusterMetadata, PartitionState, TopicMetadata
from odradek.config import effective
from odradek.errors import ErrorCode, KafkaError
from odradek.records import ControlType

log = logging.getLogger(__name__)

DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000
HIGH_WATERMARK = -1        # DeleteRecords' "up to the high watermark"


class LeaderPartition(NamedTuple):   # one per partition lookup, several per request: cheaper than a frozen dataclass
    topic: TopicMetadata
    state: PartitionState
    log: Log
    partition: Partition


async def _no_controller(*_args, **_kwargs):
    raise KafkaError(ErrorCode.not_controller, "no controller client configured")


class ReplicaManager:
    def __init__(self, broker_id: int, logs: LogManager, *,
                 controller_call: Callable[..., Awaitable[object]] = _no_controller,
                 broker_epoch: Callable[[], int] = lambda: -1,
                 replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
                 inter_broker: ClientSecurity | None = None,
                 topic_deleted: Callable[[str], None] = lambda _name: None,
                 quotas: ReplicationQuotas | None = None) -> None:
        self.broker_id = broker_id
        self.quotas = quotas or ReplicationQuotas(broker_id)  # replication throttles (read, fetchers)
        self.inter_broker = inter_broker or ClientSecurity()  # followers fetch on this listener
        self.logs = logs
        self.metadata: ClusterMetadata | None = None
        self._topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[str, TopicMetadata] = {}  # topic id (canonical UUID string) -> its topic
        self._live: dict[int, BrokerInfo] = {}
        self._partitions: dict[tuple[str, int], Partition] = {}
        self.out_of_isr = OutOfIsr(broker_id)  # the readiness count, kept on every state change
        self.wakeup = FetchWakeup()
        self.metadata_changed = asyncio.Event()
        self.generation = 0  # snapshots applied: a fetch session reads all its partitions after one
        self._listeners: list[Callable[[], None]] = []  # called after each applied snapshot
        self.topic_deleted = topic_deleted  # its metrics go (the broker's TopicStats)
        self.isr = IsrManager(broker_id, controller_call, broker_epoch, replica_lag_time_max_ms,
                              self._after_isr_change)
        self._fetchers: ReplicaFetcherManager | None = None
        self._closed = False
        self.verify_transactions = False  # transaction.partition.verification.enable (set by the txn wiring)
        self.remote_reader = None  # storage.remote_read.RemoteLogReader with tiered storage (set by the server)
        self.topic_stats = TopicStats()  # the broker's BrokerTopicMetrics (set by the server): remote reads count there

    @property
    def fetchers(self) -> ReplicaFetcherManager:
        if self._fetchers is None:  # created lazily: its tasks need a running loop
            self._fetchers = ReplicaFetcherManager(self.broker_id, self._online_log, self._address, self.inter_broker,
                                                   storage_failed=self.logs.failures.fail,
                                                   hw_advanced=self.wakeup.notify, quota=self.quotas.follower)
            self._fetchers.remote = self._remote_of
            self._fetchers.topic_stats = self.topic_stats
        return self._fetchers

    def _remote_of(self, topic: str) -> tuple | None:
        """(RemoteLogReader, topic id) for a follower rebuilding from the store (KIP-405)."""
        meta = self._topics.get(topic)
        return (self.remote_reader, meta.topic_id) if self.remote_reader is not None and meta else None

    def _online_log(self, topic: str, partition: int) -> Log | None:
        return None if self.logs.failures.offline else self.logs.get(topic, partition)

    def log_config(self, topic: str, partition: int) -> LogConfig | None:
        """The config of this broker's log of the partition if it hosts one (Kafka's getLogConfig)."""
        log = self._online_log(topic, partition)
        return log.config if log is not None else None

    def _address(self, broker_id: int) -> tuple[str, int] | None:
        b = self._live.get(broker_id)
        return b.endpoint(self.inter_broker.listener) if b is not None else None

    # -- metadata ------------------------------------------------------------------------
    def apply(self, snapshot: ClusterMetadata) -> None:
        """Adopt a full snapshot from the controller; older controller epochs are refused.

        A write failing on the way (a leader-epoch checkpoint, a new log, on a full disk) takes
        the data directory offline, as Kafka's LogDirFailureChannel does, and answers
        KAFKA_STORAGE_ERROR: a partition half-switched to leader, still fetching as a follower,
        must not keep taking produces and leadership (issue 15, the duplicates of the 210-fault run).
        """
        current = self.metadata
        if current is not None and snapshot.controller_epoch < current.controller_epoch:
            raise KafkaError(ErrorCode.stale_controller_epoch,
                             f"controller epoch {snapshot.controller_epoch} is older than "
                             f"{current.controller_epoch}")
        self.logs.failures.check()
        try:
            self._adopt(snapshot)
        except OSError as e:
            raise self.logs.failures.fail("applying the controller's metadata", e) from e
        if self._fetchers is not None:
            self._fetchers.metadata_changed()
        for part in self._partitions.values():  # live followers may have come or gone
            self._complete_deletions(part)
        self.generation += 1
        self.metadata_changed.set()
        self.metadata_changed = asyncio.Event()
        for listener in self._listeners:
            listener()

    def _adopt(self, snapshot: ClusterMetadata) -> None:
        """The partitions' transitions and the deletions ``snapshot`` asks for (log directory writes)."""
        self.metadata = snapshot
        self._topics = {t.name: t for t in snapshot.topics}
        self._by_id = {t.topic_id: t for t in snapshot.topics}
        self._live = {b.id: b for b in snapshot.brokers}
        self.quotas.update_topics((t.name, t.configs) for t in snapshot.topics)
        assigned: set[tuple[str, int]] = set()
        # new logs' directory entries and leader-epoch checkpoints are synced together, before we serve them
        with self.logs.creating(), grouped_writes():
            for topic in snapshot.topics:
                min_isr = int(effective(topic.configs, self.logs.defaults)["min.insync.replicas"])
                for p in topic.partitions:
                    if self.broker_id in p.replicas:
                        assigned.add((topic.name, p.partition))
                        partition_log = self.logs.get_or_create(topic.name, p.partition, dict(topic.configs))
                        self._transition(topic.name, p, partition_log, min_isr)
                        key = (topic.name, p.partition)
                        self.out_of_isr.note(key, self._partitions[key].state)
        for name in {lg.topic for lg in self.logs.logs()} - set(self._topics):
            log.info("deleting the logs of topic %s (no longer in the controller's metadata)", name,
                     extra=logs.tp(name))
            self.topic_deleted(name)
            for key in [k for k in self._partitions if k[0] == name]:
                self._drop(key)
            self.logs.delete_topic(name)
        for lg in self.logs.logs():
            key = (lg.topic, lg.partition)
            if key not in assigned and lg.topic in self._topics:
                self._drop(key)
                self._delete_log(key)

    def defaults_changed(self) -> None:
        """The broker-wide topic defaults changed (a dynamic broker config): every partition's
        ``min.insync.replicas`` again, for the next acks=all produce."""
        for (topic, _), part in self._partitions.items():
            meta = self._topics.get(topic)
            if meta is not None:
                part.min_isr = int(effective(meta.configs, self.logs.defaults)["min.insync.replicas"])

    def subscribe(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every snapshot applied from now on (the group coordinator)."""
        self._listeners.append(listener)

    def _transition(self, topic: str, state: PartitionState, partition_log: Log, min_isr: int) -> None:
        key = (topic, state.partition)
        part = self._partitions.get(key)
        if part is None or part.log is not partition_log:
            part = self._partitions[key] = Partition(self.broker_id, topic, state.partition, partition_log)
        part.min_isr = min_isr
        if part.is_stale(state) or self._closed:
            return
        if state.leader == self.broker_id:
            if part.become_leader(state, now_ms()):
                log.info("%s-%d: leader at epoch %d from offset %d (ISR %s)", topic, state.partition,
                         state.leader_epoch, part.epoch_start_offset, list(state.isr),
                         extra=logs.tp(topic, state.partition))
                if self._fetchers is not None:
                    self._fetchers.remove(key)
            self._after_isr_change(part)
        elif part.become_follower(state):
            if state.leader >= 0:
                log.info("%s-%d: following broker %d at epoch %d", topic, state.partition, state.leader,
                         state.leader_epoch, extra=logs.tp(topic, state.partition))
                self.fetchers.add(key, state.leader, state.leader_epoch)
            elif self._fetchers is not None:
                self._fetchers.remove(key)

    def _drop(self, key: tuple[str, int]) -> None:
        self.out_of_isr.forget(key)
        part = self._partitions.pop(key, None)
        if part is not None:
            part.stop()
        if self._fetchers is not None:
            self._fetchers.remove(key)

    def _delete_log(self, key: tuple[str, int]) -> None:
        """A partition reassigned away from this broker: its log goes."""
        log.info("deleting the log of %s-%d (reassigned away from this broker)", *key)
        self.logs.delete_partition(*key)

    def topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: str) -> TopicMetadata | None:
        return self._by_id.get(topic_id)

    def live_brokers(self) -> list[BrokerInfo]:
        return sorted(self._live.values(), key=lambda b: b.id)

    def is_live(self, broker_id: int) -> bool:
        return broker_id in self._live

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def leader(self, topic: str, partition: int, current_leader_epoch: int = -1) -> LeaderPartition:
        """The partition if this broker leads it (and the caller's epoch is ours), else Kafka's error."""
        part = self._partitions.get((topic, partition))
        meta = self._topics.get(topic)
        # the usual case checked inline (three lookups per follower fetch); anything else by replica()
        if (part is not None and part.leading and meta is not None and part.state is not None
                and (current_leader_epoch < 0 or current_leader_epoch == part.leader_epoch)
                and not part.log.closed and not self.logs.failures.offline and partition < len(meta.partitions)):
            return LeaderPartition(meta, part.state, part.log, part)
        return self.replica(topic, partition, current_leader_epoch, leader_only=True)

    def replica(self, topic: str, partition: int, current_leader_epoch: int = -1,
                leader_only: bool = False) -> LeaderPartition:
        """The partition if this broker hosts a replica of it, leader or follower (a consumer may
        read from a follower, KIP-392), and the caller's epoch is ours; else Kafka's error."""
        meta = self._topics.get(topic)
        if meta is None or not 0 <= partition < len(meta.partitions):
            raise KafkaError(ErrorCode.unknown_topic_or_partition,
                             f"This server does not host this topic-partition: {topic}-{partition}")
        self.logs.failures.check()
        part = self._partitions.get((topic, partition))
        if part is None or part.state is None or part.log.closed or (leader_only and not part.leading):
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"broker {self.broker_id} is not the {'leader' if leader_only else 'a replica'} "
                             f"of {topic}-{partition}")
        part.check_epoch(current_leader_epoch)
        return LeaderPartition(meta, part.state, part.log, part)

    def rack_of(self, broker_id: int) -> str | None:
        broker = self._live.get(broker_id)
        return broker.rack if broker is not None else None

    # -- data ----------------------------------------------------------------------------
    def append(self, topic: str, partition: int, records: memoryview, *, acks: int = 1,
               origin: Origin = Origin.CLIENT, guard: VerificationGuard | None = None) -> AppendInfo:
        """Append as leader. acks=all is refused with NOT_ENOUGH_REPLICAS when the ISR is below
        min.insync.replicas; waiting for replication is ``replicated``'s job. A client may not
        write internal topics, nor (verifying) a transactional batch without ``guard``."""
        check_origin(topic, origin)
        verify = origin is Origin.CLIENT and self.verify_transactions

        def write(lp: LeaderPartition) -> AppendInfo:
            if verify:
                lp.partition.verifications.check(lp.log, records, guard)
            info = lp.log.append(records, leader_epoch=lp.partition.leader_epoch)
            lp.partition.verifications.appended(records)
            return info
        return self._append(topic, partition, acks, write)

    def start_verification(self, topic: str, partition: int, producer_id: int, epoch: int
                           ) -> VerificationGuard | None:
        """Kafka's Partition.maybeStartTransactionVerification: None if the producer's transaction
        is open on this leader already, else the guard to append with once the coordinator agrees."""
        check_origin(topic, Origin.CLIENT)
        lp = self.leader(topic, partition)
        return lp.partition.verifications.start(lp.log, producer_id, epoch)

    def append_marker(self, topic: str, partition: int, control_type: ControlType, producer_id: int,
                      producer_epoch: int, coordinator_epoch: int) -> AppendInfo:
        """Append a transaction coordinator's marker as leader, an acks=all write as in Kafka
        (the caller waits with ``replicated``); a verification of the producer in flight is void."""
        def write(lp: LeaderPartition) -> AppendInfo:
            info = lp.log.append_marker(control_type, producer_id, producer_epoch, coordinator_epoch,
                                        leader_epoch=lp.partition.leader_epoch)
            lp.partition.verifications.ended(producer_id)
            return info
        return self._append(topic, partition, -1, write)

    def _append(self, topic: str, partition: int, acks: int, write: Callable[[LeaderPartition], AppendInfo]
                ) -> AppendInfo:
        lp = self.leader(topic, partition)
        part = lp.partition
        if acks == -1 and len(part.isr) < part.min_isr:
            raise KafkaError(ErrorCode.not_enough_replicas,
                             f"the ISR of {topic}-{partition} is {list(part.isr)}, below "
                             f"min.insync.replicas={part.min_isr}")
        if part.followers:
            part.log_end_moving(now_ms())
        try:
            info = write(lp)
        except OSError as e:
            raise self.logs.failures.fail(f"appending to {topic}-{partition}", e) from e
        if part.advance_high_watermark():
            part.complete_produces()
        self.wakeup.notify(part.key, appended=True)
        return info

    def replicated(self, topic: str, partition: int, last_offset: int) -> asyncio.Future:
        """A future resolved with an ErrorCode once the HW passes ``last_offset`` (acks=all)."""
        part = self._partitions.get((topic, partition))
        if part is None or not part.leading:   # the produce's case, right after its append, costs no lookup
            part = self.leader(topic, partition).partition
        future = part.produces.park(last_offset + 1)
        part.complete_produces()
        return future

    def record_follower_fetch(self, lp: LeaderPartition, replica_id: int, fetch_offset: int,
                              log_start_offset: int = -1, session: FetchSession | None = None) -> bool:
        """Record a follower's position; True if that answered a parked produce."""
        part = lp.partition
        part.record_follower_fetch(replica_id, fetch_offset, now_ms(), log_start_offset, session)
        answered = False
        if part.advance_high_watermark():
            answered = part.complete_produces()
            self.wakeup.notify(part.key)
        self._complete_deletions(part)
        self.isr.expand(part, replica_id)
        return answered

    def _record_follower_positions(self, replica_id: int, context: FetchContext) -> bool:
        """True if a parked produce was answered."""
        answered = False
        for topic, partitions in context.to_record():
            for p in partitions:
                try:
                    lp = self.leader(topic, p.partition, getattr(p, "current_leader_epoch", -1))
                except KafkaError:
                    continue  # answered with the error by the read
                answered |= self.record_follower_fetch(lp, replica_id, p.fetch_offset,
                                                       getattr(p, "log_start_offset", -1),  # Fetch v5+
                                                       session=context.session)
                context.recorded(topic, p.partition, replica_id in lp.partition.isr)
        return answered

    async def read(self, params: FetchParams, context: FetchContext) -> FetchResult:
        """Kafka's fetchMessages: a follower's positions recorded once (its fetch offset is its
        log end offset: it may move the HW and the ISR), then the partitions of ``context``
        read until ``min_bytes`` are ready, one must be answered at once or ``max_wait_ms``
        passes: the fetch sleeps meanwhile on the wake-up of its partitions (an append, or for
        consumers a HW advance: Kafka's DelayedFetch), its wait counted as remote time."""
        deadline = time.monotonic() + params.max_wait_ms / 1000
        context.begin(self.generation)
        if params.follower and not params.refused and self._record_follower_positions(params.replica_id, context):
            await asyncio.sleep(0)   # the produces this fetch completed are answered before it reads on
        interest = None
        while True:
            result, failed = read_logs(self, params, context.to_read())
            parked = time.monotonic()
            remaining = deadline - parked
            if result.bytes >= params.min_bytes or failed or remaining <= 0:
                return await complete_remote(self, result) if result.remote else result
            if interest is None:
                interest = context.interest()
            await self.wakeup.wait(remaining, interest, appends_only=params.follower)
            remote_time(time.monotonic() - parked)

    # -- DeleteRecords ---------------------------------------------------------------------------
    def delete_records(self, topic: str, partition: int, offset: int) -> asyncio.Future:
        """Move the leader's log start offset to ``offset`` (-1: the high watermark; Kafka's
        deleteRecordsOnLeader) and return a future resolved with (low watermark, ErrorCode) once
        the low watermark reaches it (NOT_LEADER_OR_FOLLOWER if leadership goes first); the
        caller owns the timeout (Kafka's DelayedDeleteRecords)."""
        lp = self.leader(topic, partition)
        wanted = _delete_on_leader(lp.log, offset)
        future = lp.partition.deletions.park(wanted)
        self.wakeup.notify(lp.partition.key)  # fetch sessions send the new log start offset
        self._complete_deletions(lp.partition)
        return future

    def low_watermark(self, part: Partition) -> int:
        """The smallest log start offset of the leader and its live followers (-1 while one is unknown)."""
        starts = [f.log_start_offset for rid, f in part.followers.items() if rid in self._live]
        return min([part.log.log_start_offset, *starts])

    def _complete_deletions(self, part: Partition) -> None:
        if len(part.deletions) and part.leading:
            part.deletions.complete(self.low_watermark(part))

    def _after_isr_change(self, part: Partition) -> None:
        self.out_of_isr.note(part.key, part.state)
        if part.advance_high_watermark():
            self.wakeup.notify(part.key)
        part.complete_produces()

    # -- lifetime ------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """The ISR shrink check, until ``stop``."""
        await self.isr.run(self.partitions, stop)

    async def close(self) -> None:
        self._closed = True
        for part in self._partitions.values():
            part.stop()
        await self.isr.close()
        if self._fetchers is not None:
            await self._fetchers.close()

    def leaderships(self, movable_only: bool = False) -> list[tuple[str, int]]:
        """Partitions led here; ``movable_only`` leaves out single-replica ones, which no
        controlled shutdown can move (the controller does not list them either)."""
        return sorted(p.key for p in self._partitions.values()
                      if p.leading and not (movable_only and p.state is not None and len(p.state.replicas) < 2))


def _delete_on_leader(log: Log, offset: int) -> int:
    """The log start offset moved to ``offset`` (-1: the high watermark), checked as Kafka's
    Partition.deleteRecordsOnLeader; returns the offset asked for."""
    if not log.config.delete_enabled:
        raise KafkaError(ErrorCode.policy_violation, f"Records of partition {log.name} can not be deleted "
                                                     f"due to the configured policy")
    wanted = log.high_watermark if offset == HIGH_WATERMARK else offset
    if wanted < 0:
        raise KafkaError(ErrorCode.offset_out_of_range, f"The offset {wanted} for partition {log.name} is not valid")
    if wanted > log.high_watermark:
        raise KafkaError(ErrorCode.offset_out_of_range,
                         f"Cannot increment the log start offset to {wanted} of partition {log.name} since it "
                         f"is larger than the high watermark {log.high_watermark}")
    log.increment_log_start_offset(wanted)
    return wanted
