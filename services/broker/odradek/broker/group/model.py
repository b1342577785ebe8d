"""A consumer group's state as the coordinator keeps it in memory (Kafka's GroupMetadata).

``Group`` holds the members, the generation, the chosen protocol and the committed offsets;
``Member`` one member's identity, timeouts, supported protocols, assignment and the futures
of its delayed JoinGroup/SyncGroup. ``JoinResult``/``SyncResult`` are what the state machine
answers, independent of the wire version. Not thread-safe: the broker's event loop only.

States (Kafka's): Empty (no members; offsets may exist), PreparingRebalance (waiting for
members to rejoin), CompletingRebalance (waiting for the leader's assignment), Stable, Dead
(deleted or unloaded).
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from dataclasses import dataclass, field

from odradek.broker.group.embedded import parse_subscription
from odradek.broker.group.records import OffsetValue
from odradek.errors import ErrorCode, KafkaError


class GroupState(str, enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # (member id, instance id, metadata): leader only
    skip_assignment: bool = False  # KIP-814: the leader is not to run the assignment


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


Protocols = tuple[tuple[str, bytes], ...]  # (name, metadata) in the member's order of preference


@dataclass(eq=False)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    is_new: bool = False
    joined_ms: int = 0
    join_future: asyncio.Future | None = None
    sync_future: asyncio.Future | None = None
    timer: object | None = None  # the session-expiry handle (``cancel()``)

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()

    def metadata(self, protocol: str | None) -> bytes:
        return next((m for name, m in self.protocols if name == protocol), b"")

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    state_ms: int = -1
    members: dict[str, Member] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending: dict[str, object] = field(default_factory=dict)  # MEMBER_ID_REQUIRED ids -> expiry handle
    offsets: dict[tuple[str, int], OffsetValue] = field(default_factory=dict)
    # TxnOffsetCommit: producer id -> offsets written in its open transaction (applied by its commit marker)
    pending_txn: dict[int, dict[tuple[str, int], OffsetValue]] = field(default_factory=dict)
    new_member_added: bool = False
    initial_delay: bool = False  # the first delayed join of an empty group is running
    join_timer: object | None = None

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_ms = now_ms

    # -- membership --------------------------------------------------------------------------
    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.instance_id:
            self.static[member.instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.instance_id and self.static.get(member.instance_id) == member_id:
            del self.static[member.instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def is_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A static member whose instance id now belongs to another member id (KIP-345)."""
        if not instance_id:
            return False
        mapped = self.static.get(instance_id)
        return mapped is not None and mapped != member_id

    def all_joined(self) -> bool:
        return not self.pending and all(m.awaiting_join for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols ---------------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: Protocols) -> bool:
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; the most votes wins
        (ties: the protocol the leader prefers first)."""
        candidates = self.candidate_protocols()
        votes = Counter(next(n for n in m.protocol_names() if n in candidates) for m in self.members.values())
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        order = {name: i for i, name in enumerate(leader.protocol_names())}
        return max(votes, key=lambda name: (votes[name], -order.get(name, len(order))))

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), None if unknown."""
        if self.protocol_type != "consumer" or not self.members:
            return set() if not self.members else None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = consumer_subscription_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics


def consumer_subscription_topics(metadata: bytes) -> set[str] | None:
    """The topic names of a consumer protocol Subscription; None if it does not parse."""
    try:
        return set(parse_subscription(metadata).topics)
    except KafkaError:
        return None
