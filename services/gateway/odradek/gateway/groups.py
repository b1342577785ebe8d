"""Consumer groups under Confluent's v3 paths (paths in ``routes``): groups, their consumers and
assignments, lag per partition and the lag summary — and Odradek's extensions for the console:
resetting a group's committed offsets (Kafka's ``kafka-consumer-groups --reset-offsets``) and
deleting a group, both only while the group has no members, as Kafka requires.

Everything goes through the request principal's admin client (DescribeGroups, ListGroups,
OffsetFetch, ListOffsets, OffsetCommit, DeleteGroups), so the brokers' group ACLs apply; the
token's ``groups`` (``auth``) bound which groups it may see and touch; lags of topics the
caller's token may not read are left out."""

from __future__ import annotations

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, TopicPartition
from confluent_kafka.admin import OffsetSpec
from fastapi import Request, Response

from odradek.gateway import v3
from odradek.gateway.auth import ADMIN, READ, Principal, require
from odradek.gateway.errors import (GatewayError, GroupNotEmpty, GroupNotFound, KafkaFailure, PartitionNotFound,
                                    TopicNotFound)
from odradek.gateway.models import ResetOffsets
from odradek.gateway.principals import kafka

# librdkafka's names of the group states, as Confluent's REST Proxy spells them
STATES = {ConsumerGroupState.PREPARING_REBALANCING: "PREPARING_REBALANCE",
          ConsumerGroupState.COMPLETING_REBALANCING: "COMPLETING_REBALANCE"}


def _group_error(group: str, topic: str = ""):
    """The domain error of a Kafka error about ``group`` (and ``topic``, named by a refusal)."""
    def mapped(err: KafkaError) -> GatewayError:
        if err.code() == KafkaError.GROUP_ID_NOT_FOUND:
            return GroupNotFound(group)
        if err.code() in (KafkaError.NON_EMPTY_GROUP, KafkaError.UNKNOWN_MEMBER_ID):
            return GroupNotEmpty(f"Consumer group {group} has members: {err.str()}")
        return KafkaFailure.of(err, topics=topic, group=group)
    return mapped


async def _describe(request: Request, groups: list[str]) -> list:
    if not groups:
        return []
    futures = (await kafka(request)).admin.describe_consumer_groups(groups, request_timeout=v3.TIMEOUT_S)
    return [await v3.wait(futures[g], _group_error(g)) for g in groups]


async def _group(request: Request, group: str):
    """The group's description; GroupNotFound for a group the coordinator does not know (Dead)."""
    [described] = await _describe(request, [group])
    if described.state == ConsumerGroupState.DEAD:
        raise GroupNotFound(group)
    return described


def _state(g) -> str:
    return STATES.get(g.state, g.state.name if isinstance(g.state, ConsumerGroupState) else str(g.state))


def _group_json(at: v3.Links, g) -> dict:
    return {"kind": "KafkaConsumerGroup",
            "metadata": at.metadata(("consumer-groups", g.group_id), (("consumer-group", g.group_id),)),
            "cluster_id": at.cluster, "consumer_group_id": g.group_id, "is_simple": g.is_simple_consumer_group,
            "partition_assignor": g.partition_assignor, "state": _state(g),
            "coordinator": at.related("brokers", g.coordinator.id) if g.coordinator is not None else None,
            "consumer": at.related("consumer-groups", g.group_id, "consumers"),
            "lag_summary": at.related("consumer-groups", g.group_id, "lag-summary")}


async def list_groups(cluster_id: str, request: Request, who: Principal = require(READ)) -> dict:
    at = await v3.links(request, cluster_id)
    listed = await v3.wait((await kafka(request)).admin.list_consumer_groups(request_timeout=v3.TIMEOUT_S))
    described = await _describe(request, sorted(g.group_id for g in listed.valid if who.may_group(g.group_id)))
    return at.listing("KafkaConsumerGroupList", ("consumer-groups",),
                      [_group_json(at, g) for g in described if g.state != ConsumerGroupState.DEAD])


async def get_group(cluster_id: str, group: str, request: Request, _=require(READ)) -> dict:
    at = await v3.links(request, cluster_id)
    return _group_json(at, await _group(request, group))


# -- consumers and their assignments ----------------------------------------------------------------
def _consumer_json(at: v3.Links, group: str, m) -> dict:
    path = ("consumer-groups", group, "consumers", m.member_id)
    return {"kind": "KafkaConsumer",
            "metadata": at.metadata(path, (("consumer-group", group), ("consumer", m.member_id))),
            "cluster_id": at.cluster, "consumer_group_id": group, "consumer_id": m.member_id,
            "instance_id": m.group_instance_id or None, "client_id": m.client_id, "host": m.host,
            "assignments": at.related(*path, "assignments")}


