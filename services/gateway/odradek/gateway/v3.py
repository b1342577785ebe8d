"""What every Confluent v3 resource of the gateway shares: the cluster id check, the answer's
links (``metadata.self``, ``resource_name``, ``related``), waiting on the admin client's
futures (their Kafka errors become domain errors through the caller's mapping), ListOffsets
and config entries."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigSource
from fastapi import Request

from odradek.gateway.errors import ClusterNotFound, GatewayError, KafkaFailure, RetriableKafkaFailure, TopicNotFound
from odradek.gateway.principals import kafka

TIMEOUT_S = 30.0


async def wait(future, on_error: Callable[[KafkaError], GatewayError] = KafkaFailure.of) -> object:
    """The result of one of the admin client's futures, without blocking the event loop."""
    try:
        return await asyncio.to_thread(future.result, TIMEOUT_S)
    except KafkaException as e:
        raise on_error(e.args[0]) from None
    except TimeoutError:  # the future's own timeout: the cluster did not answer (Kafka's REQUEST_TIMED_OUT)
        raise RetriableKafkaFailure(f"The cluster did not answer within {TIMEOUT_S:.0f} s") from None


async def list_offsets(admin, wanted: dict) -> dict[tuple[str, int], int | None]:
    """ListOffsets of ``wanted`` (TopicPartition to OffsetSpec): (topic, partition) to the offset,
    None where there is none (no record at or after a timestamp)."""
    out = {}
    futures = admin.list_offsets(wanted, request_timeout=TIMEOUT_S) if wanted else {}
    for tp, future in futures.items():
        def failure(err: KafkaError, topic=tp.topic) -> GatewayError:
            if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return TopicNotFound(topic)
            return KafkaFailure.of(err, topics=topic)
        offset = (await wait(future, failure)).offset
        out[(tp.topic, tp.partition)] = offset if offset >= 0 else None
    return out


async def cluster_id(request: Request, wanted: str | None = None) -> str:
    """The cluster's id; ClusterNotFound when the path names another one."""
    md = await (await kafka(request, optional=True)).metadata()
    if wanted is not None and wanted != md.cluster_id:
        raise ClusterNotFound(wanted)
    return md.cluster_id


def base(request: Request) -> str:
    return request.app.state.settings.base_url


class Links:
    """Absolute links and Confluent resource names under one cluster."""

    def __init__(self, request: Request, cluster: str):
        self.cluster = cluster
        self.root = f"{base(request)}/v3/clusters/{cluster}"

    def url(self, *path) -> str:
        return "/".join([self.root, *map(str, path)])

    def related(self, *path) -> dict:
        return {"related": self.url(*path)}

    def metadata(self, path: tuple, crn: tuple = ()) -> dict:
        """``metadata`` of a resource at ``path`` named ``crn`` (pairs of kind and id)."""
        out = {"self": self.url(*path)}
        if crn:
            out["resource_name"] = "/".join([f"crn:///kafka={self.cluster}", *(f"{k}={v}" for k, v in crn)])
        return out

    def listing(self, kind: str, path: tuple, data: list) -> dict:
        return {"kind": kind, "metadata": {"self": self.url(*path), "next": None}, "data": data}


def config_json(kind: str, name: str, c, **ids) -> dict:
    """One config entry (librdkafka's ConfigEntry) as v3 answers it; ``ids`` name its resource."""
    return {"kind": kind, **ids, "name": name, "value": None if c.is_sensitive else c.value,
            "is_default": c.is_default, "is_read_only": c.is_read_only, "is_sensitive": c.is_sensitive,
            "source": ConfigSource(c.source).name}


async def links(request: Request, cluster: str) -> Links:
    """The links of ``cluster`` once it is checked to be this gateway's cluster."""
    return Links(request, await cluster_id(request, cluster))
