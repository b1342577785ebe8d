"""Each of Kafka's tools does the same against Odradek as against Apache Kafka.

Every test runs one command against both (``kafka``, ``odradek``) and compares what the tool
prints, after removing what legitimately differs between two clusters (topic ids, timings).

Most tests run Kafka 3.9's Java producer with ``enable.idempotence=false``;
``test_console_producer_with_default_idempotence`` checks its default (idempotent) on both. Consumer groups are served (the group coordinator).
"""

from __future__ import annotations

import re
import subprocess
import threading
from collections import Counter

import pytest

from bench.apache_kafka import run_tool
from odradek.dev.waiting import wait_until
from tests.support.keys import java_partition
from tests.support.kafka_tools import (CONFIG_COMMAND, CONSOLE_CONSUMER, CONSOLE_PRODUCER, CONSUMER_PERFORMANCE,
                                       GROUP_COMMAND, PRODUCER_PERFORMANCE, TOPIC_COMMAND)

NO_IDEMPOTENCE = ("--producer-property", "enable.idempotence=false")


def ok(proc) -> str:
    assert proc.returncode == 0, f"exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc.stdout


def finished(proc: subprocess.Popen, timeout: float = 120) -> subprocess.CompletedProcess:
    """A tool started with ``Endpoint.popen``, once it has exited."""
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def both_ok(endpoints, *command, **kw) -> dict[str, str]:
    return {e.name: ok(e.tool(*command, **kw)) for e in endpoints}


def normalize_describe(text: str) -> str:
    text = re.sub(r"TopicId: \S+", "TopicId: <id>", text)
    # Kafka 3.9's Admin client reads eligible leader replicas (KIP-966) with DescribeTopicPartitions
    # (API 75); Odradek does not serve it, so TopicCommand falls back to Metadata and prints "N/A"
    # where Kafka (ELR disabled) prints nothing. Neither carries information here.
    return re.sub(r"\t(Elr|LastKnownElr): (N/A)?", "", text)


def test_console_producer_then_console_consumer(both, topic):
    """keys, headers and values through Kafka's console tools (acks=all, assign-only consumer)."""
    lines = "".join(f"h1:a{i},h2:b\tkey-{i}\tvalue-{i}\n" for i in range(50))
    out = {}
    for e in both:
        ok(e.tool(CONSOLE_PRODUCER, "--topic", topic, *NO_IDEMPOTENCE, "--property", "parse.key=true",
                  "--property", "parse.headers=true", input=lines))
        out[e.name] = ok(e.tool(CONSOLE_CONSUMER, "--topic", topic, "--partition", "0", "--offset", "earliest",
                                "--max-messages", "50", "--timeout-ms", "30000", "--property", "print.key=true",
                                "--property", "print.headers=true", "--property", "print.offset=true",
                                "--property", "print.partition=true"))
    assert out["kafka"].count("\n") == 50
    assert out["odradek"] == out["kafka"]


def test_console_consumers_assigned_to_three_partitions(both, topic):
    """assign-only reading of a 3-partition topic, one console consumer per partition."""
    lines = "".join(f"k{i}\tv{i}\n" for i in range(90))
    per_partition = Counter(java_partition(b"k%d" % i, 3) for i in range(90))
    got = {}
    for e in both:
        e.create_topic(topic, 3)
        ok(e.tool(CONSOLE_PRODUCER, "--topic", topic, *NO_IDEMPOTENCE, "--property", "parse.key=true", input=lines))
        # each consumer stops at its partition's count under Java's key hashing (not after an idle
        # timeout): a system placing keys otherwise reads fewer there, or leaves some unread, and
        # differs from Kafka below; the timeout only ends a consumer short of its count
        # the three side by side (three JVM starts at once, not one after another)
        readers = [e.popen(CONSOLE_CONSUMER, "--topic", topic, "--partition", str(p), "--offset", "earliest",
                           "--max-messages", str(per_partition[p]), "--timeout-ms", "30000",
                           "--property", "print.key=true", "--property", "print.offset=true") for p in range(3)]
        got[e.name] = [sorted(ok(finished(r)).splitlines()) for r in readers]
    assert sum(len(p) for p in got["kafka"]) == 90
    # the default partitioner hashes keys (murmur2): the same keys land in the same partitions
    assert got["odradek"] == got["kafka"]


