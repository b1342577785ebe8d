"""Consumer group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete.

Only translation between wire versions and the broker's ``GroupCoordinator`` (``ctx.groups``,
built at start-up; see ``odradek.broker.group``). While ``__consumer_offsets`` (or, for a
transactional id, ``__transaction_state``) is missing, FindCoordinator has it created
(``InternalTopic.ensure()``) and, like Kafka, answers COORDINATOR_NOT_AVAILABLE until the
key's partition has a leader. JoinGroup v8 carries the client's reason (KIP-800, logged), v9
answers SkipAssignment to a static leader rejoining a Stable group (KIP-814).

JoinGroup, SyncGroup, Heartbeat and LeaveGroup to a KIP-848 consumer group with members are
served by it (``ctx.groups.classic``: its classic members, KIP-848's online upgrade); a JoinGroup
is answered once the group's changed records are written. DescribeGroups v6 answers a group
that is not classic (or not there) with GROUP_ID_NOT_FOUND and a message, as Kafka 4.x; earlier
versions describe it Dead.
"""

from __future__ import annotations

import logging
import time

from odradek.broker.context import BrokerContext
from odradek.broker.group.consumer_classic import ClassicJoin
from odradek.broker.handlers.answer import ZERO
from odradek.broker.handlers.consumer_groups import topic_catalog, topic_lookup
from odradek.broker.group.config import partition_for
from odradek.broker.group.records import OffsetValue
from odradek.broker.security.acl import Operation, ResourceType
from odradek.broker.security.authorizer import OPERATIONS_OMITTED, allowed, authorized_operations
from odradek.broker.security.session import current
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make

log = logging.getLogger(__name__)

E = ErrorCode


def _require(ctx: BrokerContext, op: Operation, group_id: str) -> None:
    """GROUP_AUTHORIZATION_FAILED unless ``op`` is allowed on the group."""
    if not allowed(ctx, op, ResourceType.GROUP, group_id):
        raise KafkaError(E.group_authorization_failed, "Group authorization failed.")


def _topic_allowed(ctx: BrokerContext, op: Operation, topic: str, log_denied: bool = True) -> bool:
    return allowed(ctx, op, ResourceType.TOPIC, topic, log_denied)


def _ms(td) -> int:
    return int(td.total_seconds() * 1000)


# -- FindCoordinator ---------------------------------------------------------------------------
# v5 only lets the broker answer TRANSACTION_ABORTABLE (KIP-890), which this one never does here;
# v6 adds key type 2 (share groups, KIP-932), not served: INVALID_REQUEST, as for any unknown type.
async def find_coordinator(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.FIND_COORDINATOR, header.api_version)
    keys = req.coordinator_keys if header.api_version >= 4 else (req.key,)
    found = [_locate(ctx, key, getattr(req, "key_type", 0)) for key in keys]
    if header.api_version >= 4:
        coordinators = tuple(make(s.Coordinator, key=k, node_id=n, host=h, port=p, error_code=e, error_message=m)
                             for k, (e, m, n, h, p) in zip(keys, found))
        return make(s.FindCoordinatorResponse, throttle_time=ZERO, coordinators=coordinators)
    e, m, n, h, p = found[0]
    return make(s.FindCoordinatorResponse, throttle_time=ZERO, error_code=e, error_message=m, node_id=n,
                host=h, port=p)


