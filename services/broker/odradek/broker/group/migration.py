"""KIP-848's online upgrade and downgrade: a classic group turned into a consumer group when a
member using the consumer protocol joins it, and a consumer group turned back into a classic
group when its last member using the consumer protocol leaves (Kafka 4.x's
``group.consumer.migration.policy``, default ``bidirectional``). Pure conversions; the
coordinator swaps the groups and writes their records.

Upgrade (``upgrade_refusal``, ``to_consumer``): allowed for a classic group of the consumer
protocol type with at most ``group.consumer.max.size`` members. Its group epoch and target
epoch are the classic generation; every member becomes a classic member of the consumer group
(``ConsumerMember.classic``), Stable at that epoch, owning (and targeted with) the partitions its
last SyncGroup gave it, subscribed to its Subscription's topics. The classic group's record is
deleted in the same write as the consumer group's records (``written`` holds its key).

Downgrade (``to_classic``): every member left is classic; the classic group's generation is
the group epoch, its members' protocols their JoinGroup protocols, their assignments their
target partitions (as a consumer protocol Assignment at their Subscription's version); the
coordinator then starts a rebalance, as Kafka does.
"""

from __future__ import annotations

from odradek.broker.group.consumer import ConsumerGroup, ConsumerMember, ConsumerSettings, Lookup
from odradek.broker.group.consumer_records import ClassicMetadata
from odradek.broker.group.consumer_state import UNKNOWN
from odradek.broker.group.embedded import (PROTOCOL_TYPE, encode_assignment, metadata_version, parse_assignment,
                                           parse_subscription)
from odradek.broker.group.model import Group, GroupState, Member
from odradek.broker.group.records import group_key
from odradek.errors import ErrorCode, KafkaError

POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


def upgrade_refusal(classic: Group, settings: ConsumerSettings) -> str | None:
    """Why ``classic`` (with members) may not become a consumer group; None if it may."""
    if not settings.upgrade:
        return "the online upgrade is disabled"
    if classic.protocol_type != PROTOCOL_TYPE:
        return "the group does not use the consumer embedded protocol"
    if len(classic.members) > settings.max_size:
        return "the group size exceeds the consumer group maximum size"
    return None


def to_consumer(classic: Group, lookup: Lookup) -> ConsumerGroup:
    """The consumer group ``classic`` becomes; GROUP_ID_NOT_FOUND if a member's embedded protocol
    is malformed (the group stays classic)."""
    gid, generation = classic.group_id, classic.generation
    try:
        parsed = {mid: (parse_subscription(m.metadata(classic.protocol_name) or m.protocols[0][1]),
                        parse_assignment(m.assignment)) for mid, m in classic.members.items()}
    except KafkaError:
        raise KafkaError(ErrorCode.group_id_not_found, f"Cannot upgrade the classic group {gid} to consumer group "
                                                       f"because the embedded consumer protocol is malformed.") from None
    subscribed = frozenset(t for sub, _ in parsed.values() for t in sub.topics)
    topics = dict(lookup(subscribed | {t for _, owned in parsed.values() for t, _ in owned}))
    group = ConsumerGroup(gid, epoch=generation, target_epoch=generation,
                          topics={n: v for n, v in topics.items() if n in subscribed})
    for mid, m in classic.members.items():
        sub, owned = parsed[mid]
        assigned = frozenset((topics[t][0], p) for t, p in owned if t in topics)
        group.members[mid] = ConsumerMember(
            mid, m.instance_id, sub.rack_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            frozenset(sub.topics), epoch=generation, previous_epoch=generation, assigned=assigned,
            classic=ClassicMetadata(m.session_timeout_ms, tuple(m.protocols)))
        group.target[mid] = assigned
        group.owners.update(dict.fromkeys(assigned, mid))
        if m.instance_id:
            group.static[m.instance_id] = mid
    group.written = {group_key(gid): UNKNOWN}  # the classic record: deleted with the first write
    return group


def to_classic(group: ConsumerGroup, shell: Group | None, now_ms: int) -> Group:
    """The classic group ``group`` (only classic members) becomes, Stable; ``shell`` is the
    member-less classic group holding its offsets (reused, so they stay)."""
    classic = shell if shell is not None else Group(group.group_id)
    classic.members.clear()
    classic.static.clear()
    classic.leader_id = None
    classic.protocol_type, classic.generation = PROTOCOL_TYPE, group.epoch
    for mid, m in group.members.items():
        classic.add(Member(mid, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                           m.classic.session_timeout_ms, PROTOCOL_TYPE, m.classic.protocols))
    classic.protocol_name = classic.select_protocol()
    names = {topic_id: name for name, (topic_id, _) in group.topics.items()}
    for mid, m in classic.members.items():
        target = [(names[t], p) for t, p in group.target.get(mid, ()) if t in names]
        m.assignment = encode_assignment(target, metadata_version(m.metadata(classic.protocol_name)))
    classic.transition(GroupState.STABLE, now_ms)
    return classic
