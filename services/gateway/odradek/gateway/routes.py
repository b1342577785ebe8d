"""Every route of the gateway, declared in one place: method, path, handler and how it answers.

Handlers live in ``topics`` (v2 metadata and produce, streaming produce, range reads),
``consumers`` (v2 consumer instances), ``admin`` (v3 topic administration), ``records`` (v3
produce), ``clusters`` (v3 cluster, brokers, partitions, replicas and the console's extensions),
``groups`` (v3 consumer groups, lag, offset reset) and ``health``;
the web console's static files (``console/``, docs/console.md) are mounted at ``/console``;
each translates a request and raises domain errors, which ``edge`` answers. Rights (``auth``)
and body media types are the handlers' own dependencies, next to their parameters.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.staticfiles import StaticFiles

from odradek.gateway import admin, clusters, consumers, edge, formats, groups, health, metrics, records, topics

V2 = {"response_class": edge.V2Response}
NO_CONTENT = {"status_code": 204}
CONSUMER = "/consumers/{group}"
INSTANCE = CONSUMER + "/instances/{name}"
CLUSTERS = "/v3/clusters"
CLUSTER = CLUSTERS + "/{cluster_id}"
PARTITION = CLUSTER + "/topics/{topic}/partitions/{partition}"
CONSOLE = Path(__file__).with_name("console")   # package data: HTML, CSS and JS modules, no build step

# v2 topics and Odradek's paths for Spark; every one refuses an Accept header it cannot answer (406)
TOPICS = (
    ("GET", "/topics", topics.list_topics, V2),
    ("GET", "/topics/{topic}", topics.get_topic, V2),
    ("GET", "/topics/{topic}/partitions", topics.list_partitions, V2),
    ("GET", "/topics/{topic}/partitions/{partition}", topics.get_partition, V2),
    ("GET", "/topics/{topic}/partitions/{partition}/offsets", topics.partition_offsets, V2),
    ("GET", "/brokers", topics.list_brokers, V2),
    ("POST", "/topics/{topic}", topics.produce, V2),
    ("POST", "/topics/{topic}/partitions/{partition}", topics.produce_to_partition, V2),
    ("POST", "/topics/{topic}/records", topics.produce_stream, {}),
    ("GET", "/topics/{topic}/partitions/{partition}/records", topics.read_records,
     {"responses": {200: {"content": {formats.ARROW: {}, formats.JSON: {}}}}}),
)
TOPICS_ANSWER = (formats.V2, "application/vnd.kafka+json", formats.JSON, formats.ARROW, formats.NDJSON)

CONSUMERS = (
    ("POST", CONSUMER, consumers.create_instance, V2),
    ("DELETE", INSTANCE, consumers.delete_instance, NO_CONTENT),
    ("POST", INSTANCE + "/subscription", consumers.subscribe, NO_CONTENT),
    ("GET", INSTANCE + "/subscription", consumers.get_subscription, V2),
    ("DELETE", INSTANCE + "/subscription", consumers.unsubscribe, NO_CONTENT),
    ("POST", INSTANCE + "/assignments", consumers.assign, NO_CONTENT),
    ("GET", INSTANCE + "/assignments", consumers.get_assignments, V2),
    ("GET", INSTANCE + "/records", consumers.records, V2),
    ("POST", INSTANCE + "/offsets", consumers.commit, {"status_code": 200}),
    ("GET", INSTANCE + "/offsets", consumers.committed, V2),
    ("POST", INSTANCE + "/positions", consumers.seek, NO_CONTENT),
    ("POST", INSTANCE + "/positions/beginning", consumers.seek_to_beginning, NO_CONTENT),
    ("POST", INSTANCE + "/positions/end", consumers.seek_to_end, NO_CONTENT),
)

ADMIN = (
    ("GET", CLUSTERS, admin.list_clusters, {}),
    ("GET", CLUSTERS + "/{cluster_id}/topics", admin.list_topics, {}),
    ("GET", CLUSTERS + "/{cluster_id}/topics/{topic}", admin.get_topic, {}),
    ("POST", CLUSTERS + "/{cluster_id}/topics", admin.create_topic, {"status_code": 201}),
    ("DELETE", CLUSTERS + "/{cluster_id}/topics/{topic}", admin.delete_topic, NO_CONTENT),
    ("PATCH", CLUSTERS + "/{cluster_id}/topics/{topic}", admin.add_partitions, {}),
    ("GET", CLUSTERS + "/{cluster_id}/topics/{topic}/configs", admin.list_configs, {}),
    ("POST", CLUSTERS + "/{cluster_id}/topics/{topic}/configs:alter", admin.alter_configs, NO_CONTENT),
    ("POST", CLUSTERS + "/{cluster_id}/topics/{topic}/records", records.produce, {}),
)

# Confluent v3 (brokers, partitions, replicas), then Odradek's extensions for the console (docs/gateway.md)
CLUSTER_VIEWS = (
    ("GET", CLUSTER, clusters.get_cluster, {}),
    ("GET", CLUSTER + "/brokers", clusters.list_brokers, {}),
    ("GET", CLUSTER + "/brokers/{broker_id}", clusters.get_broker, {}),
    ("GET", CLUSTER + "/brokers/{broker_id}/configs", clusters.broker_configs, {}),
    ("GET", CLUSTER + "/brokers/{broker_id}/partition-replicas", clusters.broker_replicas, {}),
    ("GET", CLUSTER + "/topics/{topic}/partitions", clusters.list_partitions, {}),
    ("GET", PARTITION, clusters.get_partition, {}),
    ("GET", PARTITION + "/replicas", clusters.list_replicas, {}),
    ("GET", PARTITION + "/replicas/{broker_id}", clusters.get_replica, {}),
    ("GET", CLUSTER + "/overview", clusters.overview, {}),
    ("GET", CLUSTER + "/throughput", clusters.throughput, {}),
    ("GET", CLUSTER + "/topics/{topic}/offsets", clusters.topic_offsets, {}),
    ("GET", PARTITION + "/offsets", clusters.partition_offsets, {}),
)

# Confluent v3 consumer groups and lag, then Odradek's offset reset and group delete
GROUP = CLUSTER + "/consumer-groups/{group}"
MEMBER = GROUP + "/consumers/{consumer_id}"
GROUPS = (
    ("GET", CLUSTER + "/consumer-groups", groups.list_groups, {}),
    ("GET", GROUP, groups.get_group, {}),
    ("GET", GROUP + "/consumers", groups.list_consumers, {}),
    ("GET", MEMBER, groups.get_consumer, {}),
    ("GET", MEMBER + "/assignments", groups.list_assignments, {}),
    ("GET", GROUP + "/lags", groups.list_lags, {}),
    ("GET", GROUP + "/lags/{topic}/partitions/{partition}", groups.get_lag, {}),
    ("GET", GROUP + "/lag-summary", groups.lag_summary, {}),
    ("POST", GROUP + "/offsets:reset", groups.reset_offsets, {}),
    ("DELETE", GROUP, groups.delete_group, NO_CONTENT),
)

OPERABILITY = (
    ("GET", "/metrics", metrics.endpoint, {"include_in_schema": False}),
    ("GET", "/healthz", health.healthz, {}),
    ("GET", "/readyz", health.readyz, {}),
    ("GET", "/", health.root, {"include_in_schema": False}),
)


def _router(table, **options) -> APIRouter:
    router = APIRouter(**options)
    for method, path, handler, answer in table:
        router.add_api_route(path, handler, methods=[method], **answer)
    return router


def install(app: FastAPI) -> None:
    app.include_router(_router(TOPICS, dependencies=[edge.acceptable(*TOPICS_ANSWER)]))
    for table in (CONSUMERS, ADMIN, CLUSTER_VIEWS, GROUPS, OPERABILITY):
        app.include_router(_router(table))
    # the files hold no data: every call the console makes is authenticated like any client's
    app.mount("/console", StaticFiles(directory=CONSOLE, html=True), name="console")
