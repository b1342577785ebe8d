"""The cluster under Confluent's v3 paths (paths in ``routes``): the cluster, its brokers, a
topic's partitions and their replicas (leader, in sync) — and Odradek's extensions for the
console: the overview (controller, under-replicated and offline partitions), the throughput
counters and the partitions' offsets and sizes (``broker_metrics``; ListOffsets by time).

Brokers come from DescribeCluster (it carries racks), partitions from Metadata, offsets from
ListOffsets, all through the request principal's admin client, so the brokers' ACLs apply."""

from __future__ import annotations

import time

from confluent_kafka import TopicPartition
from confluent_kafka.admin import ConfigResource, OffsetSpec
from fastapi import Query, Request

from odradek.gateway import v3
from odradek.gateway.auth import READ, require
from odradek.gateway.broker_metrics import BrokerMetrics
from odradek.gateway.errors import BrokerNotFound, PartitionNotFound, TopicNotFound
from odradek.gateway.principals import kafka

TIMESTAMP = Query(None, ge=0, description="ms since the epoch: also the earliest offset whose record timestamp "
                                          "is >= it (ListOffsets by time)")


# -- the cluster and its brokers --------------------------------------------------------------------
async def get_cluster(cluster_id: str, request: Request, _=require(READ)) -> dict:
    at = await v3.links(request, cluster_id)
    controller = (await (await kafka(request)).metadata(fresh=True)).controller_id
    return {"kind": "KafkaCluster", "metadata": {"self": at.url(), "resource_name": f"crn:///kafka={at.cluster}"},
            "cluster_id": at.cluster,
            "controller": at.related("brokers", controller) if controller is not None and controller >= 0 else None,
            "acls": at.related("acls"), "brokers": at.related("brokers"),
            "broker_configs": at.related("broker-configs"), "consumer_groups": at.related("consumer-groups"),
            "topics": at.related("topics"),
            "partition_reassignments": at.related("topics", "-", "partitions", "-", "reassignment")}


async def _nodes(request: Request) -> list:
    described = await v3.wait((await kafka(request)).admin.describe_cluster(request_timeout=v3.TIMEOUT_S))
    return sorted(described.nodes, key=lambda n: n.id)


def _broker_json(at: v3.Links, node) -> dict:
    return {"kind": "KafkaBroker", "metadata": at.metadata(("brokers", node.id), (("broker", node.id),)),
            "cluster_id": at.cluster, "broker_id": node.id, "host": node.host, "port": node.port,
            "rack": node.rack or None, "configs": at.related("brokers", node.id, "configs"),
            "partition_replicas": at.related("brokers", node.id, "partition-replicas")}


async def list_brokers(cluster_id: str, request: Request, _=require(READ)) -> dict:
    at = await v3.links(request, cluster_id)
    return at.listing("KafkaBrokerList", ("brokers",), [_broker_json(at, n) for n in await _nodes(request)])


async def get_broker(cluster_id: str, broker_id: int, request: Request, _=require(READ)) -> dict:
    at = await v3.links(request, cluster_id)
    for node in await _nodes(request):
        if node.id == broker_id:
            return _broker_json(at, node)
    raise BrokerNotFound(broker_id)


async def _live(request: Request, broker_id: int):
    """Fresh Metadata, once ``broker_id`` is known to be a live broker in it."""
    md = await (await kafka(request)).metadata(fresh=True)
    if broker_id not in md.brokers:
        raise BrokerNotFound(broker_id)
    return md


async def broker_configs(cluster_id: str, broker_id: int, request: Request, _=require(READ)) -> dict:
    at = await v3.links(request, cluster_id)
    await _live(request, broker_id)   # librdkafka would wait for an unknown broker until its timeout
    resource = ConfigResource("broker", str(broker_id))
    futures = (await kafka(request)).admin.describe_configs([resource], request_timeout=v3.TIMEOUT_S)
    configs = await v3.wait(futures[resource])
    return at.listing("KafkaBrokerConfigList", ("brokers", broker_id, "configs"), [
        v3.config_json("KafkaBrokerConfig", name, c, metadata=at.metadata(
            ("brokers", broker_id, "configs", name), (("broker", broker_id), ("config", name))),
            cluster_id=at.cluster, broker_id=broker_id) for name, c in sorted(configs.items())])


