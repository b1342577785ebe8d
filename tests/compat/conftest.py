"""Kafka's own Java clients and tools against Odradek, compared with the same commands against
Apache Kafka (3.9.x, resolved by `bench.apache_kafka` with Maven into `.cache/kafka/`).

Session fixtures: ``kafka`` (a one-node KRaft Kafka) and ``odradek`` (a one-broker Odradek dev
cluster through ``odradek.dev.harness.start_cluster``), each an ``Endpoint`` whose ``tool``
runs a Java main class against it. Both are started once for the whole suite and stopped by
PID. Both run with their ACL authorizer on and ``User:ANONYMOUS`` (every PLAINTEXT client here)
as a super user, so that Kafka's ``kafka-acls`` can be compared and nothing else is affected.
The whole directory is skipped, with the reason, only when Maven cannot reach its
repository; any other resolution failure is an error.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from bench import apache_kafka
from odradek.dev.harness import Cluster, start_cluster, stop_cluster
from tests.support.kafka_tools import Endpoint, require_kafka

SUPER_USERS = "User:ANONYMOUS"


@pytest.fixture(scope="session")
def kafka_home() -> Path:
    return require_kafka()


@pytest.fixture(scope="session")
def kafka(kafka_home, tmp_path_factory) -> Endpoint:
    cluster = apache_kafka.KafkaCluster(tmp_path_factory.mktemp("kafka"), nodes=1).start(extra={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": SUPER_USERS})
    try:
        yield Endpoint("kafka", cluster.bootstrap)
    finally:
        killed = cluster.stop()
        assert not killed, f"Kafka had to be killed: {killed}"


@pytest.fixture(scope="session")
def odradek_cluster(kafka_home, tmp_path_factory) -> Cluster:
    """The dev cluster itself, for the tests that kill and restart its broker."""
    cluster = start_cluster(tmp_path_factory.mktemp("odradek"), brokers=1, extra=(
        "--config", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "--config", f"super.users={SUPER_USERS}"))
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


@pytest.fixture(scope="session")
def odradek(odradek_cluster) -> Endpoint:
    return Endpoint("odradek", odradek_cluster.bootstrap)


@pytest.fixture
def both(kafka, odradek) -> tuple[Endpoint, Endpoint]:
    return kafka, odradek


@pytest.fixture
def topic() -> str:
    return f"compat-{uuid.uuid4().hex[:8]}"
