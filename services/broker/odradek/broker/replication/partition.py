"""One hosted partition's replication state (Kafka's ``Partition``, without the locks).

A partition on this broker is either the **leader** (it takes produces, tracks each
follower's log end offset, moves the high watermark, decides who is in sync) or a
**follower** (a fetcher copies the leader's log; see fetcher). The controller decides which,
through the ``PartitionState`` of each pushed snapshot; the leader changes the ISR only
through the controller (see isr), so ``state`` is always the controller's latest word.

Leader rules (Kafka's, by KIP):
- becoming leader with a new epoch records the epoch's start offset (this broker's log end)
  in the leader-epoch cache (KIP-101), forgets follower positions (they are learnt again from
  the next fetches; followers in the ISR count as caught up now), keeps the high watermark;
- a follower's fetch offset is its log end offset (LEO); it is *caught up* at time t if it
  fetched from the leader's LEO at t, or from the LEO the leader had at its previous fetch;
- HW = min LEO over the leader and the *maximal ISR* (the ISR plus replicas whose addition
  is in flight, KIP-497), never moving backwards;
- a follower joins when its LEO reaches the HW and the current epoch's start offset;
- fencing (KIP-320): a request's current leader epoch older than ours is
  FENCED_LEADER_EPOCH, newer is UNKNOWN_LEADER_EPOCH, -1 skips the check.

Event-loop thread only.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.broker.replication.fetch_session import FetchSession
from odradek.broker.replication.purgatory import DeleteRecordsPurgatory, ProducePurgatory
from odradek.broker.replication.txn_guard import TxnVerifications
from odradek.broker.storage import Log
from odradek.cluster.model import PartitionState
from odradek.errors import ErrorCode, KafkaError


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower."""

    leo: int = -1                    # unknown until its first fetch
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = -1  # the leader's LEO when that fetch arrived
    log_start_offset: int = -1       # its log start offset, as its last fetch said (DeleteRecords' low watermark)
    session: FetchSession | None = None  # the fetch session its last recorded fetch was in (KIP-227)


_NEVER_FETCHED = FollowerState()  # read only: a follower the leader has no record of