@pytest.mark.parametrize("system", ["kafka", "odradek"])
def test_console_producer_with_default_idempotence(request, system, topic):
    e = request.getfixturevalue(system)
    ok(e.tool(CONSOLE_PRODUCER, "--topic", topic, "--producer-property", "max.block.ms=15000",
              "--producer-property", "delivery.timeout.ms=15000", "--producer-property", "request.timeout.ms=10000",
              input="one\ntwo\n"))
    out = ok(e.tool(CONSOLE_CONSUMER, "--topic", topic, "--partition", "0", "--offset", "earliest",
                    "--max-messages", "2", "--timeout-ms", "20000"))
    assert out.splitlines() == ["one", "two"]


def test_topic_command_create(both, topic):
    out = both_ok(both, TOPIC_COMMAND, "--create", "--topic", topic, "--partitions", "2",
                  "--replication-factor", "1", "--config", "retention.ms=3600000")
    assert out["kafka"] == f"Created topic {topic}.\n"
    assert out["odradek"] == out["kafka"]


def test_topic_command_describe_alter_partitions_list_delete(both, topic):
    for e in both:
        e.create_topic(topic, 2)
    described = both_ok(both, TOPIC_COMMAND, "--describe", "--topic", topic)
    assert normalize_describe(described["odradek"]) == normalize_describe(described["kafka"])
    altered = both_ok(both, TOPIC_COMMAND, "--alter", "--topic", topic, "--partitions", "4")
    assert altered["odradek"] == altered["kafka"]
    described = both_ok(both, TOPIC_COMMAND, "--describe", "--topic", topic)
    assert "PartitionCount: 4" in described["kafka"]
    assert normalize_describe(described["odradek"]) == normalize_describe(described["kafka"])
    for e in both:
        assert topic in ok(e.tool(TOPIC_COMMAND, "--list")).split()
    deleted = both_ok(both, TOPIC_COMMAND, "--delete", "--topic", topic)
    assert deleted["odradek"] == deleted["kafka"]
    for e in both:
        wait_until(lambda: topic not in ok(e.tool(TOPIC_COMMAND, "--list")).split(), 30, f"{topic} gone from {e.name}")


def test_topic_command_errors(both, topic):
    """what the tool says for a topic that does not exist and for shrinking partitions"""
    missing = {e.name: e.tool(TOPIC_COMMAND, "--describe", "--topic", topic) for e in both}
    assert missing["kafka"].returncode != 0
    assert missing["odradek"].returncode == missing["kafka"].returncode
    assert missing["odradek"].stdout == missing["kafka"].stdout
    assert "does not exist as expected" in missing["kafka"].stdout
    for e in both:
        e.create_topic(topic, 3)
    shrink = {e.name: e.tool(TOPIC_COMMAND, "--alter", "--topic", topic, "--partitions", "2") for e in both}
    assert shrink["kafka"].returncode != 0
    assert shrink["odradek"].returncode == shrink["kafka"].returncode
    assert shrink["odradek"].stdout == shrink["kafka"].stdout


def test_config_command_alter_and_describe_values(both, topic):
    """kafka-configs --alter --add-config / --delete-config (IncrementalAlterConfigs), then
    --describe (DescribeConfigs): the same dynamic values."""
    for e in both:
        e.create_topic(topic, 1)
    common = ("--entity-type", "topics", "--entity-name", topic)
    altered = both_ok(both, CONFIG_COMMAND, *common, "--alter", "--add-config",
                      "retention.ms=1000,segment.bytes=1048576,cleanup.policy=delete")
    assert altered["odradek"] == altered["kafka"]
    both_ok(both, CONFIG_COMMAND, *common, "--alter", "--delete-config", "cleanup.policy")
    described = both_ok(both, CONFIG_COMMAND, *common, "--describe")

    def values(text):
        return sorted(re.findall(r"^\s+(\S+=\S*) sensitive=", text, re.M))
    assert values(described["kafka"]) == ["retention.ms=1000", "segment.bytes=1048576"]
    assert values(described["odradek"]) == values(described["kafka"])


