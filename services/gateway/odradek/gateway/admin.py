"""Topic administration under Confluent's v3 paths (``/v3/clusters/{cluster_id}/topics...``;
paths in ``routes``): list, create (partitions, replication factor, configs), describe, delete,
alter configs and add partitions. The admin client's errors become domain errors here
(``_kafka_error``); ``edge`` answers them."""

from __future__ import annotations

from confluent_kafka import KafkaError
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic
from fastapi import Request, Response

from odradek.gateway import v3
from odradek.gateway.auth import ADMIN, READ, require
from odradek.gateway.errors import GatewayError, InvalidTopicRequest, KafkaFailure, TopicNotFound
from odradek.gateway.models import AlterConfigs, CreateTopic, PatchTopic
from odradek.gateway.principals import kafka, listing_principal
from odradek.topics import is_internal

TIMEOUT_S = v3.TIMEOUT_S
# what the cluster refuses as an invalid topic operation (an existing name, bad counts or configs)
INVALID = (KafkaError.TOPIC_ALREADY_EXISTS, KafkaError.INVALID_PARTITIONS, KafkaError.INVALID_REPLICATION_FACTOR,
           KafkaError.INVALID_CONFIG, KafkaError.TOPIC_EXCEPTION, KafkaError.POLICY_VIOLATION,
           KafkaError.INVALID_REQUEST, KafkaError.INVALID_REPLICA_ASSIGNMENT)


def _kafka_error(err: KafkaError, topic: str) -> GatewayError:
    if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return TopicNotFound(topic)
    if err.code() in INVALID:
        return InvalidTopicRequest(err.str())
    return KafkaFailure.of(err, topics=topic)


async def _wait(futures: dict, key, topic: str) -> object:
    return await v3.wait(futures[key], lambda err: _kafka_error(err, topic))


def _topic_json(base: str, cluster_id: str, t) -> dict:
    parts = t.partitions
    rf = len(next(iter(parts.values())).replicas) if parts else 0
    return {"kind": "KafkaTopic", "metadata": {"self": f"{base}/v3/clusters/{cluster_id}/topics/{t.topic}"},
            "cluster_id": cluster_id, "topic_name": t.topic, "is_internal": is_internal(t.topic),
            "replication_factor": rf, "partitions_count": len(parts)}


async def list_clusters(request: Request) -> dict:
    cid = await v3.cluster_id(request)
    return {"kind": "KafkaClusterList", "data": [{"kind": "KafkaCluster", "cluster_id": cid}]}


async def list_topics(cluster_id: str, request: Request) -> dict:
    await v3.cluster_id(request, cluster_id)
    md = await (await kafka(request, optional=True)).metadata(fresh=True)
    who = listing_principal(request)
    return {"kind": "KafkaTopicList", "data": [_topic_json(v3.base(request), cluster_id, md.topics[n])
                                                for n in sorted(md.topics)
                                                if md.topics[n].error is None and who.sees(n)]}


async def get_topic(cluster_id: str, topic: str, request: Request, _=require(READ)) -> dict:
    await v3.cluster_id(request, cluster_id)
    md = await (await kafka(request)).metadata(fresh=True)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        raise TopicNotFound(topic)
    return _topic_json(v3.base(request), cluster_id, t)


async def create_topic(cluster_id: str, body: CreateTopic, request: Request, _=require(ADMIN)) -> dict:
    await v3.cluster_id(request, cluster_id)
    client = await kafka(request)
    new = NewTopic(body.topic_name, num_partitions=body.partitions_count or -1,
                   replication_factor=body.replication_factor or -1,
                   config={c.name: c.value for c in body.configs if c.value is not None})
    await _wait(client.admin.create_topics([new], operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S),
                body.topic_name, body.topic_name)
    md = await client.metadata(fresh=True)
    t = md.topics.get(body.topic_name)
    return _topic_json(v3.base(request), cluster_id, t) if t is not None else {"topic_name": body.topic_name}


async def delete_topic(cluster_id: str, topic: str, request: Request, _=require(ADMIN)) -> Response:
    await v3.cluster_id(request, cluster_id)
    client = await kafka(request)
    await _wait(client.admin.delete_topics([topic], operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S),
                topic, topic)
    await client.metadata(fresh=True)
    return Response(status_code=204)


async def add_partitions(cluster_id: str, topic: str, body: PatchTopic, request: Request,
                         _=require(ADMIN)) -> dict:
    await v3.cluster_id(request, cluster_id)
    client = await kafka(request)
    await _wait(client.admin.create_partitions([NewPartitions(topic, body.partitions_count)],
                                              operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S), topic, topic)
    return _topic_json(v3.base(request), cluster_id, (await client.metadata(fresh=True)).topics[topic])


async def list_configs(cluster_id: str, topic: str, request: Request, _=require(READ)) -> dict:
    await v3.cluster_id(request, cluster_id)
    resource = ConfigResource("topic", topic)
    configs = await _wait((await kafka(request)).admin.describe_configs([resource]), resource, topic)
    return {"kind": "KafkaTopicConfigList", "data": [
        v3.config_json("KafkaTopicConfig", name, c, cluster_id=cluster_id, topic_name=topic)
        for name, c in sorted(configs.items())]}


async def alter_configs(cluster_id: str, topic: str, body: AlterConfigs, request: Request,
                        _=require(ADMIN)) -> Response:
    await v3.cluster_id(request, cluster_id)
    entries = [ConfigEntry(c.name, c.value, incremental_operation=(
        AlterConfigOpType.DELETE if c.operation.upper() == "DELETE" else AlterConfigOpType.SET)) for c in body.data]
    resource = ConfigResource("topic", topic, incremental_configs=entries)
    await _wait((await kafka(request)).admin.incremental_alter_configs([resource]), resource, topic)
    return Response(status_code=204)
