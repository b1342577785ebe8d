"""Topic administration under Confluent's v3 paths (``/v3/clusters/{cluster_id}/topics...``):
list, create (partitions, replication factor, configs), describe, delete, alter configs and
add partitions. Kafka's errors map to HTTP as Confluent's v3 API maps them."""

from __future__ import annotations

import asyncio

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewPartitions, NewTopic
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from odradek.gateway.auth import ADMIN, READ, require
from odradek.gateway.errors import RestError

router = APIRouter(prefix="/v3/clusters")
TIMEOUT_S = 30.0


class ConfigItem(BaseModel):
    name: str
    value: str | None = None


class CreateTopic(BaseModel):
    model_config = ConfigDict(extra="forbid")
    topic_name: str = Field(min_length=1, max_length=249, pattern=r"^[a-zA-Z0-9._-]+$")
    partitions_count: int | None = Field(None, ge=1)
    replication_factor: int | None = Field(None, ge=1)
    configs: list[ConfigItem] = []


class AlterConfig(BaseModel):
    name: str
    value: str | None = None
    operation: str = Field("SET", pattern="^(SET|DELETE|set|delete)$")


class AlterConfigs(BaseModel):
    data: list[AlterConfig]


class PatchTopic(BaseModel):
    model_config = ConfigDict(extra="forbid")
    partitions_count: int = Field(ge=1)


def _kafka_error(e: KafkaException) -> RestError:
    err: KafkaError = e.args[0]
    code = err.code()
    if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return RestError(404, 40403, err.str())
    if code in (KafkaError.TOPIC_ALREADY_EXISTS, KafkaError.INVALID_PARTITIONS, KafkaError.INVALID_REPLICATION_FACTOR,
                KafkaError.INVALID_CONFIG, KafkaError.TOPIC_EXCEPTION, KafkaError.POLICY_VIOLATION,
                KafkaError.INVALID_REQUEST, KafkaError.INVALID_REPLICA_ASSIGNMENT):
        return RestError(400, 40002, err.str())
    return RestError(503 if err.retriable() else 500, 50003 if err.retriable() else 50002, err.str())


async def _wait(futures: dict, key) -> object:
    try:
        return await asyncio.to_thread(futures[key].result, TIMEOUT_S)
    except KafkaException as e:
        raise _kafka_error(e) from None


async def _cluster_id(request: Request, cluster_id: str | None = None) -> str:
    md = await request.app.state.kafka.metadata()
    if cluster_id is not None and cluster_id != md.cluster_id:
        raise RestError(404, 404, f"Cluster {cluster_id} not found.")
    return md.cluster_id


def _topic_json(base: str, cluster_id: str, t) -> dict:
    parts = t.partitions
    rf = len(next(iter(parts.values())).replicas) if parts else 0
    return {"kind": "KafkaTopic", "metadata": {"self": f"{base}/v3/clusters/{cluster_id}/topics/{t.topic}"},
            "cluster_id": cluster_id, "topic_name": t.topic, "is_internal": t.topic.startswith("__"),
            "replication_factor": rf, "partitions_count": len(parts)}


def _base(request: Request) -> str:
    return request.app.state.settings.base_url


@router.get("")
async def list_clusters(request: Request) -> dict:
    cid = await _cluster_id(request)
    return {"kind": "KafkaClusterList", "data": [{"kind": "KafkaCluster", "cluster_id": cid}]}


@router.get("/{cluster_id}/topics")
async def list_topics(cluster_id: str, request: Request) -> dict:
    await _cluster_id(request, cluster_id)
    md = await request.app.state.kafka.metadata(fresh=True)
    return {"kind": "KafkaTopicList", "data": [_topic_json(_base(request), cluster_id, md.topics[n])
                                                for n in sorted(md.topics) if md.topics[n].error is None]}


@router.get("/{cluster_id}/topics/{topic}")
async def get_topic(cluster_id: str, topic: str, request: Request, _=require(READ)) -> dict:
    await _cluster_id(request, cluster_id)
    md = await request.app.state.kafka.metadata(fresh=True)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        raise RestError(404, 40403, f"This server does not host this topic-partition: {topic}")
    return _topic_json(_base(request), cluster_id, t)


@router.post("/{cluster_id}/topics", status_code=201)
async def create_topic(cluster_id: str, body: CreateTopic, request: Request, _=require(ADMIN)) -> dict:
    await _cluster_id(request, cluster_id)
    kafka = request.app.state.kafka
    new = NewTopic(body.topic_name, num_partitions=body.partitions_count or -1,
                   replication_factor=body.replication_factor or -1,
                   config={c.name: c.value for c in body.configs if c.value is not None})
    await _wait(kafka.admin.create_topics([new], operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S),
                body.topic_name)
    md = await kafka.metadata(fresh=True)
    t = md.topics.get(body.topic_name)
    return _topic_json(_base(request), cluster_id, t) if t is not None else {"topic_name": body.topic_name}


@router.delete("/{cluster_id}/topics/{topic}", status_code=204)
async def delete_topic(cluster_id: str, topic: str, request: Request, _=require(ADMIN)) -> Response:
    await _cluster_id(request, cluster_id)
    kafka = request.app.state.kafka
    await _wait(kafka.admin.delete_topics([topic], operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S), topic)
    await kafka.metadata(fresh=True)
    return Response(status_code=204)


@router.patch("/{cluster_id}/topics/{topic}")
async def add_partitions(cluster_id: str, topic: str, body: PatchTopic, request: Request,
                         _=require(ADMIN)) -> dict:
    await _cluster_id(request, cluster_id)
    kafka = request.app.state.kafka
    await _wait(kafka.admin.create_partitions([NewPartitions(topic, body.partitions_count)],
                                              operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S), topic)
    return _topic_json(_base(request), cluster_id, (await kafka.metadata(fresh=True)).topics[topic])


@router.get("/{cluster_id}/topics/{topic}/configs")
async def list_configs(cluster_id: str, topic: str, request: Request, _=require(READ)) -> dict:
    await _cluster_id(request, cluster_id)
    resource = ConfigResource("topic", topic)
    configs = await _wait(request.app.state.kafka.admin.describe_configs([resource]), resource)
    return {"kind": "KafkaTopicConfigList", "data": [
        {"kind": "KafkaTopicConfig", "cluster_id": cluster_id, "topic_name": topic, "name": name,
         "value": None if c.is_sensitive else c.value, "is_default": c.is_default, "is_read_only": c.is_read_only,
         "is_sensitive": c.is_sensitive, "source": ConfigSource(c.source).name} for name, c in sorted(configs.items())]}


@router.post("/{cluster_id}/topics/{topic}/configs:alter", status_code=204)
async def alter_configs(cluster_id: str, topic: str, body: AlterConfigs, request: Request,
                        _=require(ADMIN)) -> Response:
    await _cluster_id(request, cluster_id)
    entries = [ConfigEntry(c.name, c.value, incremental_operation=(
        AlterConfigOpType.DELETE if c.operation.upper() == "DELETE" else AlterConfigOpType.SET)) for c in body.data]
    resource = ConfigResource("topic", topic, incremental_configs=entries)
    await _wait(request.app.state.kafka.admin.incremental_alter_configs([resource]), resource)
    return Response(status_code=204)
