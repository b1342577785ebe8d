"""Kafka's Java ``kafka-consumer-groups`` (ConsumerGroupCommand) lists and describes a group
on Odradek, and agrees with ``odradek groups describe`` on offsets and lag; ``--list --type``
(ListGroups v5's types filter) lists as against Apache Kafka."""

from __future__ import annotations

import json
import subprocess
import sys

from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.dev.waiting import wait_until
from tests.support.kafka_tools import GROUP_COMMAND

COMMITTED = {0: 2, 1: 5}   # of 6 records per partition


def ok(proc) -> str:
    assert proc.returncode == 0, f"exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc.stdout


def commit_group(bootstrap: str, topic: str, group: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False})
    for i in range(12):
        producer.produce(topic, value=b"v%d" % i, partition=i % 2)
    assert producer.flush(60) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p) for p in COMMITTED])
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in COMMITTED.items()], asynchronous=False)
    finally:
        c.close()


def describe_rows(text: str, group: str) -> dict[int, tuple[int, int, int]]:
    """{partition: (current offset, log end offset, lag)} from ``--describe`` output."""
    rows = {}
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == group:
            rows[int(fields[2])] = (int(fields[3]), int(fields[4]), int(fields[5]))
    return rows


def test_kafka_consumer_groups_lists_and_describes_a_group(odradek, topic):
    odradek.create_topic(topic, 2)
    group = f"{topic}-g"
    commit_group(odradek.bootstrap, topic, group)
    listed = wait_until(lambda: group in ok(odradek.tool(GROUP_COMMAND, "--list")).split(), 60,
                        f"{group} in kafka-consumer-groups --list")
    assert listed
    text = ok(odradek.tool(GROUP_COMMAND, "--describe", "--group", group))
    assert "has no active members" in text or "CONSUMER-ID" in text
    java = describe_rows(text, group)
    assert java == {0: (2, 6, 4), 1: (5, 6, 1)}, text
    ours = json.loads(ok(subprocess.run(
        [sys.executable, "-m", "odradek.cli", "groups", "--bootstrap-server", odradek.bootstrap, "--json",
         "describe", group], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)))
    assert {p["partition"]: (p["current_offset"], p["log_end_offset"], p["lag"]) for p in ours["partitions"]} == java
    state = ok(odradek.tool(GROUP_COMMAND, "--describe", "--group", group, "--state"))
    assert "Empty" in state, state


def test_kafka_consumer_groups_lists_by_type_as_kafka(both, topic):
    """ListGroups v5: a group that commits offsets is a classic group on both (the tool sends the
    type capitalized: the filter is case-insensitive); a consumer-type filter lists none of them."""
    group = f"{topic}-g"
    listed = {}
    for e in both:
        e.create_topic(topic, 2)
        commit_group(e.bootstrap, topic, group)
        for kind in ("classic", "consumer"):
            listed[e.name, kind] = [line.split() for line in ok(e.tool(GROUP_COMMAND, "--list", "--type", kind))
                                    .splitlines() if line.startswith(("GROUP", group))]
    for kind in ("classic", "consumer"):
        assert listed["odradek", kind] == listed["kafka", kind], kind
    assert listed["kafka", "classic"] == [["GROUP", "TYPE"], [group, "Classic"]], listed
