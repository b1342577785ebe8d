"""Kafka 4.x's own Java clients (kafka-clients and kafka-tools 4.1, `bench/kafka4/pom.xml`)
against Odradek: a KIP-848 group (``group.protocol=consumer``) of Java consumers that members
join and leave while it consumes, 4.1's ``kafka-consumer-groups --describe`` of that group, a
group of classic and consumer-protocol members converted both ways (KIP-848's online upgrade and
downgrade), and 4.1's ProducerPerformance / ConsumerPerformance. Runs on the suite's shared
Odradek broker.
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
from kio.schema.consumer_group_describe.v1 import request as consumer_describe
from kio.schema.describe_groups.v5 import request as classic_describe

from odradek.broker.group.embedded import parse_assignment
from odradek.dev.waiting import wait_until
from tests.support.kafka_tools import CONSOLE_CONSUMER, CONSUMER_PERFORMANCE, GROUP_COMMAND, PRODUCER_PERFORMANCE
from tests.support.kafka_wire import WireClient

NEW_PROTOCOL = "group.protocol=consumer"
CLASSIC_PROTOCOL = "group.protocol=classic"
PARTITIONS = 6
LOCATED = re.compile(r"Partition:(\d+)\s+Offset:(\d+)\s+(\S+)")  # print.partition, print.offset


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

    def __init__(self, bootstrap: str, topic: str, group: str, name: str, protocol: str = NEW_PROTOCOL):
        self.values: list[str] = []
        self.reads: list[tuple[int, int]] = []  # (partition, offset) of each record read
        classic = ("--consumer-property", "heartbeat.interval.ms=500") if protocol == CLASSIC_PROTOCOL else ()
        self.proc = subprocess.Popen(apache_kafka.tool_argv(
            CONSOLE_CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
            "--from-beginning", "--consumer-property", protocol, *classic,
            "--consumer-property", f"client.id={name}", "--consumer-property", "auto.commit.interval.ms=200",
            "--property", "print.partition=true", "--property", "print.offset=true",
            pom=KAFKA4_POM), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            located = LOCATED.search(line)
            if located:
                self.reads.append((int(located[1]), int(located[2])))
            self.values.append(located[3] if located else line.strip())

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


def test_a_group_of_classic_and_consumer_protocol_members_converts_both_ways(kafka4, odradek, topic):
    """KIP-848's online upgrade and downgrade with 4.1's Java consumers: two classic members
    (``group.protocol=classic``), then two consumer-protocol members join (the group becomes a
    consumer group serving the classic ones), the classic ones leave and another classic one
    joins, then the consumer-protocol ones leave (the group becomes classic again). Every record
    is read; the records produced while the group had settled are read once each; the
    coordinator never has a partition assigned to two members (sampled throughout); 4.1's
    ``kafka-consumer-groups`` shows the group's type at each stage."""
    odradek.create_topic(topic, PARTITIONS)
    group = f"{topic}-mixed"
    members: dict[str, Member] = {}
    watch = OwnershipWatch(odradek.bootstrap, group)
    produced: list[range] = []

    def produce_more() -> range:
        start = produced[-1].stop if produced else 0
        produced.append(range(start, start + 300))
        produce(odradek.bootstrap, topic, produced[-1])
        return produced[-1]

    def join(names: str, protocol: str) -> None:
        members.update({n: Member(odradek.bootstrap, topic, group, n, protocol) for n in names})

    once: list[int] = []  # produced and read while settled: one owner per partition, each read once

    def settle(names: str, kind: str) -> None:
        wait_until(lambda: settled_as(odradek.bootstrap, group, set(names), kind), 90,
                   f"{kind} group of {names} settled, the partitions split", 0.3)
        batch = {str(i) for i in produce_more()}
        wait_until(lambda: batch <= {v for n in names for v in members[n].values}, 60, "the batch read", 0.2)
        once.extend(int(v) for v in batch)
    watch.start()
    try:
        join("ab", CLASSIC_PROTOCOL)
        produce_more()
        settle("ab", "classic")
        join("cd", NEW_PROTOCOL)                      # upgrade: a consumer group with classic members
        produce_more()
        settle("abcd", "consumer")
        assert_described(odradek.bootstrap, group, "Consumer", {"a": "false", "b": "false", "c": "true", "d": "true"})
        for name in "ab":
            members[name].leave()
        join("e", CLASSIC_PROTOCOL)                   # a classic member joins the consumer group
        produce_more()
        settle("cde", "consumer")
        for name in "cd":
            members[name].leave()                     # downgrade: the classic group of e
        produce_more()
        settle("e", "classic")
        assert_described(odradek.bootstrap, group, "Classic", {"e": None})
        total = produced[-1].stop
        wait_until(lambda: {v for m in members.values() for v in m.values} >= {str(i) for i in range(total)}, 60,
                   "every record read", 0.2)
    finally:
        watch.stop()
        for m in members.values():
            m.leave()
    values = [v for m in members.values() for v in m.values]
    assert set(values) == {str(i) for i in range(produced[-1].stop)}
    assert all(values.count(str(i)) == 1 for i in once), sorted(v for v in set(values) if values.count(v) > 1)
    assert watch.types == {"classic", "consumer"} and not watch.violations, watch.violations[:3]


