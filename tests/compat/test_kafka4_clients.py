"""Kafka 4.x's own Java clients (kafka-clients and kafka-tools 4.1, `bench/kafka4/pom.xml`)
against Odradek: a KIP-848 group (``group.protocol=consumer``) of Java consumers that members
join and leave while it consumes, 4.1's ``kafka-consumer-groups --describe`` of that group, and
4.1's ProducerPerformance / ConsumerPerformance. Runs on the suite's shared Odradek broker.
Kafka 4.x's jars missing is a failure (``make test-deps`` fetches them), never a skip."""

from __future__ import annotations

import re
import signal
import subprocess
import threading
from pathlib import Path

import pytest
from confluent_kafka import Producer

from bench import apache_kafka
from bench.apache_kafka import KAFKA4_POM
from odradek.dev.waiting import wait_until
from tests.support.kafka_tools import CONSOLE_CONSUMER, CONSUMER_PERFORMANCE, GROUP_COMMAND, PRODUCER_PERFORMANCE

NEW_PROTOCOL = "group.protocol=consumer"
PARTITIONS = 6


@pytest.fixture(scope="module")
def kafka4() -> Path:
    return apache_kafka.resolve(pom=KAFKA4_POM)


def ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, f"exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc.stdout


def tool4(main_class: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return apache_kafka.run_tool(main_class, *args, timeout=timeout, pom=KAFKA4_POM)


class Member:
    """One 4.1 ConsoleConsumer in the group; a thread collects the values it prints."""

    def __init__(self, bootstrap: str, topic: str, group: str, name: str):
        self.values: list[str] = []
        self.proc = subprocess.Popen(apache_kafka.tool_argv(
            CONSOLE_CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
            "--from-beginning", "--consumer-property", NEW_PROTOCOL,
            "--consumer-property", f"client.id={name}", "--consumer-property", "auto.commit.interval.ms=200",
            pom=KAFKA4_POM), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.values.append(line.strip())

    def leave(self) -> None:
        """SIGTERM: the console consumer's shutdown hook closes the consumer (commit, leave)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.reader.join(10)


def produce(bootstrap: str, topic: str, values: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in values:
        producer.produce(topic, key=b"k%d" % i, value=b"%d" % i)
    assert producer.flush(60) == 0


def describe_members(bootstrap: str, group: str) -> tuple[str, dict[str, int]]:
    """4.1's ``--describe --members``: (the output, {client id: #partitions})."""
    out = ok(tool4(GROUP_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--group", group, "--members"))
    members = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[0] == group:
            members[fields[3]] = int(fields[4])
    return out, members


def test_consumer_protocol_group_of_java_4_consumers_while_members_join_and_leave(kafka4, odradek, topic):
    odradek.create_topic(topic, PARTITIONS)
    group = f"{topic}-g"
    produce(odradek.bootstrap, topic, range(0, 600))
    members = {name: Member(odradek.bootstrap, topic, group, name) for name in ("a", "b", "c")}
    try:
        read = lambda: [v for m in members.values() for v in m.values]  # noqa: E731
        wait_until(lambda: settled(odradek.bootstrap, group, {"a", "b", "c"}) and len(set(read())) == 600, 90,
                   "3 members joined with 2 partitions each, 600 records read", 0.5)
        describe_as_kafka_4(odradek.bootstrap, group, topic)

        members["c"].leave()                                  # one leaves, one joins, while records flow
        produce(odradek.bootstrap, topic, range(600, 1200))
        members["d"] = Member(odradek.bootstrap, topic, group, "d")
        wait_until(lambda: settled(odradek.bootstrap, group, {"a", "b", "d"}), 90,
                   "d joined, c left, 2 partitions each", 0.5)
        produce(odradek.bootstrap, topic, range(1200, 1800))
        wait_until(lambda: len(set(read())) == 1800, 90, "every record read", 0.2)
    finally:
        for m in members.values():
            m.leave()
    values = read()
    assert set(values) == {str(i) for i in range(1800)}
    # at least once: only the records in flight across the join and the leave may come twice,
    # none of those produced once the group had settled again
    repeated = {v for v in values if values.count(v) > 1}
    assert all(values.count(v) == 2 and int(v) < 1200 for v in repeated), sorted(repeated, key=int)


def settled(bootstrap: str, group: str, names: set[str]) -> bool:
    """The group's members are ``names`` and each owns its share (on a loaded machine the
    reconciliation after a join or a leave takes a few heartbeats after the membership changed)."""
    members = describe_members(bootstrap, group)[1]
    return members.keys() == names and sorted(members.values()) == [PARTITIONS // len(names)] * len(names)


def describe_as_kafka_4(bootstrap: str, group: str, topic: str) -> None:
    """What 4.1's ``kafka-consumer-groups`` prints for a stable 3-member consumer group of Kafka's
    own: its members with the partitions split, each at its target assignment and epoch (the
    group's), the default server assignor ``uniform``, the group type ``Consumer``."""
    out, assigned = describe_members(bootstrap, group)
    assert sorted(assigned.values()) == [2, 2, 2], out
    out = ok(tool4(GROUP_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--group", group,
                   "--members", "--verbose"))
    # ... #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT: reconciled
    rows = [line.split() for line in out.splitlines() if line.startswith(group + " ")]
    assert len(rows) == 3 and all(r[5] == r[7] and r[6] == r[8] for r in rows), out
    owned = [int(p) for r in rows for p in r[6].removeprefix(topic + ":").split(",")]
    assert sorted(owned) == list(range(PARTITIONS)), out
    out = ok(tool4(GROUP_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--group", group,
                   "--state", "--verbose"))
    row = next(line.split() for line in out.splitlines() if line.startswith(group + " "))
    # GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH #MEMBERS
    assert row[3:] == ["uniform", "Stable", row[5], row[5], "3"], out
    out = ok(tool4(GROUP_COMMAND, "--bootstrap-server", bootstrap, "--list", "--type"))
    assert [group, "Consumer"] in [line.split() for line in out.splitlines()], out
    out = ok(tool4(GROUP_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--group", group))
    owners = {int(f[2]): f[6] for f in (line.split() for line in out.splitlines()) if f[:2] == [group, topic]}
    assert owners.keys() == set(range(PARTITIONS)) and set(owners.values()) == {r[1] for r in rows}, out


def test_producer_and_consumer_performance_of_kafka_4(kafka4, odradek, topic, tmp_path):
    odradek.create_topic(topic, 3)
    (tmp_path / "consumer.properties").write_text(NEW_PROTOCOL + "\n")
    out = ok(tool4(PRODUCER_PERFORMANCE, "--topic", topic, "--num-records", "20000", "--record-size", "256",
                   "--throughput", "-1", "--producer-props", f"bootstrap.servers={odradek.bootstrap}", "linger.ms=5"))
    assert re.search(r"^20000 records sent, ", out, re.M), out[-1000:]
    out = ok(tool4(CONSUMER_PERFORMANCE, "--bootstrap-server", odradek.bootstrap, "--topic", topic,
                   "--messages", "20000", "--timeout", "30000", "--group", f"{topic}-perf", "--hide-header",
                   "--consumer.config", str(tmp_path / "consumer.properties")))
    fields = [f.strip() for f in out.strip().splitlines()[-1].split(",")]
    assert int(fields[4]) == 20000, out
