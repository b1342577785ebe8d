"""KIP-848 consumer group APIs: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

Only translation between wire versions and the coordinator's ``ConsumerGroups``
(``ctx.groups.consumer``; see ``odradek.broker.group.consumer``). Partitions travel as topic
ids; the subscribed topics' ids and partition counts come from the broker's metadata. A
heartbeat is answered after the group's changed records are in ``__consumer_offsets``. A member
joining (epoch 0) a classic group with members converts it to a consumer group (KIP-848's online
upgrade, ``group.consumer.migration.policy``); a group that may not be converted, or a heartbeat
with an epoch to a classic group, is GROUP_ID_NOT_FOUND, as Kafka answers. ConsumerGroupDescribe
v1 tells each member's type (0 classic, 1 consumer).
"""

from __future__ import annotations

import datetime
import logging
import uuid

from odradek.broker.context import BrokerContext
from odradek.broker.group.consumer import ConsumerGroup, Heartbeat, validate
from odradek.broker.handlers.answer import ZERO
from odradek.broker.security.acl import Operation, ResourceType
from odradek.broker.security.authorizer import allowed, authorized_operations
from odradek.broker.security.session import current
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make

E = ErrorCode
log = logging.getLogger(__name__)


def topic_lookup(ctx: BrokerContext):
    def topics(names):
        found = {n: ctx.replicas.topic(n) for n in names}
        return {n: (str(uuid.UUID(m.topic_id)), len(m.partitions)) for n, m in found.items() if m is not None}
    return topics


def topic_catalog(ctx: BrokerContext):
    """The topics a regex subscription may match: those the member may Describe, as Kafka
    resolves a regex with the authorizations of the heartbeat that refreshed it."""
    def names():
        all_names = ctx.metadata_cache.topics(ctx.replicas.metadata).names
        if ctx.authorizer is None:
            return all_names  # sorted, one tuple per metadata snapshot
        return tuple(n for n in all_names if allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, n, log_denied=False))
    return names


def _classic_in_use(ctx: BrokerContext, group_id: str) -> bool:
    classic = ctx.groups.membership.groups.get(group_id)
    return classic is not None and bool(classic.members)


async def consumer_group_heartbeat(ctx: BrokerContext, header, req):
    s, v = Schemas(ApiKey.CONSUMER_GROUP_HEARTBEAT, header.api_version), header.api_version
    member_id = req.member_id
    if v == 0 and not member_id and req.member_epoch == 0:
        member_id = str(uuid.uuid4())  # v0: the coordinator names a joining member; v1+: the client does
    owned = None if req.topic_partitions is None else frozenset(
        (str(t.topic_id), p) for t in req.topic_partitions for p in t.partitions)
    try:
        if not allowed(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
            raise KafkaError(E.group_authorization_failed, "Group authorization failed.")
        ctx.groups.check(req.group_id)
        rebalance = req.rebalance_timeout
        hb = Heartbeat(req.group_id, member_id, req.member_epoch, header.client_id or "", current().client_host,
                       req.instance_id, req.rack_id, int(rebalance.total_seconds() * 1000),
                       req.subscribed_topic_names, getattr(req, "subscribed_topic_regex", None),
                       req.server_assignor, owned)
        if _classic_in_use(ctx, req.group_id):
            validate(hb)  # Kafka checks the request before it converts anything
            if req.member_epoch != 0:
                raise KafkaError(E.group_id_not_found, f"Group {req.group_id} is not a consumer group.")
            ctx.groups.upgrade(req.group_id, topic_lookup(ctx))
        r = ctx.groups.consumer.heartbeat(hb, topic_lookup(ctx), topic_catalog(ctx))
        await ctx.groups.store_consumer(req.group_id)  # answered once its records are written, as Kafka does
    except KafkaError as e:
        if e.code == E.invalid_request:  # a client bug or a feature not served: worth a line
            log.info("ConsumerGroupHeartbeat of %s in %s refused: %s", member_id, req.group_id, e.message)
        return make(s.ConsumerGroupHeartbeatResponse, throttle_time=ZERO, error_code=e.code,
                    error_message=e.message, member_id=None, member_epoch=0, heartbeat_interval=ZERO)
    assignment = None if r.assignment is None else make(s.Assignment, topic_partitions=_by_topic(
        s.TopicPartitions, r.assignment))
    return make(s.ConsumerGroupHeartbeatResponse, throttle_time=ZERO, error_code=E.none, error_message=None,
                member_id=r.member_id, member_epoch=r.member_epoch,
                heartbeat_interval=datetime.timedelta(milliseconds=r.heartbeat_interval_ms), assignment=assignment)


def _by_topic(cls, partitions, names: dict[str, str] | None = None) -> tuple:
    """Partitions ``(topic id, partition)`` grouped per topic (with its name, for Describe)."""
    per: dict[str, list[int]] = {}
    for topic_id, p in partitions:
        per.setdefault(topic_id, []).append(p)
    extra = (lambda tid: {"topic_name": names.get(tid, "")}) if names is not None else (lambda tid: {})
    return tuple(make(cls, topic_id=uuid.UUID(tid), partitions=tuple(sorted(ps)), **extra(tid))
                 for tid, ps in sorted(per.items()))


async def consumer_group_describe(ctx: BrokerContext, header, req):
    s, v = Schemas(ApiKey.CONSUMER_GROUP_DESCRIBE, header.api_version), header.api_version
    out = []
    for group_id in req.group_ids:
        try:
            if not allowed(ctx, Operation.DESCRIBE, ResourceType.GROUP, group_id):
                raise KafkaError(E.group_authorization_failed, "Group authorization failed.")
            ctx.groups.check(group_id)
            group = ctx.groups.consumer.groups.get(group_id)
            if group is None or _classic_in_use(ctx, group_id):
                raise KafkaError(E.group_id_not_found, f"Group {group_id} is not a consumer group." if group is None
                                 and group_id in ctx.groups.membership.groups else f"Group {group_id} not found.")
        except KafkaError as e:
            out.append(make(s.DescribedGroup, error_code=e.code, error_message=e.message, group_id=group_id,
                            group_state="Dead", group_epoch=-1, assignment_epoch=-1, assignor_name="", members=()))
            continue
        ops = authorized_operations(ctx, ResourceType.GROUP, group_id, req.include_authorized_operations)
        out.append(make(s.DescribedGroup, error_code=E.none, error_message=None, group_id=group_id,
                        group_state=group.state, group_epoch=group.epoch, assignment_epoch=group.target_epoch,
                        assignor_name=group.assignor, members=_members(s, v, group), authorized_operations=ops))
    return make(s.ConsumerGroupDescribeResponse, throttle_time=ZERO, groups=tuple(out))


def _members(s, version: int, group: ConsumerGroup) -> tuple:
    names = {tid: name for name, (tid, _) in group.topics.items()}
    def member_type(m) -> dict:
        return {"member_type": 0 if m.classic is not None else 1} if version >= 1 else {}
    return tuple(make(
        s.Member, member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.epoch,
        client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=tuple(sorted(m.subscribed)),
        subscribed_topic_regex=m.regex or None,
        assignment=make(s.Assignment, topic_partitions=_by_topic(s.TopicPartitions, m.assigned, names)),
        target_assignment=make(s.Assignment, topic_partitions=_by_topic(
            s.TopicPartitions, group.target.get(m.member_id, ()), names)), **member_type(m))
        for m in group.members.values())


# api key: (min version, max version, handler), merged into the broker's table
TABLE = {
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1, consumer_group_heartbeat),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1, consumer_group_describe),
}