def coordinator_view(bootstrap: str, group: str) -> tuple[str, dict[str, set[int]]]:
    """The group's type and each member's (client id's) partitions as the coordinator answers:
    ConsumerGroupDescribe's current assignments, else DescribeGroups' (a Stable classic group)."""
    with WireClient(bootstrap, timeout=30) as client:
        g = client.request(69, 1, consumer_describe.ConsumerGroupDescribeRequest(
            group_ids=(group,), include_authorized_operations=False)).groups[0]
        if g.error_code == 0:
            return "consumer", {m.client_id: {p for t in m.assignment.topic_partitions for p in t.partitions}
                                for m in g.members}
        d = client.request(15, 5, classic_describe.DescribeGroupsRequest(
            groups=(group,), include_authorized_operations=False)).groups[0]
        return "classic", {m.client_id: {p for _, p in parse_assignment(m.member_assignment)} for m in d.members}


def settled_as(bootstrap: str, group: str, names: set[str], kind: str) -> bool:
    found, owners = coordinator_view(bootstrap, group)
    share, extra = divmod(PARTITIONS, len(names))
    return found == kind and owners.keys() == names and \
        sorted(len(ps) for ps in owners.values()) == sorted(share + (i < extra) for i in range(len(names)))


class OwnershipWatch(threading.Thread):
    """Samples ``coordinator_view`` every 0.2 s: the types seen, and any answer in which a
    partition is assigned to two members."""

    def __init__(self, bootstrap: str, group: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.group = bootstrap, group
        self.types: set[str] = set()
        self.violations: list[dict] = []
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.2):
            try:
                kind, owners = coordinator_view(self.bootstrap, self.group)
            except OSError:
                continue
            self.types.add(kind)
            held = [p for ps in owners.values() for p in ps]
            if len(held) != len(set(held)):
                self.violations.append(owners)

    def stop(self) -> None:
        self._done.set()
        self.join(30)


def assert_described(bootstrap: str, group: str, kind: str, upgraded: dict[str, str | None]) -> None:
    """4.1's ``--list --type`` shows the group's type; ``--describe --members --verbose`` its
    members (CLIENT-ID), with UPGRADED (whether a member uses the consumer protocol) for a
    consumer group, the column a classic group's description does not have."""
    out = ok(tool4(GROUP_COMMAND, "--bootstrap-server", bootstrap, "--list", "--type"))
    assert [group, kind] in [line.split() for line in out.splitlines()], out
    out = ok(tool4(GROUP_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--group", group, "--members",
                   "--verbose"))
    header = next(line.split() for line in out.splitlines() if line.startswith("GROUP "))
    rows = [line.split() for line in out.splitlines() if line.startswith(group + " ")]
    with_column = "UPGRADED" in header
    assert {r[3]: (r[-1] if with_column else None) for r in rows} == upgraded, out
