"""KIP-848 consumer groups: the ConsumerGroupHeartbeat state machine (Kafka 4.x's
GroupMetadataManager.consumerGroupHeartbeat, ConsumerGroup, CurrentAssignmentBuilder).

Three epochs. The group epoch is bumped whenever what the assignment depends on changes (a
member joins, leaves or is fenced; a subscription changes; a subscribed topic appears or gains
partitions). The target assignment is recomputed by the server-side assignor when the group
epoch passes the target assignment epoch. Each member then reconciles towards its target on its
own heartbeats: partitions no longer in its target are revoked first (UNREVOKED_PARTITIONS: the
member keeps its epoch until a heartbeat's owned partitions no longer hold them); a partition
that another member still holds (assigned or being revoked) is not given yet
(UNRELEASED_PARTITIONS); a member with nothing to revoke moves to the target epoch. So no
partition is ever owned by two members at once.

Members are fenced after ``group.consumer.session.timeout.ms`` without a heartbeat, and when
they keep revoked partitions beyond their rebalance timeout. Leaving is epoch -1; a static
member (``group.instance.id``) leaving with -2 keeps its assignment for its session timeout and
a new member id with that instance id takes it over (a second live one: UNRELEASED_INSTANCE_ID).

The state is written to ``__consumer_offsets`` as Kafka's ConsumerGroup* records
(``consumer_state``, by the coordinator after each heartbeat and, through ``on_change``, after a
timer fenced a member) and ``install``ed from them when a broker loads the group's partition:
after a coordinator move the members heartbeat to the new one with their epochs and keep their
partitions. A heartbeat with an epoch for a group that is not known gets UNKNOWN_MEMBER_ID (Kafka's
GROUP_ID_NOT_FOUND there is fatal to clients) and the member rejoins with epoch 0.

Members may also speak the classic protocol (``classic`` set: KIP-848's online upgrade, served
by ``consumer_classic``): they are assigned by the same assignor and reconciled when they
rejoin. When the last member using the consumer protocol leaves or is fenced while classic
members remain, ``on_downgrade`` turns the group back into a classic group (``migration``).
Not thread-safe: the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Mapping

from odradek.broker.group.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, TP, Topics
from odradek.broker.group.consumer_records import ClassicMetadata
from odradek.broker.group.topic_regex import compile_regex, resolve
from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)
E = ErrorCode
LEAVE, STATIC_LEAVE = -1, -2
Lookup = Callable[[frozenset[str]], Topics]  # subscribed names -> {name: (topic id, partitions)} of those existing
Catalog = Callable[[], tuple[str, ...]]  # the topic names a regex may match (those the member may Describe)


class MemberState(str, enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    session_timeout_ms: int = 45_000       # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5_000     # group.consumer.heartbeat.interval.ms
    max_size: int = 2**31 - 1              # group.consumer.max.size
    migration_policy: str = "bidirectional"  # group.consumer.migration.policy

    @property
    def upgrade(self) -> bool:
        return self.migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade(self) -> bool:
        return self.migration_policy in ("bidirectional", "downgrade")


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """One ConsumerGroupHeartbeat, version-independent (None = unchanged since the last one)."""
    group_id: str
    member_id: str
    member_epoch: int
    client_id: str = ""
    client_host: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed: tuple[str, ...] | None = None
    regex: str | None = None
    assignor: str | None = None
    owned: frozenset[TP] | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: frozenset[TP] | None = None  # None: unchanged, not sent


@dataclass(eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 0
    subscribed: frozenset[str] = frozenset()
    regex: str = ""  # SubscribedTopicRegex; "" none
    assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: frozenset[TP] = frozenset()
    revoking: frozenset[TP] = frozenset()
    session_timer: object | None = None
    revoke_timer: object | None = None
    classic: ClassicMetadata | None = None  # a member speaking the classic protocol (consumer_classic)
    classic_timer: object | None = None     # its join or sync timeout (its rebalance timeout)
    encoded: tuple | None = None  # (fields, records): consumer_state's cache of its records


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    epoch: int = 0
    target_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)   # instance id -> member id
    target: dict[str, frozenset[TP]] = field(default_factory=dict)
    owners: dict[TP, str] = field(default_factory=dict)    # partition -> the member holding it (Kafka's partition epochs)
    topics: dict[str, tuple[str, int]] = field(default_factory=dict)  # subscription metadata
    resolved: dict[str, frozenset[str]] = field(default_factory=dict)  # the members' regexes -> topic names
    catalog: tuple[str, ...] = ()  # the topic names ``resolved`` was resolved against
    assignor: str = DEFAULT_ASSIGNOR
    written: dict[bytes, object] = field(default_factory=dict)  # its records in the log (consumer_state)

    @property
    def state(self) -> str:
        """Kafka's ConsumerGroupState names."""
        if not self.members:
            return "Empty"
        if self.epoch > self.target_epoch:
            return "Assigning"
        if any(m.epoch != self.target_epoch or m.state != MemberState.STABLE for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def subscription(self, member: ConsumerMember) -> frozenset[str]:
        """The topic names ``member`` subscribes to: by name and through its regex."""
        return member.subscribed | self.resolved.get(member.regex, frozenset()) if member.regex else member.subscribed

    def release(self, member: ConsumerMember, partitions) -> None:
        for tp in partitions:
            if self.owners.get(tp) == member.member_id:
                del self.owners[tp]


class ConsumerGroups:
    """The KIP-848 groups of one coordinator; ``heartbeat`` is ConsumerGroupHeartbeat."""

    def __init__(self, settings: ConsumerSettings, call_later: Callable | None = None,
                 on_change: Callable[[str], None] = lambda _group_id: None,
                 on_downgrade: Callable[[ConsumerGroup, bool], None] | None = None) -> None:
        self.settings = settings
        self.groups: dict[str, ConsumerGroup] = {}
        self._call_later = call_later
        self._on_change = on_change  # a timer changed a group: its records are to be written
        self.on_downgrade = on_downgrade  # (group, rebalance): only classic members are left, it becomes classic

    def later(self, delay_ms: int, fn, *args):
        call_later = self._call_later or asyncio.get_running_loop().call_later
        return call_later(max(delay_ms, 0) / 1000, fn, *args)

    def active(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    # -- the heartbeat --------------------------------------------------------------------------
    def heartbeat(self, hb: Heartbeat, lookup: Lookup, catalog: Catalog = tuple) -> HeartbeatResult:
        """Raises KafkaError with Kafka's error for a refused heartbeat. ``catalog`` is read when
        a member subscribes by regex: the regexes are resolved again whenever it changed (a
        topic created or deleted), so a new matching topic enters the assignment."""
        validate(hb)
        if hb.member_epoch in (LEAVE, STATIC_LEAVE):
            return self._leave(hb)
        group = self.groups.get(hb.group_id)
        if group is None and hb.member_epoch != 0:
            raise KafkaError(E.unknown_member_id, f"Member {hb.member_id} is not a member of group {hb.group_id}.")
        if group is None:
            group = self.groups[hb.group_id] = ConsumerGroup(hb.group_id)
        member, bump = self._member(group, hb)
        bump |= self._update(member, hb)
        self.advance(group, bump, lookup, catalog)
        before = member.assigned
        self.reconcile(group, member, hb.owned)
        self.touch(group, member)
        send = (hb.member_epoch == 0 or member.assigned != before
                or (hb.owned is not None and hb.owned != member.assigned))
        return HeartbeatResult(member.member_id, member.epoch, self.settings.heartbeat_interval_ms,
                               member.assigned if send else None)

    def advance(self, group: ConsumerGroup, bump: bool, lookup: Lookup, catalog: Catalog) -> None:
        """Bump the group epoch if ``bump`` or the subscribed topics changed; a new target
        assignment when the group epoch passed the target's."""
        if self._refresh_topics(group, lookup, catalog) or bump:
            group.epoch += 1
        if group.epoch > group.target_epoch:
            self._assign(group)

    def _member(self, group: ConsumerGroup, hb: Heartbeat) -> tuple[ConsumerMember, bool]:
        """The member the heartbeat is from (and whether it is new); Kafka's epoch checks."""
        member = group.members.get(hb.member_id)
        if hb.member_epoch == 0:
            if member is not None:  # a rejoin (its previous join answer lost): it owns nothing
                group.release(member, member.assigned | member.revoking)
                member.assigned = member.revoking = frozenset()
                member.epoch, member.state = 0, MemberState.STABLE
                return member, False
            member = self._join(group, hb)
            return member, member.epoch == 0  # a static member's replacement rebalances nothing
        if member is None:
            raise KafkaError(E.unknown_member_id, f"Member {hb.member_id} is not a member of group {group.group_id}.")
        if hb.member_epoch > member.epoch or (hb.member_epoch < member.epoch and not (
                hb.member_epoch == member.previous_epoch and hb.owned is not None and hb.owned <= member.assigned)):
            raise KafkaError(E.fenced_member_epoch, f"The consumer group member has a invalid epoch {hb.member_epoch}; "
                                                    f"the current epoch is {member.epoch}.")
        return member, False

    def _join(self, group: ConsumerGroup, hb: Heartbeat) -> ConsumerMember:
        if len(group.members) >= self.settings.max_size:
            raise KafkaError(E.group_max_size_reached, f"The consumer group has reached its maximum capacity of "
                                                       f"{self.settings.max_size} members.")
        member = ConsumerMember(hb.member_id)
        previous_id = group.static.get(hb.instance_id) if hb.instance_id else None
        if previous_id is not None:
            previous = group.members[previous_id]
            if previous.epoch != STATIC_LEAVE:
                raise KafkaError(E.unreleased_instance_id, f"Static member {previous_id} with instance id "
                                                           f"{hb.instance_id} is present in the consumer group.")
            self.replace(group, previous, member)  # takes over its assignment and epoch
        group.members[member.member_id] = member
        if hb.instance_id:
            group.static[hb.instance_id] = member.member_id
        return member

    @staticmethod
    def replace(group: ConsumerGroup, old: ConsumerMember, new: ConsumerMember) -> None:
        _cancel(old)
        del group.members[old.member_id]
        new.epoch, new.previous_epoch = old.previous_epoch, old.previous_epoch
        new.assigned, new.revoking, new.state = old.assigned, old.revoking, old.state
        new.subscribed, new.regex, new.assignor, new.rack_id = old.subscribed, old.regex, old.assignor, old.rack_id
        for tp, owner in list(group.owners.items()):
            if owner == old.member_id:
                group.owners[tp] = new.member_id
        if old.member_id in group.target:
            group.target[new.member_id] = group.target.pop(old.member_id)

    @staticmethod
    def _update(member: ConsumerMember, hb: Heartbeat) -> bool:
        """Apply the heartbeat's fields that changed; True when the assignment depends on them."""
        member.client_id, member.client_host = hb.client_id, hb.client_host
        if hb.instance_id is not None:
            member.instance_id = hb.instance_id
        if hb.rack_id is not None:
            member.rack_id = hb.rack_id
        if hb.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = hb.rebalance_timeout_ms
        changed = False
        if hb.subscribed is not None and frozenset(hb.subscribed) != member.subscribed:
            member.subscribed, changed = frozenset(hb.subscribed), True
        if hb.regex is not None and hb.regex != member.regex:
            member.regex, changed = hb.regex, True
        if hb.assignor is not None and hb.assignor != member.assignor:
            member.assignor, changed = hb.assignor, True
        return changed

    @staticmethod
    def _refresh_topics(group: ConsumerGroup, lookup: Lookup, catalog: Catalog) -> bool:
        """The subscribed topics' ids and partition counts; True when they or the topics a
        member's regex resolves to changed."""
        changed = _resolve_regexes(group, catalog)
        names = frozenset().union(*(group.subscription(m) for m in group.members.values()))
        topics = dict(lookup(names))
        if topics == group.topics:
            return changed
        group.topics = topics
        return True

    def _assign(self, group: ConsumerGroup) -> None:
        """The target assignment at the group epoch, by the members' most wanted assignor."""
        group.assignor = preferred_assignor(group.members.values())
        subscriptions = {mid: group.subscription(m) for mid, m in group.members.items()}
        group.target = ASSIGNORS[group.assignor](subscriptions, group.topics, group.target)
        group.target_epoch = group.epoch
        log.info("group %s: target assignment at epoch %d by %s for %d members", group.group_id, group.epoch,
                 group.assignor, len(group.members))

    # -- reconciliation (Kafka's CurrentAssignmentBuilder) -------------------------------------
    def reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: frozenset[TP] | None) -> None:
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            back = member.revoking & group.target.get(member.member_id, frozenset())
            member.assigned, member.revoking = member.assigned | back, member.revoking - back  # a newer target
            if member.revoking and (owned is None or owned & member.revoking):
                return  # still holds what it must give up
            group.release(member, member.revoking)
            member.revoking = frozenset()
            _cancel_revoke(member)
        elif member.state == MemberState.STABLE and member.epoch == group.target_epoch:
            return
        target = group.target.get(member.member_id, frozenset())
        keep, revoke = member.assigned & target, member.assigned - target
        if revoke and (owned is None or owned & revoke):
            member.assigned, member.revoking = keep, revoke
            member.state = MemberState.UNREVOKED_PARTITIONS
            member.revoke_timer = self.later(member.rebalance_timeout_ms, self._revoke_expired, group, member)
            return
        group.release(member, revoke)
        free = {tp for tp in target - keep if group.owners.get(tp, member.member_id) == member.member_id}
        for tp in free:
            group.owners[tp] = member.member_id
        member.assigned = keep | frozenset(free)
        if member.epoch != group.target_epoch:
            member.previous_epoch, member.epoch = member.epoch, group.target_epoch
        unreleased = member.assigned != target
        member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE

    # -- leaving, fencing, timers ----------------------------------------------------------------
    def _leave(self, hb: Heartbeat) -> HeartbeatResult:
        group = self.groups.get(hb.group_id)
        member = group.members.get(hb.member_id) if group is not None else None
        if group is None or member is None:
            raise KafkaError(E.unknown_member_id, f"Member {hb.member_id} is not a member of group {hb.group_id}.")
        if hb.member_epoch == STATIC_LEAVE and member.instance_id:
            member.previous_epoch, member.epoch = member.epoch, STATIC_LEAVE
            self.touch(group, member)  # its assignment waits for the instance for one session
        else:
            self.remove(group, member, "left the group")
        return HeartbeatResult(hb.member_id, hb.member_epoch, self.settings.heartbeat_interval_ms)

    def remove(self, group: ConsumerGroup, member: ConsumerMember, why: str) -> None:
        if group.members.get(member.member_id) is not member:
            return
        _cancel(member)
        del group.members[member.member_id]
        if member.instance_id and group.static.get(member.instance_id) == member.member_id:
            del group.static[member.instance_id]
        group.release(member, member.assigned | member.revoking)
        group.target.pop(member.member_id, None)
        if member.classic is None and self.settings.downgrade and self.on_downgrade is not None and \
                group.members and all(m.classic is not None for m in group.members.values()):
            log.info("group %s: member %s %s; only classic members are left: converting it to a classic group",
                     group.group_id, member.member_id, why)
            self.on_downgrade(group, True)  # at the epoch its members know, as Kafka converts it
            return
        group.epoch += 1
        log.info("group %s: member %s %s (group epoch %d)", group.group_id, member.member_id, why, group.epoch)

    def touch(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """A heartbeat: the member's session starts again (a classic member's is its own)."""
        if member.session_timer is not None:
            member.session_timer.cancel()
        session = member.classic.session_timeout_ms if member.classic else self.settings.session_timeout_ms
        member.session_timer = self.later(session, self.fence, group, member, "fenced: session timed out")

    def _revoke_expired(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            self.fence(group, member, "fenced: did not revoke its partitions within its rebalance timeout")

    def fence(self, group: ConsumerGroup, member: ConsumerMember, why: str) -> None:
        if group.members.get(member.member_id) is member:
            self.remove(group, member, why)
            self._on_change(group.group_id)

    def install(self, group: ConsumerGroup) -> None:
        """A group replayed from ``__consumer_offsets``: its members get fresh session timers (and
        revocation timers, those revoking), as Kafka's coordinator gives them on loading."""
        self.unload(group.group_id)
        self.groups[group.group_id] = group
        for member in group.members.values():
            self.touch(group, member)
            if member.state == MemberState.UNREVOKED_PARTITIONS:
                member.revoke_timer = self.later(member.rebalance_timeout_ms, self._revoke_expired, group, member)

    def unload(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        for member in group.members.values() if group is not None else ():
            _cancel(member)

    # -- offsets (Kafka's ConsumerGroup.validateOffsetCommit / validateOffsetFetch) -------------
    def offset_error(self, group_id: str, member_id: str, member_epoch: int,
                     commit_version: int | None = None) -> ErrorCode | None:
        """None when the group is not a consumer group; else the error of a commit or fetch by
        (member id, epoch): epoch -1 without a member is the admin client's (any group); a member
        using the consumer protocol must commit with OffsetCommit v9+ (UNSUPPORTED_VERSION), as
        Kafka's validateOffsetCommit requires."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if member_epoch < 0 and not member_id:
            return E.none
        member = group.members.get(member_id)
        if member is None:
            return E.unknown_member_id
        if commit_version is not None and commit_version < 9 and member.classic is None:
            return E.unsupported_version
        if member_epoch == member.epoch:
            return E.none
        return E.illegal_generation if member.classic is not None else E.stale_member_epoch


def preferred_assignor(members) -> str:
    """The server assignor most members ask for (Kafka's default when none does)."""
    wanted = Counter(m.assignor for m in members if m.assignor)
    return wanted.most_common(1)[0][0] if wanted else DEFAULT_ASSIGNOR


def validate(hb: Heartbeat) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid: INVALID_REQUEST, UNSUPPORTED_ASSIGNOR."""
    def invalid(why: str):
        raise KafkaError(E.invalid_request, why)
    if not hb.group_id:
        invalid("GroupId can't be empty.")
    if not hb.member_id:
        invalid("MemberId can't be empty.")
    if hb.instance_id == "":
        invalid("InstanceId can't be empty.")
    if hb.rack_id == "":
        invalid("RackId can't be empty.")
    if hb.member_epoch == 0:
        if hb.rebalance_timeout_ms < 0:
            invalid("RebalanceTimeoutMs must be provided in first request.")
        if hb.owned is None or hb.owned:
            invalid("TopicPartitions must be empty when (re-)joining.")
        if not hb.subscribed and not hb.regex:
            invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif hb.member_epoch == STATIC_LEAVE and hb.instance_id is None:
        invalid("InstanceId can't be null when MemberEpoch is -2.")
    elif hb.member_epoch < STATIC_LEAVE:
        invalid(f"MemberEpoch is invalid: {hb.member_epoch}.")
    if hb.regex:  # "" is no regex (a member leaving its regex for names), as Kafka reads it
        compile_regex(hb.regex)  # INVALID_REGULAR_EXPRESSION
    if hb.assignor is not None and hb.assignor not in ASSIGNORS:
        raise KafkaError(E.unsupported_assignor, f"ServerAssignor {hb.assignor} is not supported. "
                                                 f"Supported assignors: {', '.join(ASSIGNORS)}.")


def _resolve_regexes(group: ConsumerGroup, catalog: Catalog) -> bool:
    """Resolve the members' regexes again when the regexes or the topics changed (Kafka
    resolves them off the heartbeat path and at most every few seconds; resolving here costs a
    scan of the topic names only when a topic was created or deleted). True when the topics
    the same regexes resolve to changed: a changed set of regexes (a member's new regex, a member
    gone) bumped the epoch already, and a group just loaded resolves what its records name."""
    regexes = {m.regex for m in group.members.values() if m.regex}
    if not regexes and not group.resolved:
        return False
    names = catalog() if regexes else ()  # the broker's one tuple per metadata snapshot: compared cheaply
    same_regexes = regexes == group.resolved.keys()
    if same_regexes and (names is group.catalog or names == group.catalog):
        return False
    resolved = {r: resolve(r, names) for r in regexes}
    changed = same_regexes and resolved != group.resolved
    group.catalog, group.resolved = names, resolved
    return changed


def _cancel_revoke(member: ConsumerMember) -> None:
    if member.revoke_timer is not None:
        member.revoke_timer.cancel()
        member.revoke_timer = None


def cancel_classic(member: ConsumerMember) -> None:
    """Stop a classic member's join or sync timeout (``consumer_classic``)."""
    if member.classic_timer is not None:
        member.classic_timer.cancel()
        member.classic_timer = None


def _cancel(member: ConsumerMember) -> None:
    _cancel_revoke(member)
    cancel_classic(member)
    if member.session_timer is not None:
        member.session_timer.cancel()
        member.session_timer = None