def _locate(ctx: BrokerContext, key: str, key_type: int) -> tuple:
    if key_type == 0 and not allowed(ctx, Operation.DESCRIBE, ResourceType.GROUP, key):
        return E.group_authorization_failed, "Group authorization failed.", -1, "", -1
    if key_type == 1 and not allowed(ctx, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return E.transactional_id_authorization_failed, "Transactional Id authorization failed.", -1, "", -1
    if key_type not in (0, 1):
        return E.invalid_request, f"Unknown coordinator type: {key_type}", -1, "", -1
    internal = ctx.offsets_topic if key_type == 0 else ctx.txn.topic
    replicas = ctx.replicas
    topic = replicas.topic(internal.name)
    if topic is None:
        internal.ensure()
        return E.coordinator_not_available, f"{internal.name} is being created", -1, "", -1
    state = topic.partitions[partition_for(key, len(topic.partitions))]
    leader = next((b for b in replicas.live_brokers() if b.id == state.leader), None)
    address = leader.endpoint(current().listener) if leader is not None else None
    if address is None:  # Kafka: the coordinator is not available on this listener either
        return E.coordinator_not_available, f"{internal.name}-{state.partition} has no leader", -1, "", -1
    return E.none, None, leader.id, *address


# -- membership --------------------------------------------------------------------------------
async def join_group(ctx: BrokerContext, header, req):
    s, v = Schemas(ApiKey.JOIN_GROUP, header.api_version), header.api_version
    coord = ctx.groups
    try:
        _require(ctx, Operation.READ, req.group_id)
        coord.check(req.group_id)
        session = _ms(req.session_timeout)
        rebalance = _ms(req.rebalance_timeout) if v >= 1 else session
        join = ClassicJoin(req.group_id, req.member_id, getattr(req, "group_instance_id", None), header.client_id or "",
                           current().client_host, session, rebalance, req.protocol_type,
                           tuple((p.name, p.metadata) for p in req.protocols), require_known_member_id=v >= 4)
        if coord.consumer.active(req.group_id):
            r = await _join_consumer_group(ctx, join)
        else:
            await coord.delete_consumer(req.group_id)  # an empty KIP-848 group becomes classic, as in Kafka
            r = await coord.membership.join(
                join.group_id, join.member_id, join.instance_id, join.client_id, join.client_host, session, rebalance,
                join.protocol_type, join.protocols, require_known_member_id=v >= 4, skip_assignment=v >= 9)
        if getattr(req, "reason", None):  # v8+ (KIP-800): informational, as in Kafka's rebalance logs
            log.debug("JoinGroup of %s in %s: %s", req.member_id or "a new member", req.group_id, req.reason)
    except KafkaError as e:
        return make(s.JoinGroupResponse, throttle_time=ZERO, error_code=e.code, generation_id=-1,
                    protocol_type=None, protocol_name=None if v >= 7 else "", leader="",
                    member_id=req.member_id, members=())
    members = tuple(make(s.JoinGroupResponseMember, member_id=m, group_instance_id=i, metadata=md)
                    for m, i, md in r.members)
    return make(s.JoinGroupResponse, throttle_time=ZERO, error_code=r.error, generation_id=r.generation,
                protocol_type=r.protocol_type, protocol_name=r.protocol_name if v >= 7 else (r.protocol_name or ""),
                leader=r.leader, member_id=r.member_id, members=members, skip_assignment=r.skip_assignment)


async def _join_consumer_group(ctx: BrokerContext, join: ClassicJoin):
    """A classic member joins a consumer group: answered once the group's records are written."""
    if not ctx.groups.membership.config.session_timeout_ok(join.session_timeout_ms):
        raise KafkaError(E.invalid_session_timeout, "The session timeout is not within the broker's range.")
    r = ctx.groups.classic.join(join, topic_lookup(ctx), topic_catalog(ctx))
    await ctx.groups.store_consumer(join.group_id)
    return r


async def sync_group(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.SYNC_GROUP, header.api_version)
    coord = ctx.groups
    try:
        _require(ctx, Operation.READ, req.group_id)
        coord.check(req.group_id)
        args = (req.group_id, req.generation_id, req.member_id, getattr(req, "group_instance_id", None),
                getattr(req, "protocol_type", None), getattr(req, "protocol_name", None))
        if coord.consumer.active(req.group_id):
            r = coord.classic.sync(*args)
        else:
            r = await coord.membership.sync(*args, {a.member_id: a.assignment for a in req.assignments})
    except KafkaError as e:
        return make(s.SyncGroupResponse, throttle_time=ZERO, error_code=e.code, protocol_type=None,
                    protocol_name=None, assignment=b"")
    return make(s.SyncGroupResponse, throttle_time=ZERO, error_code=r.error, protocol_type=r.protocol_type,
                protocol_name=r.protocol_name, assignment=r.assignment)


async def heartbeat(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.HEARTBEAT, header.api_version)
    coord = ctx.groups
    try:
        _require(ctx, Operation.READ, req.group_id)
        coord.check(req.group_id)
        serving = coord.classic if coord.consumer.active(req.group_id) else coord.membership
        error = serving.heartbeat(req.group_id, req.generation_id, req.member_id,
                                  getattr(req, "group_instance_id", None))
    except KafkaError as e:
        error = e.code
    return make(s.HeartbeatResponse, throttle_time=ZERO, error_code=error)


async def leave_group(ctx: BrokerContext, header, req):
    s, v = Schemas(ApiKey.LEAVE_GROUP, header.api_version), header.api_version
    leaving = [(m.member_id, m.group_instance_id) for m in req.members] if v >= 3 else [(req.member_id, None)]
    coord = ctx.groups
    try:
        _require(ctx, Operation.READ, req.group_id)
        coord.check(req.group_id)
        if coord.consumer.active(req.group_id):
            errors = coord.classic.leave(req.group_id, leaving)
            await coord.store_consumer(req.group_id)
        else:
            errors = coord.membership.leave(req.group_id, leaving)
    except KafkaError as e:
        return make(s.LeaveGroupResponse, throttle_time=ZERO, error_code=e.code, members=())
    if v < 3:
        return make(s.LeaveGroupResponse, throttle_time=ZERO, error_code=errors[0])
    members = tuple(make(s.MemberResponse, member_id=m, group_instance_id=i, error_code=err)
                    for (m, i), err in zip(leaving, errors))
    return make(s.LeaveGroupResponse, throttle_time=ZERO, error_code=E.none, members=members)


# -- offsets -----------------------------------------------------------------------------------
async def offset_commit(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.OFFSET_COMMIT, header.api_version)
    now = int(time.time() * 1000)
    results: dict[tuple[str, int], ErrorCode] = {}
    wanted: dict[tuple[str, int], OffsetValue] = {}
    group_denied = not allowed(ctx, Operation.READ, ResourceType.GROUP, req.group_id)
    for t in req.topics:
        meta = ctx.replicas.topic(t.name)
        topic_denied = not group_denied and not _topic_allowed(ctx, Operation.READ, t.name)
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if group_denied or topic_denied:
                results[tp] = E.group_authorization_failed if group_denied else E.topic_authorization_failed
            elif meta is None or not 0 <= p.partition_index < len(meta.partitions):
                results[tp] = E.unknown_topic_or_partition
            else:
                wanted[tp] = OffsetValue(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                         p.committed_metadata or "", now)
    coord = ctx.groups
    try:
        results.update(await coord.commit(req.group_id, req.generation_id_or_member_epoch, req.member_id,
                                          getattr(req, "group_instance_id", None), wanted, header.api_version))
    except KafkaError as e:
        results.update({tp: e.code for tp in wanted})
    topics: dict[str, list] = {}
    for t in req.topics:
        topics.setdefault(t.name, []).extend(
            make(s.OffsetCommitResponsePartition, partition_index=p.partition_index,
                 error_code=results[(t.name, p.partition_index)]) for p in t.partitions)
    return make(s.OffsetCommitResponse, throttle_time=ZERO, topics=tuple(
        make(s.OffsetCommitResponseTopic, name=n, partitions=tuple(ps)) for n, ps in topics.items()))


def _fetch_group(ctx: BrokerContext, s, group_id: str, topics, version: int, require_stable: bool = False,
                 member: tuple[str | None, int] = (None, -1)):
    """(group error, response topics) for one group of an OffsetFetch; with ``require_stable``
    (v7+, read_committed consumers) an offset an open transaction holds is UNSTABLE_OFFSET_COMMIT."""
    part_cls = getattr(s, "OffsetFetchResponsePartitions", None) or s.OffsetFetchResponsePartition
    topic_cls = getattr(s, "OffsetFetchResponseTopics", None) or s.OffsetFetchResponseTopic
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    denied = {tp: None for tp in (wanted or []) if not _topic_allowed(ctx, Operation.DESCRIBE, tp[0])}
    try:
        _require(ctx, Operation.DESCRIBE, group_id)
        _check_member(ctx, group_id, *member)
        found = ctx.groups.fetch(group_id, [tp for tp in wanted if tp not in denied] if wanted else wanted)
        if ctx.authorizer is not None:
            found = {tp: v for tp, v in found.items() if _topic_allowed(ctx, Operation.DESCRIBE, tp[0], False)}
        error = E.none
    except KafkaError as e:
        error = e.code
        found = {tp: None for tp in (wanted or [])}
    by_topic: dict[str, list] = {}
    for (topic, partition), value in sorted({**found, **denied}.items()):
        part_error = error if version < 2 else E.none
        if (topic, partition) in denied and error == E.none:
            part_error = E.topic_authorization_failed
        elif require_stable and error == E.none and ctx.groups.has_pending(group_id, (topic, partition)):
            part_error, value = E.unstable_offset_commit, None
        by_topic.setdefault(topic, []).append(make(
            part_cls, partition_index=partition, committed_offset=value.offset if value else -1,
            committed_leader_epoch=value.leader_epoch if value else -1,
            metadata=value.metadata if value else "", error_code=part_error))
    return error, tuple(make(topic_cls, name=n, partitions=tuple(ps)) for n, ps in by_topic.items())


def _check_member(ctx: BrokerContext, group_id: str, member_id: str | None, member_epoch: int) -> None:
    """OffsetFetch v9+ of a KIP-848 member: UNKNOWN_MEMBER_ID / STALE_MEMBER_EPOCH, as Kafka."""
    if member_epoch >= 0 or member_id:
        error = ctx.groups.consumer.offset_error(group_id, member_id or "", member_epoch)
        if error not in (None, E.none):
            raise KafkaError(error, f"OffsetFetch of member {member_id} at epoch {member_epoch}")


async def offset_fetch(ctx: BrokerContext, header, req):
    s, v = Schemas(ApiKey.OFFSET_FETCH, header.api_version), header.api_version
    if v >= 8:
        groups = []
        for g in req.groups:
            error, topics = _fetch_group(ctx, s, g.group_id, g.topics, v, req.require_stable,
                                         (getattr(g, "member_id", None), getattr(g, "member_epoch", -1)))
            groups.append(make(s.OffsetFetchResponseGroup, group_id=g.group_id, topics=topics, error_code=error))
        return make(s.OffsetFetchResponse, throttle_time=ZERO, groups=tuple(groups))
    error, topics = _fetch_group(ctx, s, req.group_id, req.topics, v, getattr(req, "require_stable", False))
    return make(s.OffsetFetchResponse, throttle_time=ZERO, topics=topics, error_code=error)


# -- admin -------------------------------------------------------------------------------------
async def describe_groups(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.DESCRIBE_GROUPS, header.api_version)
    coord = ctx.groups
    out = []
    for group_id in req.groups:
        try:
            _require(ctx, Operation.DESCRIBE, group_id)
            coord.check(group_id)
        except KafkaError as e:
            out.append(make(s.DescribedGroup, error_code=e.code, group_id=group_id, group_state="",
                            protocol_type="", protocol_data="", members=(), authorized_operations=OPERATIONS_OMITTED))
            continue
        g = coord.membership.groups.get(group_id)
        ops = authorized_operations(ctx, ResourceType.GROUP, group_id, getattr(req, "include_authorized_operations",
                                                                               False))
        if group_id in coord.consumer.groups or g is None or g.state.value == "Dead":
            out.append(_not_classic(s, header.api_version, group_id, group_id in coord.consumer.groups, ops))
            continue
        stable = g.state.value == "Stable"
        members = tuple(make(
            s.DescribedGroupMember, member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
            client_host=m.client_host, member_metadata=m.metadata(g.protocol_name) if stable else b"",
            member_assignment=m.assignment if stable else b"") for m in g.members.values())
        out.append(make(s.DescribedGroup, error_code=E.none, group_id=group_id, group_state=g.state.value,
                        protocol_type=g.protocol_type or "", protocol_data=g.protocol_name or "", members=members,
                        authorized_operations=ops))
    return make(s.DescribeGroupsResponse, throttle_time=ZERO, groups=tuple(out))


def _not_classic(s, version: int, group_id: str, consumer: bool, ops: int):
    """A group that is not a classic one (or not there): Dead; v6+ (KIP-1043) with Kafka's error."""
    error, message = E.none, None
    if version >= 6:
        error = E.group_id_not_found
        message = f"Group {group_id} is not a classic group." if consumer else f"Group {group_id} not found."
    return make(s.DescribedGroup, error_code=error, error_message=message, group_id=group_id, group_state="Dead",
                protocol_type="", protocol_data="", members=(), authorized_operations=ops)


CLASSIC, CONSUMER = "classic", "consumer"   # Kafka's GroupType names


async def list_groups(ctx: BrokerContext, header, req):
    """v4 filters by state, v5 by type (both case-insensitive, as Kafka): KIP-848 groups are
    "consumer" groups (protocol type "consumer"), every other group "classic"."""
    s = Schemas(ApiKey.LIST_GROUPS, header.api_version)
    coord = ctx.groups
    wanted = {x.lower() for x in getattr(req, "states_filter", ())}
    types = {x.lower() for x in getattr(req, "types_filter", ())}
    loading = any(not o.loaded for o in coord.owned.values())
    everything = allowed(ctx, Operation.DESCRIBE, ResourceType.CLUSTER, log_denied=False)  # else describable groups
    consumer = coord.consumer.groups
    listed = [(g.group_id, g.protocol_type or "", g.state.value, CLASSIC)
              for g in list(coord.membership.groups.values()) if g.group_id not in consumer]
    listed += [(g.group_id, CONSUMER, g.state, CONSUMER) for g in list(consumer.values())]
    groups = tuple(make(s.ListedGroup, group_id=gid, protocol_type=ptype, group_state=state, group_type=gtype)
                   for gid, ptype, state, gtype in listed
                   if coord.serves(gid) and (not wanted or state.lower() in wanted) and (not types or gtype in types)
                   and (everything or allowed(ctx, Operation.DESCRIBE, ResourceType.GROUP, gid, False)))
    return make(s.ListGroupsResponse, throttle_time=ZERO,
                error_code=E.coordinator_load_in_progress if loading else E.none, groups=groups)


async def delete_groups(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.DELETE_GROUPS, header.api_version)
    coord = ctx.groups
    results = []
    for group_id in req.groups_names:
        try:
            _require(ctx, Operation.DELETE, group_id)
            error = await coord.delete_group(group_id)
        except KafkaError as e:
            error = e.code
        results.append(make(s.DeletableGroupResult, group_id=group_id, error_code=error))
    return make(s.DeleteGroupsResponse, throttle_time=ZERO, results=tuple(results))


async def offset_delete(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.OFFSET_DELETE, header.api_version)
    wanted = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    try:
        _require(ctx, Operation.DELETE, req.group_id)
        unreadable = {tp for tp in wanted if not _topic_allowed(ctx, Operation.READ, tp[0])}
        error, per = await ctx.groups.delete_offsets(req.group_id, [tp for tp in wanted if tp not in unreadable])
        per = {**per, **dict.fromkeys(unreadable, E.topic_authorization_failed)}
    except KafkaError as e:
        error, per = e.code, {}
    topics = tuple(make(s.OffsetDeleteResponseTopic, name=t.name, partitions=tuple(
        make(s.OffsetDeleteResponsePartition, partition_index=p.partition_index,
             error_code=per.get((t.name, p.partition_index), E.none)) for p in t.partitions))
        for t in req.topics) if error == E.none else ()
    return make(s.OffsetDeleteResponse, error_code=error, throttle_time=ZERO, topics=topics)


# api key: (min version, max version, handler), merged into the broker's table
TABLE = {
    ApiKey.OFFSET_COMMIT: (2, 9, offset_commit),   # v9: KIP-848 members commit with their member epoch
    ApiKey.OFFSET_FETCH: (1, 9, offset_fetch),
    ApiKey.FIND_COORDINATOR: (0, 6, find_coordinator),
    ApiKey.JOIN_GROUP: (0, 9, join_group),
    ApiKey.HEARTBEAT: (0, 4, heartbeat),
    ApiKey.LEAVE_GROUP: (0, 5, leave_group),
    ApiKey.SYNC_GROUP: (0, 5, sync_group),
    ApiKey.DESCRIBE_GROUPS: (0, 6, describe_groups),
    ApiKey.LIST_GROUPS: (0, 5, list_groups),
    ApiKey.DELETE_GROUPS: (0, 2, delete_groups),
    ApiKey.OFFSET_DELETE: (0, 0, offset_delete),
}
