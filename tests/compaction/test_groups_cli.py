"""``odradek groups`` (list, describe with lag, reset-offsets) against a real one-broker dev cluster.

(Kept beside the compaction tests: both are the issue-5 admin/maintenance work.)
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.dev.harness import start_cluster, stop_cluster
from odradek.dev.waiting import wait_until

pytestmark = pytest.mark.timeout(600)

TOPIC, GROUP, PARTITIONS, RECORDS = "orders", "billing", 3, 30
COMMITTED = {0: 3, 1: 3, 2: 4}   # 10 of the 30 records


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("groups-cli"), brokers=1)
    yield c
    stop_cluster(c)


def groups(cluster, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "odradek.cli", "groups", "--bootstrap-server", cluster.bootstrap,
                           *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def as_json(cluster, *args: str) -> dict:
    return json.loads(groups(cluster, "--json", *args).stdout)


def consumer(cluster) -> Consumer:
    return Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "session.timeout.ms": 6000})


@pytest.fixture(scope="module")
def committed_group(cluster):
    """GROUP committed 10 of the 30 records (COMMITTED), then left (Empty)."""
    cluster.create_topic(TOPIC, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": False})
    for i in range(RECORDS):
        producer.produce(TOPIC, key=b"k%d" % i, value=b"v%d" % i, partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    c = consumer(cluster)
    c.subscribe([TOPIC])
    wait_until(lambda: c.poll(0.5) is not None and len(c.assignment()) == PARTITIONS, 120, "the group to get its partitions")
    c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in COMMITTED.items()], asynchronous=False)
    c.close()
    return COMMITTED


def lag(described: dict) -> int:
    return sum(p["lag"] for p in described["partitions"])


def test_list_and_describe_show_state_offsets_and_lag(cluster, committed_group):
    listed = wait_until(lambda: (g := as_json(cluster, "list")) and any(x["group"] == GROUP for x in g["groups"]) and g,
                        60, "the group listed")
    assert {"group": GROUP, "state": "EMPTY"} in listed["groups"]
    described = as_json(cluster, "describe", GROUP)
    assert described["state"] == "EMPTY" and described["members"] == 0
    assert {p["partition"]: p["log_end_offset"] for p in described["partitions"]} == {0: 10, 1: 10, 2: 10}
    assert lag(described) == RECORDS - 10
    table = groups(cluster, "describe", GROUP).stdout
    assert "LOG-END-OFFSET" in table and "LAG" in table and TOPIC in table


def test_reset_offsets_dry_run_then_execute(cluster, committed_group):
    before = as_json(cluster, "describe", GROUP)
    plan = as_json(cluster, "reset-offsets", GROUP, "--topic", TOPIC, "--to-earliest")
    assert not plan["executed"] and {o["offset"] for o in plan["offsets"]} == {0}
    assert as_json(cluster, "describe", GROUP) == before             # a dry run changes nothing
    as_json(cluster, "reset-offsets", GROUP, "--topic", TOPIC, "--to-earliest", "--execute")
    assert lag(as_json(cluster, "describe", GROUP)) == RECORDS
    as_json(cluster, "reset-offsets", GROUP, "--topic", TOPIC, "--to-offset", "7", "--execute")
    assert {p["current_offset"] for p in as_json(cluster, "describe", GROUP)["partitions"]} == {7}
    clamped = as_json(cluster, "reset-offsets", GROUP, "--topic", TOPIC, "--to-offset", "99")
    assert {o["offset"] for o in clamped["offsets"]} == {10}        # clamped to the log end, as Kafka does
    as_json(cluster, "reset-offsets", GROUP, "--topic", TOPIC, "--to-latest", "--execute")
    assert lag(as_json(cluster, "describe", GROUP)) == 0


def test_reset_offsets_refuses_a_group_with_members(cluster, committed_group):
    c = consumer(cluster)
    c.subscribe([TOPIC])
    try:
        wait_until(lambda: c.poll(0.5) is not None or c.assignment(), 60, "the member to join")
        proc = groups(cluster, "reset-offsets", GROUP, "--topic", TOPIC, "--to-earliest", "--execute", check=False)
        assert proc.returncode != 0 and "active member" in proc.stderr
    finally:
        c.close()


def test_unknown_topic_is_a_clear_error(cluster, committed_group):
    proc = groups(cluster, "reset-offsets", GROUP, "--topic", "no-such-topic", "--to-earliest", check=False)
    assert proc.returncode != 0 and "no-such-topic" in proc.stderr


def test_consumer_offsets_is_created_with_kafkas_segment_size(cluster, committed_group):
    """Kafka creates __consumer_offsets compacted with offsets.topic.segment.bytes (100 MiB)."""
    from confluent_kafka.admin import ConfigResource
    admin = cluster.admin()
    resource = ConfigResource("TOPIC", "__consumer_offsets")
    configs = admin.describe_configs([resource])[resource].result(timeout=60)
    assert configs["segment.bytes"].value == str(100 * 1024 * 1024)
    assert configs["cleanup.policy"].value == "compact"