def test_config_command_describe_synonyms(both, topic):
    """the whole `kafka-configs --describe` output, synonyms included (DescribeConfigs with
    IncludeSynonyms): Kafka lists the broker default a dynamic topic value overrides."""
    for e in both:
        e.create_topic(topic, 1)
    common = ("--entity-type", "topics", "--entity-name", topic)
    both_ok(both, CONFIG_COMMAND, *common, "--alter", "--add-config", "retention.ms=1000,segment.bytes=1048576")
    described = both_ok(both, CONFIG_COMMAND, *common, "--describe")
    assert "DEFAULT_CONFIG:log.segment.bytes=1073741824" in described["kafka"]
    assert described["odradek"] == described["kafka"]


def test_producer_performance_smoke(both, topic):
    for e in both:
        out = ok(run_tool(PRODUCER_PERFORMANCE, "--topic", topic, "--num-records", "20000", "--record-size", "512",
                          "--throughput", "-1", "--producer-props", f"bootstrap.servers={e.bootstrap}", "acks=1",
                          "enable.idempotence=false", "linger.ms=5", timeout=120))
        assert re.search(r"^20000 records sent, ", out, re.M), f"{e.name}: {out[-1000:]}"


@pytest.mark.parametrize("system", ["kafka", "odradek"])
def test_consumer_performance_smoke(request, system, topic):
    e = request.getfixturevalue(system)
    e.create_topic(topic, 1)
    ok(e.tool(CONSOLE_PRODUCER, "--topic", topic, *NO_IDEMPOTENCE, input="".join(f"m{i}\n" for i in range(1000))))
    out = ok(e.tool(CONSUMER_PERFORMANCE, "--topic", topic, "--messages", "1000", "--timeout", "15000",
                    "--hide-header"))
    fields = [f.strip() for f in out.strip().splitlines()[-1].split(",")]
    assert int(fields[4]) == 1000, out  # data.consumed.in.nMsg


@pytest.mark.parametrize("system", ["kafka", "odradek"])
def test_console_consumer_group_of_three(request, system, topic):
    """three console consumers in one group share a 3-partition topic: every record once, each
    member its own partitions."""
    e = request.getfixturevalue(system)
    e.create_topic(topic, 3)
    group = f"{topic}-g"
    # the members run until the group has read all 300 records (not until 20 s without one), then
    # are stopped; their timeout only ends a run that never gets there
    members = [e.popen(CONSOLE_CONSUMER, "--topic", topic, "--group", group, "--from-beginning",
                       "--timeout-ms", "120000", "--property", "print.partition=true") for _ in range(3)]
    read = [[] for _ in members]
    streams = [(m.stdout, lines) for m, lines in zip(members, read)] + [(m.stderr, []) for m in members]
    readers = [threading.Thread(target=lines.extend, args=(stream,), daemon=True)  # stderr: drained only
               for stream, lines in streams]
    for r in readers:
        r.start()

    def settled():  # three members, one partition each
        out = e.tool(GROUP_COMMAND, "--describe", "--group", group, "--members").stdout
        return sum(1 for line in out.splitlines() if line.startswith(group) and line.split()[-1] == "1") == 3
    try:
        wait_until(settled, 30, f"three members of {group} with a partition each", 1.0)
    except TimeoutError:
        for m in members:
            m.kill()
            m.wait()
        raise
    ok(e.tool(CONSOLE_PRODUCER, "--topic", topic, *NO_IDEMPOTENCE, "--property", "parse.key=true",
              input="".join(f"k{i}\tv{i}\n" for i in range(300))))
    try:
        wait_until(lambda: sum(line.startswith("Partition:") for member in read for line in member) >= 300
                   or all(m.poll() is not None for m in members), 150, f"{group} reading the 300 records", 0.2)
    finally:
        for m in members:
            m.terminate()
            m.wait(60)
        for r in readers:
            r.join(10)
    seen = [[line.rstrip("\n").split("\t") for line in member if line.startswith("Partition:")] for member in read]
    values = sorted(v for member in seen for _, v in member)
    assert values == sorted(f"v{i}" for i in range(300)), f"{len(values)} records read"
    partitions = [{p for p, _ in member} for member in seen]
    assert all(partitions), f"a member read nothing: {partitions}"
    assert sum(len(p) for p in partitions) == 3, f"partitions shared between members: {partitions}"


