"""Classic members of a KIP-848 consumer group: JoinGroup, SyncGroup, Heartbeat and LeaveGroup
served by the consumer group (Kafka 4.x's GroupMetadataManager.classicGroup*ToConsumerGroup).

After a classic group was converted (``migration``) or when a classic consumer joins a consumer
group, its members keep speaking the classic protocol; the group treats them as members like
the others (``ConsumerMember.classic`` holds their session timeout and JoinGroup protocols):

- JoinGroup updates the member from its Subscription (topics, owned partitions, rack), bumps the
  group epoch if its subscription changed, computes the target assignment and reconciles the
  member at once: its owned partitions (what it still holds: an eager consumer none, a
  cooperative one those it kept) release those revoked; partitions another member still holds
  are not given yet. It is answered at once with generation = the member epoch, protocol type
  "consumer", the member's first protocol, and no leader: the client runs no assignor.
- SyncGroup hands it its assigned partitions as a consumer protocol Assignment.
- Heartbeat answers REBALANCE_IN_PROGRESS while the member is behind the group epoch, has
  partitions to revoke, or may now get partitions it waited for: the member rejoins, and that
  rejoin is its next reconciliation step. A member that does not rejoin (or sync) within its
  rebalance timeout is fenced, as one whose session expires.
- LeaveGroup removes it (the group epoch is bumped: the others get its partitions).
- A static classic member replacing the last member using the consumer protocol (same
  instance id) turns the group classic at once, Stable, without a rebalance (Kafka's
  downgrade by replacement): the new member has the old one's assignment.

A member is found by member id, or by instance id for a static member (another member id with
that instance id: FENCED_INSTANCE_ID); a member using the consumer protocol is UNKNOWN_MEMBER_ID
here, a generation other than its epoch ILLEGAL_GENERATION, as Kafka answers.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from odradek.broker.group.consumer import (STATIC_LEAVE, Catalog, ConsumerGroup, ConsumerGroups, ConsumerMember, Lookup,
                                           MemberState, cancel_classic)
from odradek.broker.group.consumer_records import ClassicMetadata
from odradek.broker.group.embedded import PROTOCOL_TYPE, encode_assignment, metadata_version, parse_subscription
from odradek.broker.group.model import JoinResult, Protocols, SyncResult
from odradek.errors import ErrorCode, KafkaError

E = ErrorCode


@dataclass(frozen=True, slots=True)
class ClassicJoin:
    """One JoinGroup, version-independent."""
    group_id: str
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    require_known_member_id: bool = True  # JoinGroup v4+


def supports(group: ConsumerGroup, protocol_type: str, protocols: Protocols) -> bool:
    """Kafka's ConsumerGroup.supportsClassicProtocols: the consumer protocol type, and (when it has
    classic members already) a protocol every one of them supports."""
    names = {name for name, _ in protocols}
    if protocol_type != PROTOCOL_TYPE or not names:
        return False
    for m in group.members.values():
        if m.classic is not None:
            names &= {name for name, _ in m.classic.protocols}
    return bool(names)


class ClassicMembers:
    """The classic protocol's requests to the consumer groups of ``groups``."""

    def __init__(self, groups: ConsumerGroups) -> None:
        self.groups = groups

    def join(self, req: ClassicJoin, lookup: Lookup, catalog: Catalog = tuple) -> JoinResult:
        """Raises KafkaError with Kafka's error for a refused join."""
        group = self._group(req.group_id)
        member_id = req.member_id or str(uuid.uuid4())
        known = member_id in group.members or (req.instance_id and req.instance_id in group.static)
        if not known and len(group.members) >= self.groups.settings.max_size:
            raise KafkaError(E.group_max_size_reached, f"The consumer group has reached its maximum capacity of "
                                                       f"{self.groups.settings.max_size} members.")
        if not supports(group, req.protocol_type, req.protocols):
            raise KafkaError(E.inconsistent_group_protocol, f"Member {member_id}'s protocols are not supported.")
        if not req.member_id and req.require_known_member_id and not req.instance_id:
            return JoinResult(E.member_id_required, member_id)  # Kafka's dynamic members: rejoin with this id
        subscription = parse_subscription(req.protocols[0][1])  # every protocol carries the same subscription
        member, new, replaced = self._joining(group, member_id, req)
        bump = new or frozenset(subscription.topics) != member.subscribed
        member.subscribed = frozenset(subscription.topics)
        member.rack_id = subscription.rack_id or member.rack_id
        member.rebalance_timeout_ms, member.assignor = req.rebalance_timeout_ms, None
        member.client_id, member.client_host = req.client_id, req.client_host
        member.classic = ClassicMetadata(req.session_timeout_ms, tuple(req.protocols))
        self.groups.advance(group, bump, lookup, catalog)
        ids = {name: topic_id for name, (topic_id, _) in group.topics.items()}
        owned = frozenset((ids[t], p) for t, p in subscription.owned if t in ids)
        self.groups.reconcile(group, member, owned)
        self.groups.touch(group, member)
        self._timeout(group, member, "fenced: did not send SyncGroup within its rebalance timeout", restart=True)
        result = JoinResult(E.none, member.member_id, member.epoch, PROTOCOL_TYPE, req.protocols[0][0], "")
        if replaced is not None and replaced.classic is None and self.groups.settings.downgrade and \
                self.groups.on_downgrade is not None and all(m.classic for m in group.members.values()):
            self.groups.on_downgrade(group, False)  # Kafka: the last consumer-protocol member replaced, no rebalance
        return result

    def _joining(self, group: ConsumerGroup, member_id: str,
                 req: ClassicJoin) -> tuple[ConsumerMember, bool, ConsumerMember | None]:
        """The member joining, whether it is new, and the member it replaced: a static member's
        new member id takes over the epoch and assignment of the instance's previous one."""
        previous_id = group.static.get(req.instance_id) if req.instance_id else None
        if previous_id is not None and previous_id != member_id:
            if req.member_id:
                raise KafkaError(E.fenced_instance_id, f"Static member {req.member_id} with instance id "
                                                       f"{req.instance_id} was fenced by member {previous_id}.")
            member = ConsumerMember(member_id, req.instance_id)
            previous = group.members[previous_id]
            self.groups.replace(group, previous, member)
            member.epoch = previous.epoch if previous.epoch != STATIC_LEAVE else previous.previous_epoch
            group.members[member_id] = member
            group.static[req.instance_id] = member_id
            return member, False, previous
        member = group.members.get(member_id)
        if member is not None:
            if member.classic is None:
                raise KafkaError(E.unknown_member_id, f"Member {member_id} does not use the classic protocol.")
            return member, False, None
        member = group.members[member_id] = ConsumerMember(member_id, req.instance_id)
        if req.instance_id:
            group.static[req.instance_id] = member_id
        return member, True, None

    def sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None) -> SyncResult:
        group, member = self._member(group_id, member_id, instance_id, generation)
        if (protocol_type and protocol_type != PROTOCOL_TYPE) or (
                protocol_name and protocol_name != member.classic.protocols[0][0]):
            raise KafkaError(E.inconsistent_group_protocol, "The protocol type or name is not the member's.")
        if group.epoch > member.epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
            self._timeout(group, member, "fenced: did not rejoin within its rebalance timeout")
            raise KafkaError(E.rebalance_in_progress, f"A new rebalance is triggered in group {group_id} and member "
                                                      f"{member_id} should rejoin to catch up.")
        cancel_classic(member)
        self.groups.touch(group, member)
        names = {topic_id: name for name, (topic_id, _) in group.topics.items()}
        assigned = [(names[t], p) for t, p in member.assigned if t in names]
        version = metadata_version(member.classic.protocols[0][1])
        return SyncResult(E.none, PROTOCOL_TYPE, member.classic.protocols[0][0], encode_assignment(assigned, version))

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        group, member = self._member(group_id, member_id, instance_id, generation)
        self.groups.touch(group, member)
        if member.epoch < group.epoch or member.state == MemberState.UNREVOKED_PARTITIONS or (
                member.state == MemberState.UNRELEASED_PARTITIONS and not _waiting_on_others(group, member)):
            self._timeout(group, member, "fenced: did not rejoin within its rebalance timeout")
            return E.rebalance_in_progress
        return E.none

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[ErrorCode]:
        """One error per (member id, instance id) leaving."""
        group = self._group(group_id)
        errors = []
        for member_id, instance_id in members:
            try:
                member = self._find(group, member_id, instance_id, admin=True)
            except KafkaError as e:
                errors.append(e.code)
                continue
            self.groups.remove(group, member, "left the group (LeaveGroup)")
            errors.append(E.none)
        return errors

    # -- lookups and timers ----------------------------------------------------------------------
    def _group(self, group_id: str) -> ConsumerGroup:
        group = self.groups.groups.get(group_id)
        if group is None:
            raise KafkaError(E.unknown_member_id, f"Group {group_id} not found.")
        return group

    def _member(self, group_id: str, member_id: str, instance_id: str | None,
                generation: int) -> tuple[ConsumerGroup, ConsumerMember]:
        group = self._group(group_id)
        member = self._find(group, member_id, instance_id)
        if generation != member.epoch:
            raise KafkaError(E.illegal_generation, f"The request generation id {generation} is not equal to the "
                                                   f"member epoch {member.epoch} of member {member.member_id}.")
        return group, member

    @staticmethod
    def _find(group: ConsumerGroup, member_id: str, instance_id: str | None, admin: bool = False) -> ConsumerMember:
        """Kafka's validateConsumerGroupMember (``admin``: LeaveGroup by instance id alone)."""
        if instance_id:
            found = group.static.get(instance_id)
            if found is None:
                raise KafkaError(E.unknown_member_id, f"Member with instance id {instance_id} is not a member of "
                                                      f"group {group.group_id}.")
            if found != member_id and not (admin and not member_id):
                raise KafkaError(E.fenced_instance_id, f"Static member {member_id} with instance id {instance_id} "
                                                       f"was fenced by member {found}.")
            member_id = found
        member = group.members.get(member_id)
        if member is None:
            raise KafkaError(E.unknown_member_id, f"Member {member_id} is not a member of group {group.group_id}.")
        if member.classic is None:
            raise KafkaError(E.unknown_member_id, f"Member {member_id} does not use the classic protocol.")
        return member

    def _timeout(self, group: ConsumerGroup, member: ConsumerMember, why: str, restart: bool = False) -> None:
        """Fence ``member`` unless it joins (or syncs) within its rebalance timeout."""
        if restart:
            cancel_classic(member)
        if member.classic_timer is None:
            member.classic_timer = self.groups.later(member.rebalance_timeout_ms, self._timed_out, group, member, why)

    def _timed_out(self, group: ConsumerGroup, member: ConsumerMember, why: str) -> None:
        member.classic_timer = None
        self.groups.fence(group, member, why)


def _waiting_on_others(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """Kafka's waitingOnUnreleasedPartition: a partition of its target another member still holds."""
    missing = group.target.get(member.member_id, frozenset()) - member.assigned
    return any(group.owners.get(tp, member.member_id) != member.member_id for tp in missing)
