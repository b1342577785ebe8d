"""Kafka's own Java tools against a Kafka-wire endpoint (Apache Kafka or Odradek).

``Endpoint.tool`` runs a Java main class (``TOPIC_COMMAND``, ``CONSOLE_PRODUCER``, ...) with
``--bootstrap-server`` set to the endpoint (``bench.apache_kafka`` resolves the jars);
``require_kafka`` resolves them first (a test tool: missing only when Maven cannot reach its
repository).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench import apache_kafka
from odradek.dev.waiting import wait_until
from tests.support.tools import tool_missing

# what Maven prints when it cannot reach a repository at all
UNREACHABLE = re.compile(r"UnknownHostException|Unknown host|Connection refused|Network is unreachable|"
                         r"connect timed out|Connect to .* failed|No route to host|Could not transfer artifact",
                         re.IGNORECASE)

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"
ACL_COMMAND = "kafka.admin.AclCommand"
CONSOLE_PRODUCER = "kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ConsumerPerformance"
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"
BROKER_API_VERSIONS = "kafka.admin.BrokerApiVersionsCommand"


def require_kafka() -> Path:
    """``scripts/kafka.sh resolve``: installs Maven and a JDK if missing, resolves once (cached).
    Maven unable to reach its repository is a missing tool; any other failure fails the test."""
    proc = subprocess.run([str(apache_kafka.ROOT / "scripts" / "kafka.sh"), "resolve"], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=1200)
    if proc.returncode != 0:
        output = proc.stdout + proc.stderr
        if UNREACHABLE.search(output):
            tool_missing(f"Maven cannot reach its repository to resolve Apache Kafka {apache_kafka.KAFKA_VERSION} "
                         f"({output.strip().splitlines()[-1][:200]})")
        pytest.fail(f"scripts/kafka.sh resolve exited {proc.returncode}:\n{output[-4000:]}")
    return apache_kafka.resolve()


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
