"""The control-plane contract: every route of the internal HTTP API (``/internal/v1``,
docs/control-plane.md), stated once for the servers and all their callers.

Owns: the route table (``Route``: method, aiohttp-style path template, the decoder of its
answer) and one builder per call returning a ``Request`` (route, path, JSON body) that a client
sends and whose answer ``Request.decode`` turns into a model. The models live by area and are
re-exported here, so that ``control_plane.<Model>`` names any of them:
``control_plane_base`` (``Route``, ``Request``, validation helpers, shared models),
``control_plane_topics`` (state and topics), ``control_plane_replication`` (ISR changes,
shutdown, producer ids, elections, reassignments), ``control_plane_brokers`` (a broker's
routes), and ``control_plane_users`` (OdradekUser routes, with their own table). A request
model's ``from_json`` checks the body as the server needs it and raises INVALID_REQUEST;
answers are trusted. No I/O here: ``control_plane_http`` opens the connections.

Error bodies of every route are ``KafkaError.to_json()``.
"""

from __future__ import annotations

from odradek.cluster.control_plane_base import (PREFIX, PartitionResult, PartitionResults, Request, Route,
                                                TopicPartition)
from odradek.cluster.control_plane_brokers import (PENDING_CONTROLLED_SHUTDOWN, RUNNING, SHUTTING_DOWN, STARTING,
                                                   Accepted, BrokerStatus, Readiness, ReplicaStatus)
from odradek.cluster.control_plane_replication import (MAX_ALTER_PARTITIONS, AlterPartition, AlterPartitionResult,
                                                       AlterPartitionResults, AlterPartitions, ControlledShutdown,
                                                       ElectLeaders, Maintenance, OngoingReassignment, ProducerIdBlock,
                                                       ProducerIds, Reassign, Reassignment, Reassignments,
                                                       RemainingLeaderships)
from odradek.cluster.control_plane_topics import (MAX_PARTITIONS_PER_REQUEST, TOO_MANY_PARTITIONS, AlterConfigs,
                                                  ClusterView, CreatePartitions, CreateTopic, DeletedTopic, Health,
                                                  TopicConfigs)
from odradek.cluster.model import ClusterMetadata, PartitionState, TopicMetadata

__all__ = [
    "PREFIX", "Route", "Request", "TopicPartition", "PartitionResult", "PartitionResults",
    "Health", "ClusterView", "MAX_PARTITIONS_PER_REQUEST", "TOO_MANY_PARTITIONS", "CreateTopic", "DeletedTopic",
    "CreatePartitions", "AlterConfigs", "TopicConfigs",
    "AlterPartition", "MAX_ALTER_PARTITIONS", "AlterPartitions", "AlterPartitionResult", "AlterPartitionResults",
    "ControlledShutdown", "RemainingLeaderships", "ProducerIds", "ProducerIdBlock", "ElectLeaders", "Reassignment",
    "Reassign", "OngoingReassignment", "Reassignments", "Maintenance",
    "Accepted", "ReplicaStatus", "BrokerStatus", "Readiness",
    "STARTING", "RUNNING", "PENDING_CONTROLLED_SHUTDOWN", "SHUTTING_DOWN",
    "HEALTH", "CLUSTER", "CREATE_TOPIC", "DELETE_TOPIC", "CREATE_PARTITIONS", "ALTER_CONFIGS", "ALTER_PARTITION",
    "ALTER_PARTITIONS", "CONTROLLED_SHUTDOWN", "PRODUCER_IDS", "ELECT_LEADERS", "REASSIGN", "LIST_REASSIGNMENTS",
    "MAINTENANCE", "ENABLE_MAINTENANCE", "DISABLE_MAINTENANCE",
    "CONTROLLER_ROUTES", "METADATA", "STATUS", "READY", "BROKER_ROUTES",
    "health", "cluster", "create_topic", "delete_topic", "create_partitions", "alter_configs", "alter_partitions",
    "controlled_shutdown", "producer_ids", "elect_leaders", "reassign", "list_reassignments", "push_metadata",
    "maintenance", "enable_maintenance", "disable_maintenance",
    "status", "ready",
]


