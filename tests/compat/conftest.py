"""Kafka's own Java clients and tools against Odradek, compared with the same commands against
Apache Kafka (3.9.x, resolved by `bench.apache_kafka` with Maven into `.cache/kafka/`).

Session fixtures: ``kafka`` (a one-node KRaft Kafka) and ``odradek`` (a one-broker Odradek dev
cluster through ``odradek.dev.harness.start_cluster``), each an ``Endpoint`` whose ``tool``
runs a Java main class against it. Both are started once for the whole suite and stopped by
PID. The whole directory is skipped, with the reason, only when Maven cannot reach its
repository; any other resolution failure is an error.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from bench import apache_kafka
from odradek.dev.harness import start_cluster, stop_cluster
from tests.support.kafka_tools import UNREACHABLE, Endpoint
from tests.support.tools import tool_missing


@pytest.fixture(scope="session")
def kafka_home() -> Path:
    """``scripts/kafka.sh resolve``: installs Maven and a JDK if missing, resolves once (cached)."""
    proc = subprocess.run([str(apache_kafka.ROOT / "scripts" / "kafka.sh"), "resolve"], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=1200)
    if proc.returncode != 0:
        output = proc.stdout + proc.stderr
        if UNREACHABLE.search(output):
            tool_missing(f"compatibility suite skipped: Maven cannot reach its repository to resolve "
                         f"Apache Kafka {apache_kafka.KAFKA_VERSION} ({output.strip().splitlines()[-1][:200]})")
        pytest.fail(f"scripts/kafka.sh resolve exited {proc.returncode}:\n{output[-4000:]}")
    return apache_kafka.resolve()


@pytest.fixture(scope="session")
def kafka(kafka_home, tmp_path_factory) -> Endpoint:
    cluster = apache_kafka.KafkaCluster(tmp_path_factory.mktemp("kafka"), nodes=1).start()
    try:
        yield Endpoint("kafka", cluster.bootstrap)
    finally:
        killed = cluster.stop()
        assert not killed, f"Kafka had to be killed: {killed}"


@pytest.fixture(scope="session")
def odradek(kafka_home, tmp_path_factory) -> Endpoint:
    cluster = start_cluster(tmp_path_factory.mktemp("odradek"), brokers=1)
    try:
        yield Endpoint("odradek", cluster.bootstrap)
    finally:
        stop_cluster(cluster)


@pytest.fixture
def both(kafka, odradek) -> tuple[Endpoint, Endpoint]:
    return kafka, odradek


@pytest.fixture
def topic() -> str:
    return f"compat-{uuid.uuid4().hex[:8]}"