class Partition:
    def __init__(self, broker_id: int, topic: str, index: int, log: Log) -> None:
        self.broker_id = broker_id
        self.topic = topic
        self.index = index
        self.log = log
        self.state: PartitionState | None = None
        self.leading = False
        self.leader_epoch = -1
        self.epoch_start_offset = 0
        self.min_isr = 1
        self.followers: dict[int, FollowerState] = {}
        self.pending_isr: tuple[int, ...] | None = None  # an alter-partition in flight
        self.alter_fenced = False   # the controller fenced our last request: wait for a snapshot
        self.alter_retry_ms = 0     # after another refusal: not before this (monotonic ms)
        self.produces = ProducePurgatory()
        self.deletions = DeleteRecordsPurgatory()  # DeleteRecords waiting on the low watermark
        self.verifications = TxnVerifications()    # KIP-890 guards of transactional batches being verified

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.index

    @property
    def isr(self) -> tuple[int, ...]:
        return self.state.isr if self.state is not None else ()

    def maximal_isr(self) -> set[int]:
        return set(self.isr) | set(self.pending_isr or ())

    def is_stale(self, state: PartitionState) -> bool:
        """An older word than the one we act on (a late push or alter-partition answer)."""
        if self.state is None:
            return False
        if state.leader_epoch != self.state.leader_epoch:
            return state.leader_epoch < self.state.leader_epoch
        return state.partition_epoch < self.state.partition_epoch

    # -- role changes ----------------------------------------------------------------------
    def become_leader(self, state: PartitionState, now_ms: int) -> bool:
        """Lead under ``state``; True if this starts a new leader epoch."""
        new_epoch = not self.leading or state.leader_epoch != self.leader_epoch
        self.state = state
        if new_epoch:
            self.leading = True
            self.leader_epoch = state.leader_epoch
            self.epoch_start_offset = self.log.log_end_offset
            self.log.leader_epochs.assign(state.leader_epoch, self.epoch_start_offset)
            self.followers = {}
            self.pending_isr = None
        self.alter_fenced = False  # any snapshot is the controller's new word
        for replica in state.replicas:
            if replica != self.broker_id and replica not in self.followers:
                self.followers[replica] = FollowerState(last_caught_up_ms=now_ms if replica in state.isr else 0)
        for gone in set(self.followers) - set(state.replicas):
            del self.followers[gone]
        return new_epoch

    def become_follower(self, state: PartitionState) -> bool:
        """Follow under ``state``; True if the leader or its epoch changed (fetching restarts)."""
        changed = (self.leading or self.state is None or state.leader != self.state.leader
                   or state.leader_epoch != self.leader_epoch)
        if self.leading:
            self.produces.fail_all(ErrorCode.not_leader_or_follower)
            self.deletions.fail_all(ErrorCode.not_leader_or_follower)
        self.leading = False
        self.state = state
        self.leader_epoch = state.leader_epoch
        self.followers = {}
        self.pending_isr = None
        self.alter_fenced = False
        return changed

    def stop(self) -> None:
        """No longer hosted here (reassigned, deleted, broker stopping)."""
        self.produces.fail_all(ErrorCode.not_leader_or_follower)
        self.deletions.fail_all(ErrorCode.not_leader_or_follower)
        self.leading = False
        self.followers = {}

    # -- leader side ---------------------------------------------------------------------
    def check_epoch(self, current_leader_epoch: int) -> None:
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise KafkaError(ErrorCode.fenced_leader_epoch,
                             f"leader epoch {current_leader_epoch} of {self.topic}-{self.index} is older "
                             f"than the current {self.leader_epoch}")
        if current_leader_epoch > self.leader_epoch:
            raise KafkaError(ErrorCode.unknown_leader_epoch,
                             f"leader epoch {current_leader_epoch} of {self.topic}-{self.index} is newer "
                             f"than the current {self.leader_epoch}")

    def record_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int,
                              log_start_offset: int = -1, session: FetchSession | None = None) -> None:
        follower = self.followers.get(replica_id)
        leo = self.log.log_end_offset
        if follower is None or fetch_offset > leo:
            return
        follower.log_start_offset = log_start_offset
        follower.session = session
        if fetch_offset >= leo:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, now_ms)
        elif fetch_offset >= follower.last_fetch_leader_leo >= 0:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        follower.leo = fetch_offset
        follower.last_fetch_leader_leo = leo
        follower.last_fetch_ms = now_ms

    def log_end_moving(self, now_ms: int) -> None:
        """Called before an append moves the log end: a follower at it that fetches this partition
        in its session without naming it was caught up at that session's last fetch, a time
        ``_caught_up_ms`` stops reading once the follower is behind. Kafka records every session
        partition's position at each fetch; without this, an ISR check between the append and
        the followers' next fetches dropped them all (under load: a client's acks=all produce got
        NOT_ENOUGH_REPLICAS_AFTER_APPEND and its retry duplicated the batch)."""
        leo = self.log.log_end_offset
        for follower in self.followers.values():
            session = follower.session
            if session is not None and follower.leo >= leo and session.holds(self.topic, self.index):
                follower.last_caught_up_ms = max(follower.last_caught_up_ms, min(session.last_used_ms, now_ms))

    def advance_high_watermark(self) -> bool:
        """Move the HW to the smallest LEO of the maximal ISR; True if it moved."""
        if not self.leading:
            return False
        hw = self.log.log_end_offset
        for replica in self.isr if self.pending_isr is None else self.maximal_isr():
            if replica != self.broker_id:
                follower = self.followers.get(replica)
                hw = min(hw, follower.leo if follower is not None else -1)
        if hw > self.log.high_watermark:
            self.log.high_watermark = hw
            return True
        return False

    def complete_produces(self) -> bool:
        """Answer the acks=all produces the HW reached; True if any."""
        return self.produces.complete(self.log.high_watermark, len(self.isr), self.min_isr)

    def lagging(self, now_ms: int, lag_ms: int) -> tuple[int, ...]:
        """ISR followers not caught up within ``lag_ms`` (replica.lag.time.max.ms)."""
        return tuple(r for r in self.isr if r != self.broker_id
                     and now_ms - self._caught_up_ms(self.followers.get(r, _NEVER_FETCHED)) > lag_ms)

    def _caught_up_ms(self, follower: FollowerState) -> int:
        """When it was last caught up: a follower whose recorded position is our log end and
        that still fetches this partition in its session, without naming it (it did not move),
        was caught up at the session's last fetch."""
        session = follower.session
        if session is not None and follower.leo >= self.log.log_end_offset and session.holds(self.topic, self.index):
            return max(follower.last_caught_up_ms, session.last_used_ms)
        return follower.last_caught_up_ms

    def may_join(self, replica_id: int) -> bool:
        follower = self.followers.get(replica_id)
        return (follower is not None and replica_id not in self.maximal_isr()
                and follower.leo >= self.log.high_watermark and follower.leo >= self.epoch_start_offset)

    def may_alter(self, now_ms: int) -> bool:
        return (self.leading and self.state is not None and self.pending_isr is None
                and not self.alter_fenced and now_ms >= self.alter_retry_ms)