def _member(g, consumer_id: str):
    for m in g.members:
        if m.member_id == consumer_id:
            return m
    raise GroupNotFound(g.group_id, f"Consumer {consumer_id} of consumer group {g.group_id}")


async def list_consumers(cluster_id: str, group: str, request: Request, _=require(READ)) -> dict:
    at = await v3.links(request, cluster_id)
    g = await _group(request, group)
    return at.listing("KafkaConsumerList", ("consumer-groups", group, "consumers"),
                      [_consumer_json(at, group, m) for m in sorted(g.members, key=lambda m: m.member_id)])


async def get_consumer(cluster_id: str, group: str, consumer_id: str, request: Request, _=require(READ)) -> dict:
    at = await v3.links(request, cluster_id)
    return _consumer_json(at, group, _member(await _group(request, group), consumer_id))


async def list_assignments(cluster_id: str, group: str, consumer_id: str, request: Request, _=require(READ)) -> dict:
    at = await v3.links(request, cluster_id)
    m = _member(await _group(request, group), consumer_id)
    path = ("consumer-groups", group, "consumers", consumer_id, "assignments")
    tps = sorted((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else []))
    return at.listing("KafkaConsumerAssignmentList", path, [
        {"kind": "KafkaConsumerAssignment",
         "metadata": at.metadata((*path, t, "partitions", p), (("consumer-group", group), ("consumer", consumer_id),
                                                               ("assignment", t), ("partition", p))),
         "cluster_id": at.cluster, "consumer_group_id": group, "consumer_id": consumer_id, "topic_name": t,
         "partition_id": p, "partition": at.related("topics", t, "partitions", p),
         "lag": at.related("consumer-groups", group, "lags", t, "partitions", p)} for t, p in tps])


# -- lag --------------------------------------------------------------------------------------------
async def _lags(request: Request, group: str, who: Principal) -> tuple[object, list[dict]]:
    """The group and, per partition it has a committed offset for (and the caller may read),
    that offset, the log end offset and the member owning the partition."""
    g = await _group(request, group)
    admin = (await kafka(request)).admin
    fetched = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=v3.TIMEOUT_S)
    committed = [tp for tp in (await v3.wait(fetched[group], _group_error(group))).topic_partitions
                 if tp.offset >= 0 and tp.error is None and who.may(READ, tp.topic)]
    ends = await v3.list_offsets(admin, {TopicPartition(tp.topic, tp.partition): OffsetSpec.latest()
                                         for tp in committed})
    owners = {(tp.topic, tp.partition): m for m in g.members
              for tp in (m.assignment.topic_partitions if m.assignment else [])}
    rows = []
    for tp in sorted(committed, key=lambda tp: (tp.topic, tp.partition)):
        end = ends.get((tp.topic, tp.partition)) or 0
        rows.append({"topic": tp.topic, "partition": tp.partition, "current": tp.offset, "end": end,
                     "lag": max(0, end - tp.offset), "owner": owners.get((tp.topic, tp.partition))})
    return g, rows


def _lag_json(at: v3.Links, group: str, row: dict) -> dict:
    owner, t, p = row["owner"], row["topic"], row["partition"]
    return {"kind": "KafkaConsumerLag",
            "metadata": at.metadata(("consumer-groups", group, "lags", t, "partitions", p),
                                    (("consumer-group", group), ("lag", t), ("partition", p))),
            "cluster_id": at.cluster, "consumer_group_id": group, "topic_name": t, "partition_id": p,
            "current_offset": row["current"], "log_end_offset": row["end"], "lag": row["lag"],
            "consumer_id": owner.member_id if owner else "", "instance_id": (owner.group_instance_id or None)
            if owner else None, "client_id": owner.client_id if owner else ""}


async def list_lags(cluster_id: str, group: str, request: Request, who: Principal = require(READ)) -> dict:
    at = await v3.links(request, cluster_id)
    _, rows = await _lags(request, group, who)
    return at.listing("KafkaConsumerLagList", ("consumer-groups", group, "lags"),
                      [_lag_json(at, group, r) for r in rows])