# --- the route table -----------------------------------------------------------------------------
# The controller's routes (every instance serves them; only the active one acts)...
HEALTH = Route("GET", PREFIX + "/health", Health.from_json)
CLUSTER = Route("GET", PREFIX + "/cluster", ClusterView.from_json)
CREATE_TOPIC = Route("POST", PREFIX + "/topics", TopicMetadata.from_json)
DELETE_TOPIC = Route("DELETE", PREFIX + "/topics/{name}", DeletedTopic.from_json)
CREATE_PARTITIONS = Route("POST", PREFIX + "/topics/{name}/partitions", TopicMetadata.from_json)
ALTER_CONFIGS = Route("PATCH", PREFIX + "/topics/{name}/configs", TopicConfigs.from_json)
# One partition a request: what brokers before the batched route send (kept for a rolling upgrade).
ALTER_PARTITION = Route("POST", PREFIX + "/alter-partition", PartitionState.from_json)
ALTER_PARTITIONS = Route("POST", PREFIX + "/alter-partitions", AlterPartitionResults.from_json)
CONTROLLED_SHUTDOWN = Route("POST", PREFIX + "/brokers/{id}/controlled-shutdown", RemainingLeaderships.from_json)
PRODUCER_IDS = Route("POST", PREFIX + "/producer-ids", ProducerIdBlock.from_json)
ELECT_LEADERS = Route("POST", PREFIX + "/elect-leaders", PartitionResults.from_json)
REASSIGN = Route("POST", PREFIX + "/reassignments", PartitionResults.from_json)
LIST_REASSIGNMENTS = Route("GET", PREFIX + "/reassignments", Reassignments.from_json)
# A broker's maintenance mode: read, enable (leadership moved away, elected nowhere), disable.
MAINTENANCE = Route("GET", PREFIX + "/brokers/{id}/maintenance", Maintenance.from_json)
ENABLE_MAINTENANCE = Route("PUT", PREFIX + "/brokers/{id}/maintenance", Maintenance.from_json)
DISABLE_MAINTENANCE = Route("DELETE", PREFIX + "/brokers/{id}/maintenance", Maintenance.from_json)
CONTROLLER_ROUTES = (HEALTH, CLUSTER, CREATE_TOPIC, DELETE_TOPIC, CREATE_PARTITIONS, ALTER_CONFIGS,
                     ALTER_PARTITION, ALTER_PARTITIONS, CONTROLLED_SHUTDOWN, PRODUCER_IDS, ELECT_LEADERS,
                     REASSIGN, LIST_REASSIGNMENTS, MAINTENANCE, ENABLE_MAINTENANCE, DISABLE_MAINTENANCE)
# ...and each broker's.
METADATA = Route("POST", PREFIX + "/metadata", Accepted.from_json)
STATUS = Route("GET", PREFIX + "/status", BrokerStatus.from_json)
# 200 once "safe to take the next broker down" (503 before): O(1), the readiness probe's route.
READY = Route("GET", PREFIX + "/ready", Readiness.from_json)
BROKER_ROUTES = (METADATA, STATUS, READY)


def health() -> Request[Health]:
    return Request(HEALTH, HEALTH.path())


def cluster() -> Request[ClusterView]:
    return Request(CLUSTER, CLUSTER.path())


def create_topic(req: CreateTopic) -> Request[TopicMetadata]:
    return Request(CREATE_TOPIC, CREATE_TOPIC.path(), req.to_json())


def delete_topic(name: str) -> Request[DeletedTopic]:
    return Request(DELETE_TOPIC, DELETE_TOPIC.path(name=name))


def create_partitions(name: str, req: CreatePartitions) -> Request[TopicMetadata]:
    return Request(CREATE_PARTITIONS, CREATE_PARTITIONS.path(name=name), req.to_json())


def alter_configs(name: str, req: AlterConfigs) -> Request[TopicConfigs]:
    return Request(ALTER_CONFIGS, ALTER_CONFIGS.path(name=name), req.to_json())


def alter_partitions(req: AlterPartitions) -> Request[AlterPartitionResults]:
    return Request(ALTER_PARTITIONS, ALTER_PARTITIONS.path(), req.to_json())


def controlled_shutdown(broker_id: int, req: ControlledShutdown) -> Request[RemainingLeaderships]:
    return Request(CONTROLLED_SHUTDOWN, CONTROLLED_SHUTDOWN.path(id=broker_id), req.to_json())


def producer_ids(req: ProducerIds) -> Request[ProducerIdBlock]:
    return Request(PRODUCER_IDS, PRODUCER_IDS.path(), req.to_json())


def elect_leaders(req: ElectLeaders) -> Request[PartitionResults]:
    return Request(ELECT_LEADERS, ELECT_LEADERS.path(), req.to_json())


def reassign(req: Reassign) -> Request[PartitionResults]:
    return Request(REASSIGN, REASSIGN.path(), req.to_json())


def list_reassignments() -> Request[Reassignments]:
    return Request(LIST_REASSIGNMENTS, LIST_REASSIGNMENTS.path())


def maintenance(broker_id: int) -> Request[Maintenance]:
    return Request(MAINTENANCE, MAINTENANCE.path(id=broker_id))


def enable_maintenance(broker_id: int) -> Request[Maintenance]:
    return Request(ENABLE_MAINTENANCE, ENABLE_MAINTENANCE.path(id=broker_id))


def disable_maintenance(broker_id: int) -> Request[Maintenance]:
    return Request(DISABLE_MAINTENANCE, DISABLE_MAINTENANCE.path(id=broker_id))


def push_metadata(snapshot: ClusterMetadata) -> Request[Accepted]:
    return Request(METADATA, METADATA.path(), snapshot.to_json())


def status() -> Request[BrokerStatus]:
    return Request(STATUS, STATUS.path())


def ready() -> Request[Readiness]:
    return Request(READY, READY.path())