async def broker_replicas(cluster_id: str, broker_id: int, request: Request, _=require(READ)) -> dict:
    """Every partition replica the broker holds (Metadata), leader or follower."""
    at = await v3.links(request, cluster_id)
    md = await _live(request, broker_id)
    return at.listing("KafkaReplicaList", ("brokers", broker_id, "partition-replicas"), [
        _replica_json(at, name, md.topics[name].partitions[p], broker_id) for name in sorted(md.topics)
        for p in sorted(md.topics[name].partitions) if broker_id in md.topics[name].partitions[p].replicas])


# -- partitions and replicas ------------------------------------------------------------------------
async def _topic(request: Request, topic: str):
    """The topic's Metadata (internal topics too), refreshed once on a miss; 403 rather than 404
    when the brokers' ACLs hide it from this principal."""
    bridge = await kafka(request)
    for fresh in (False, True):
        t = (await bridge.metadata(fresh)).topics.get(topic)
        if t is not None and t.error is None:
            return t
    await bridge.why_hidden(topic)
    raise TopicNotFound(topic)


async def _partition(request: Request, topic: str, partition: int):
    t = await _topic(request, topic)
    if partition not in t.partitions:
        t = await _topic(request, topic)
        if partition not in t.partitions:
            raise PartitionNotFound(topic, partition)
    return t.partitions[partition]


def _partition_json(at: v3.Links, topic: str, p) -> dict:
    path = ("topics", topic, "partitions", p.id)
    return {"kind": "KafkaPartition", "metadata": at.metadata(path, (("topic", topic), ("partition", p.id))),
            "cluster_id": at.cluster, "topic_name": topic, "partition_id": p.id,
            "leader": at.related(*path, "replicas", p.leader) if p.leader >= 0 else None,
            "replicas": at.related(*path, "replicas"), "reassignment": at.related(*path, "reassignment")}


def _replica_json(at: v3.Links, topic: str, p, broker: int) -> dict:
    path = ("topics", topic, "partitions", p.id, "replicas", broker)
    return {"kind": "KafkaReplica",
            "metadata": at.metadata(path, (("topic", topic), ("partition", p.id), ("replica", broker))),
            "cluster_id": at.cluster, "topic_name": topic, "partition_id": p.id, "broker_id": broker,
            "is_leader": broker == p.leader, "is_in_sync": broker in p.isrs, "broker": at.related("brokers", broker)}


async def list_partitions(cluster_id: str, topic: str, request: Request, _=require(READ)) -> dict:
    at = await v3.links(request, cluster_id)
    t = await _topic(request, topic)
    return at.listing("KafkaPartitionList", ("topics", topic, "partitions"),
                      [_partition_json(at, topic, t.partitions[p]) for p in sorted(t.partitions)])


async def get_partition(cluster_id: str, topic: str, partition: int, request: Request, _=require(READ)) -> dict:
    at = await v3.links(request, cluster_id)
    return _partition_json(at, topic, await _partition(request, topic, partition))


async def list_replicas(cluster_id: str, topic: str, partition: int, request: Request, _=require(READ)) -> dict:
    at = await v3.links(request, cluster_id)
    p = await _partition(request, topic, partition)
    return at.listing("KafkaReplicaList", ("topics", topic, "partitions", partition, "replicas"),
                      [_replica_json(at, topic, p, b) for b in p.replicas])


async def get_replica(cluster_id: str, topic: str, partition: int, broker_id: int, request: Request,
                      _=require(READ)) -> dict:
    at = await v3.links(request, cluster_id)
    p = await _partition(request, topic, partition)
    if broker_id not in p.replicas:
        raise BrokerNotFound(broker_id, f"Broker {broker_id} is not a replica of {topic}-{partition}.")
    return _replica_json(at, topic, p, broker_id)


# -- Odradek extensions -----------------------------------------------------------------------------
async def overview(cluster_id: str, request: Request, _=require(READ)) -> dict:
    """Counts for the console's overview: under-replicated (ISR smaller than the replicas) and
    offline (no leader) partitions, internal topics included."""
    at = await v3.links(request, cluster_id)
    md = await (await kafka(request)).metadata(fresh=True)
    urp, offline, count = [], [], 0
    for name in sorted(md.topics):
        t = md.topics[name]
        for pid in sorted(t.partitions):
            p, count = t.partitions[pid], count + 1
            ref = {"topic_name": name, "partition_id": pid}
            if p.leader < 0:
                offline.append(ref)
            if len(p.isrs) < len(p.replicas):
                urp.append(ref)
    return {"kind": "OdradekClusterOverview", "metadata": at.metadata(("overview",)), "cluster_id": at.cluster,
            "controller_id": md.controller_id if md.controller_id >= 0 else None,
            "brokers_count": len(md.brokers), "topics_count": sum(t.error is None for t in md.topics.values()),
            "partitions_count": count, "under_replicated_partitions_count": len(urp),
            "offline_partitions_count": len(offline), "under_replicated_partitions": urp,
            "offline_partitions": offline}