async def get_lag(cluster_id: str, group: str, topic: str, partition: int, request: Request,
                  who: Principal = require(READ)) -> dict:
    at = await v3.links(request, cluster_id)
    _, rows = await _lags(request, group, who)
    for row in rows:
        if (row["topic"], row["partition"]) == (topic, partition):
            return _lag_json(at, group, row)
    raise PartitionNotFound(topic, partition, where=f"Consumer group {group} has no committed offset: ")


async def lag_summary(cluster_id: str, group: str, request: Request, who: Principal = require(READ)) -> dict:
    at = await v3.links(request, cluster_id)
    _, rows = await _lags(request, group, who)
    top = max(rows, key=lambda r: r["lag"], default=None)
    owner = top["owner"] if top else None
    return {"kind": "KafkaConsumerGroupLagSummary",
            "metadata": {"self": at.url("consumer-groups", group, "lag-summary"),
                         "resource_name": f"crn:///kafka={at.cluster}/consumer-group={group}/lag-summary"},
            "cluster_id": at.cluster, "consumer_group_id": group,
            "max_lag_consumer_id": owner.member_id if owner else "",
            "max_lag_instance_id": (owner.group_instance_id or None) if owner else None,
            "max_lag_client_id": owner.client_id if owner else "",
            "max_lag_topic_name": top["topic"] if top else None,
            "max_lag_partition_id": top["partition"] if top else None,
            "max_lag": top["lag"] if top else 0, "total_lag": sum(r["lag"] for r in rows),
            "max_lag_consumer": at.related("consumer-groups", group, "consumers", owner.member_id) if owner else None,
            "max_lag_partition": at.related("topics", top["topic"], "partitions", top["partition"]) if top else None}


# -- Odradek extensions: offset reset and delete ----------------------------------------------------
async def _targets(request: Request, body: ResetOffsets) -> dict[int, int]:
    """Partition to the offset ``body`` asks for, each within [log start, log end] as
    ``kafka-consumer-groups --reset-offsets`` clamps it; a timestamp past the last record: the end."""
    md = await (await kafka(request)).metadata(fresh=True)
    t = md.topics.get(body.topic_name)
    if t is None or t.error is not None:
        raise TopicNotFound(body.topic_name)
    partitions = sorted(t.partitions) if body.partition_id is None else [body.partition_id]
    if body.partition_id is not None and body.partition_id not in t.partitions:
        raise PartitionNotFound(body.topic_name, body.partition_id)
    admin = (await kafka(request)).admin

    async def at(spec) -> dict[int, int | None]:
        found = await v3.list_offsets(admin, {TopicPartition(body.topic_name, p): spec for p in partitions})
        return {p: found[(body.topic_name, p)] for p in partitions}
    low, high = await at(OffsetSpec.earliest()), await at(OffsetSpec.latest())
    if body.to == "earliest":
        return low
    if body.to == "latest":
        return high
    if body.to == "timestamp":
        by_time = await at(OffsetSpec.for_timestamp(body.timestamp))
        return {p: high[p] if by_time[p] is None else by_time[p] for p in partitions}
    return {p: min(max(body.offset, low[p]), high[p]) for p in partitions}


async def reset_offsets(cluster_id: str, group: str, body: ResetOffsets, request: Request,
                        _=require(ADMIN)) -> dict:
    at = await v3.links(request, cluster_id)
    [g] = await _describe(request, [group])
    if g.members:   # Kafka commits offsets of a group from outside only while it has no members
        raise GroupNotEmpty(f"Offsets can only be reset if the group {group} has no members, "
                            f"but its state is {_state(g)}")
    targets = await _targets(request, body)
    wanted = [TopicPartition(body.topic_name, p, o) for p, o in sorted(targets.items())]
    futures = (await kafka(request)).admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, wanted)], request_timeout=v3.TIMEOUT_S)
    done = await v3.wait(futures[group], _group_error(group, body.topic_name))
    for tp in done.topic_partitions:
        if tp.error is not None:
            raise _group_error(group, body.topic_name)(tp.error)
    return {"kind": "OdradekConsumerGroupOffsetList", "cluster_id": at.cluster, "consumer_group_id": group,
            "data": [{"topic_name": tp.topic, "partition_id": tp.partition, "offset": tp.offset} for tp in wanted]}


async def delete_group(cluster_id: str, group: str, request: Request, _=require(ADMIN)) -> Response:
    await v3.links(request, cluster_id)
    futures = (await kafka(request)).admin.delete_consumer_groups([group], request_timeout=v3.TIMEOUT_S)
    await v3.wait(futures[group], _group_error(group))
    return Response(status_code=204)

