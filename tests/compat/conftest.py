"""Kafka's own Java clients and tools against Odradek, compared with the same commands against
Apache Kafka (3.9.x, resolved by `bench.apache_kafka` with Maven into `.cache/kafka/`).

Session fixtures: ``kafka`` (a one-node KRaft Kafka) and ``odradek`` (a one-broker Odradek dev
cluster through the integration tests' ``start_cluster``), each an ``Endpoint`` whose ``tool``
runs a Java main class against it. Both are started once for the whole suite and stopped by
PID. The whole directory is skipped, with the reason, only when Maven cannot reach its
repository; any other resolution failure is an error.
"""

from __future__ import annotations

import re
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench import apache_kafka
from tests.conftest import wait_until
from tests.integration.conftest import start_cluster, stop_cluster

# what Maven prints when it cannot reach a repository at all
UNREACHABLE = re.compile(r"UnknownHostException|Unknown host|Connection refused|Network is unreachable|"
                         r"connect timed out|Connect to .* failed|No route to host|Could not transfer artifact",
                         re.IGNORECASE)

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"
CONSOLE_PRODUCER = "kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ConsumerPerformance"
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


@dataclass
class Endpoint:
    name: str
    bootstrap: str

    def tool(self, main_class: str, *args: str, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        """``main_class --bootstrap-server <this> args...``; stdout/stderr as text."""
        return apache_kafka.run_tool(main_class, "--bootstrap-server", self.bootstrap, *args,
                                     input=input, timeout=timeout)

    def popen(self, main_class: str, *args: str) -> subprocess.Popen:
        return subprocess.Popen(apache_kafka.tool_argv(main_class, "--bootstrap-server", self.bootstrap, *args),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Through confluent-kafka's AdminClient (not under test here)."""
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                            operation_timeout=30)[name].result(timeout=60)
        wait_until(lambda: len(admin.list_topics(name, timeout=10).topics[name].partitions) == partitions
                   and all(p.leader >= 0 for p in admin.list_topics(name, timeout=10).topics[name].partitions.values()),
                   30, f"{self.name}: leaders of {name}", 0.2)


@pytest.fixture(scope="session")
def kafka_home() -> Path:
    """``scripts/kafka.sh resolve``: installs Maven and a JDK if missing, resolves once (cached)."""
    proc = subprocess.run([str(apache_kafka.ROOT / "scripts" / "kafka.sh"), "resolve"], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=1200)
    if proc.returncode != 0:
        output = proc.stdout + proc.stderr
        if UNREACHABLE.search(output):
            pytest.skip(f"compatibility suite skipped: Maven cannot reach its repository to resolve "
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
