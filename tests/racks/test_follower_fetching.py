"""Racks end to end on a dev cluster of 6 brokers on 3 racks (``dev up --racks a,b,c``: brokers
1-2 on a, 3-4 on b, 5-6 on c, so that rack-aware placement has work to do) with Kafka's
``RackAwareReplicaSelector``:

- every partition of a new topic has its 3 replicas on 3 racks and the preferred leaders are
  spread evenly (one per broker for 6 partitions);
- a consumer with ``client.rack`` (librdkafka) reads a partition led in another rack from the
  follower in its own rack: that follower's BytesOut for the topic grows, the leader's does not;
- that follower stopped (it leaves the ISR), the consumer goes on reading from the leader."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.dev.harness import start_cluster, stop_cluster
from odradek.dev.waiting import wait_until

RACKS = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
TOPIC = "racked"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("racks"), brokers=6, replication_factor=3, extra=(
        "--racks", "a,b,c", "--config", f"replica.selector.class={SELECTOR}"))
    try:
        c.create_topic(TOPIC, partitions=6, replication_factor=3)
        yield c
    finally:
        stop_cluster(c)


def bytes_out(cluster, broker: int) -> float:
    """The broker's kafka_server_brokertopicmetrics_bytesout_total for the topic (0 if absent)."""
    url = cluster.status()["metrics_url"][f"broker-{broker}"]
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    found = re.search(r'^kafka_server_brokertopicmetrics_bytesout_total\{topic="%s"\} (\S+)$' % TOPIC, text, re.M)
    return float(found.group(1)) if found else 0.0


def test_replicas_span_racks_and_leaders_spread(cluster):
    admin = cluster.admin()   # kept alive until its future resolves
    nodes = admin.describe_cluster().result(30).nodes   # DescribeCluster carries the racks
    assert {n.id: n.rack for n in nodes} == RACKS
    md = admin.list_topics(TOPIC, timeout=10)
    partitions = md.topics[TOPIC].partitions.values()
    for p in partitions:
        assert len({RACKS[r] for r in p.replicas}) == 3, (p.id, p.replicas)
    assert sorted(p.replicas[0] for p in partitions) == [1, 2, 3, 4, 5, 6]


def test_a_consumer_reads_from_the_follower_in_its_rack_then_falls_back_to_the_leader(cluster):
    md = cluster.admin().list_topics(TOPIC, timeout=10)
    p = md.topics[TOPIC].partitions[0]
    leader = p.leader
    follower = next(r for r in p.replicas if r != leader)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})

    def produce(n: int, tag: str) -> None:
        for i in range(n):
            producer.produce(TOPIC, f"{tag}-{i}".encode() * 50, partition=0)
        assert producer.flush(30) == 0

    produce(200, "before")
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "rack-readers",
                         "client.rack": RACKS[follower], "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []

    def read(until: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(got) < until and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert len(got) >= until, f"read {len(got)} of {until}"

    try:
        leader_before = bytes_out(cluster, leader)
        read(200, 60)
        wait_until(lambda: bytes_out(cluster, follower) > 200 * 300, 10, "the follower serves the consumer")
        assert bytes_out(cluster, leader) == leader_before, "the leader served records itself"

        cluster.run("kill", str(follower), "--graceful")   # leaves the ISR (controlled shutdown)
        produce(200, "after")
        read(400, 90)
        assert bytes_out(cluster, leader) > leader_before + 200 * 300
    finally:
        consumer.close()
        cluster.run("start", str(follower))