async def throughput(cluster_id: str, request: Request, _=require(READ)) -> dict:
    at = await v3.links(request, cluster_id)
    metrics: BrokerMetrics = request.app.state.broker_metrics
    scrapes = await metrics.scrape((await (await kafka(request)).metadata(fresh=True)).brokers)
    totals = {name: sum(s.counters.get(name, 0) for s in scrapes if s.error is None)
              for name in ("bytes_in_total", "bytes_out_total", "messages_in_total")}
    return {"kind": "OdradekThroughput", "metadata": at.metadata(("throughput",)), "cluster_id": at.cluster,
            # when the brokers were asked (a scrape serves a second of requests): rates divide by it
            "sampled_at_ms": min((s.sampled_at_ms for s in scrapes), default=int(time.time() * 1000)),
            "metrics_configured": metrics.configured, **totals,
            "data": [{"broker_id": s.broker_id, **{n: s.counters.get(n) if s.error is None else None for n in totals},
                      "error": s.error} for s in scrapes]}


async def _offsets(request: Request, topic: str, partitions: list[int], timestamp: int | None) -> dict:
    """Per partition: earliest and latest offsets, the offset for ``timestamp`` (if given)."""
    admin = (await kafka(request)).admin
    specs = {"earliest_offset": OffsetSpec.earliest(), "latest_offset": OffsetSpec.latest()}
    if timestamp is not None:
        specs["timestamp_offset"] = OffsetSpec.for_timestamp(timestamp)
    out = {p: {} for p in partitions}
    for field, spec in specs.items():
        found = await v3.list_offsets(admin, {TopicPartition(topic, p): spec for p in partitions})
        for (_, p), offset in found.items():
            out[p][field] = offset
    return out


NO_SIZES = {"size_bytes": None, "remote_size_bytes": None, "remote_segments": None, "local_log_start_offset": None}


async def _sizes(request: Request) -> dict[tuple[str, int], dict]:
    """Each partition's sizes as its leader reports them (from the brokers' metrics; empty if
    none): ``NO_SIZES``'s fields, the log on the disk and, with tiered storage, in the store."""
    metrics: BrokerMetrics = request.app.state.broker_metrics
    if not metrics.configured:
        return {}
    md = await (await kafka(request)).metadata()
    sizes: dict[tuple[str, int], dict] = {}
    for scrape in await metrics.scrape(md.brokers):
        for (topic, pid), size in scrape.log_sizes.items():
            t = md.topics.get(topic)
            if t is not None and pid in t.partitions and t.partitions[pid].leader == scrape.broker_id:
                sizes[(topic, pid)] = NO_SIZES | {"size_bytes": size} | scrape.remote.get((topic, pid), {})
    return sizes


def _offsets_json(at: v3.Links, topic: str, pid: int, offsets: dict, sizes: dict | None, timestamp) -> dict:
    out = {"kind": "OdradekPartitionOffsets", "cluster_id": at.cluster, "topic_name": topic, "partition_id": pid,
           "earliest_offset": offsets["earliest_offset"], "latest_offset": offsets["latest_offset"],
           **(sizes or NO_SIZES)}
    if timestamp is not None:
        out |= {"timestamp": timestamp, "timestamp_offset": offsets["timestamp_offset"]}
    return out


async def topic_offsets(cluster_id: str, topic: str, request: Request, _=require(READ),
                        timestamp: int | None = TIMESTAMP) -> dict:
    at = await v3.links(request, cluster_id)
    partitions = sorted((await _topic(request, topic)).partitions)
    offsets, sizes = await _offsets(request, topic, partitions, timestamp), await _sizes(request)
    return {"kind": "OdradekPartitionOffsetsList", "metadata": at.metadata(("topics", topic, "offsets")),
            "data": [_offsets_json(at, topic, p, offsets[p], sizes.get((topic, p)), timestamp) for p in partitions]}


async def partition_offsets(cluster_id: str, topic: str, partition: int, request: Request, _=require(READ),
                            timestamp: int | None = TIMESTAMP) -> dict:
    at = await v3.links(request, cluster_id)
    await _partition(request, topic, partition)
    offsets = await _offsets(request, topic, [partition], timestamp)
    return _offsets_json(at, topic, partition, offsets[partition], (await _sizes(request)).get((topic, partition)),
                         timestamp)