def test_java_consumer_with_the_kip848_protocol(odradek, topic):
    """Kafka 3.9's Java consumer with ``group.protocol=consumer`` (KIP-848: ConsumerGroupHeartbeat
    v0, the member id named by the broker, the broker's assignment, commits with the member epoch)
    reads every record once, and the group is listed with type consumer (Odradek only: Kafka 3.9 serves it only when configured for it)."""
    odradek.create_topic(topic, 3)
    ok(odradek.tool(CONSOLE_PRODUCER, "--topic", topic, *NO_IDEMPOTENCE, input="".join(f"m{i}\n" for i in range(300))))
    out = ok(odradek.tool(CONSOLE_CONSUMER, "--topic", topic, "--group", f"{topic}-g", "--from-beginning",
                          "--max-messages", "300", "--timeout-ms", "60000",
                          "--consumer-property", "group.protocol=consumer"))
    assert sorted(out.split()) == sorted(f"m{i}" for i in range(300)), out[-2000:]
    listed = ok(odradek.tool(GROUP_COMMAND, "--list", "--type", "consumer")).split()
    assert f"{topic}-g" in listed, listed


@pytest.mark.parametrize("system", ["kafka", "odradek"])
def test_java_consumer_follows_a_recreated_topic(request, system, topic):
    """Kafka 3.9's Java consumer fetches by topic id (Fetch v16, KIP-516): when the topic it reads
    is deleted and created again under its name, it is told so (UNKNOWN_TOPIC_ID,
    INCONSISTENT_TOPIC_ID or UNKNOWN_TOPIC_OR_PARTITION), replaces the partition under the new
    id, finds its position past the new log's end and reads the new topic from the beginning."""
    e = request.getfixturevalue(system)
    e.create_topic(topic, 1)
    ok(e.tool(CONSOLE_PRODUCER, "--topic", topic, *NO_IDEMPOTENCE, input="".join(f"old{i}\n" for i in range(50))))
    consumer = e.popen(CONSOLE_CONSUMER, "--topic", topic, "--partition", "0", "--offset", "earliest",
                       "--max-messages", "60", "--timeout-ms", "60000",
                       "--consumer-property", "auto.offset.reset=earliest",
                       "--consumer-property", "metadata.max.age.ms=1000",
                       # else its Metadata requests may create the topic before the test does
                       "--consumer-property", "allow.auto.create.topics=false")
    try:
        first = [consumer.stdout.readline().strip() for _ in range(50)]  # all of the first topic, then delete it
        assert first == [f"old{i}" for i in range(50)], first
        ok(e.tool(TOPIC_COMMAND, "--delete", "--topic", topic))
        wait_until(lambda: e.create_topic(topic, 1) or True, 60, f"{topic} created again", 1.0)
        ok(e.tool(CONSOLE_PRODUCER, "--topic", topic, *NO_IDEMPOTENCE, input="".join(f"new{i}\n" for i in range(10))))
        rest = consumer.communicate(timeout=120)[0].split()
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.communicate()
    assert rest == [f"new{i}" for i in range(10)], rest
