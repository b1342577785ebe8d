"""The v3 cluster views the console draws (brokers, partitions, replicas; Odradek's overview,
throughput and partition offsets) against a dev cluster, with Kafka's own answers (librdkafka's
Metadata, DescribeCluster, watermarks and offsets_for_times) as the oracle."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.dev.waiting import wait_until
from tests.gateway.test_gateway_v2 import error, new_topic


def cluster_path(gw) -> str:
    return f"/v3/clusters/{gw.get('/v3/clusters').json()['data'][0]['cluster_id']}"


def produce(bootstrap: str, topic: str, partition: int, n: int, timestamp_ms: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, b"v%d" % i, partition=partition, timestamp=timestamp_ms + i if timestamp_ms else 0)
    assert p.flush(30) == 0


def test_brokers_and_controller_as_kafka_describes_them(gw_cluster, gw):
    c = cluster_path(gw)
    admin = gw_cluster.admin()   # kept: the future fails once its client is collected
    described = admin.describe_cluster(request_timeout=30).result(30)
    brokers = gw.get(c + "/brokers").json()
    assert brokers["kind"] == "KafkaBrokerList"
    assert [(b["broker_id"], b["host"], b["port"]) for b in brokers["data"]] == sorted(
        (n.id, n.host, n.port) for n in described.nodes)
    one = gw.get(c + f"/brokers/{described.nodes[0].id}").json()
    assert one["metadata"]["resource_name"].endswith(f"/broker={described.nodes[0].id}")
    error(gw.get(c + "/brokers/999"), 404, 404)
    cluster = gw.get(c).json()
    assert cluster["controller"]["related"].endswith(f"/brokers/{described.controller.id}")
    assert gw.get(c + "/overview").json()["controller_id"] == described.controller.id
    error(gw.get("/v3/clusters/no-such-cluster/brokers"), 404, 404)


def test_partitions_and_replicas_match_metadata(gw_cluster, gw):
    c, topic = cluster_path(gw), new_topic(gw_cluster, partitions=3, rf=2)
    md = gw_cluster.admin().list_topics(topic, timeout=30).topics[topic]
    listed = gw.get(c + f"/topics/{topic}/partitions").json()
    assert [p["partition_id"] for p in listed["data"]] == [0, 1, 2]
    for p in listed["data"]:
        kafka = md.partitions[p["partition_id"]]
        assert p["leader"]["related"].endswith(f"/partitions/{kafka.id}/replicas/{kafka.leader}")
        replicas = gw.get(p["replicas"]["related"]).json()["data"]
        assert [r["broker_id"] for r in replicas] == list(kafka.replicas)
        assert {r["broker_id"]: (r["is_leader"], r["is_in_sync"]) for r in replicas} == {
            b: (b == kafka.leader, b in kafka.isrs) for b in kafka.replicas}
    leader = md.partitions[0].leader
    assert gw.get(c + f"/topics/{topic}/partitions/0/replicas/{leader}").json()["is_leader"] is True
    outsider = next(b for b in gw_cluster.brokers if b not in md.partitions[0].replicas)
    error(gw.get(c + f"/topics/{topic}/partitions/0/replicas/{outsider}"), 404, 404)
    error(gw.get(c + f"/topics/{topic}/partitions/7"), 404, 40402)
    error(gw.get(c + "/topics/no-such-topic/partitions"), 404, 40401)


def test_offsets_sizes_and_throughput(gw_cluster, gw):
    c, topic = cluster_path(gw), new_topic(gw_cluster, partitions=2)
    before = gw.get(c + "/throughput").json()
    assert before["metrics_configured"] and all(b["error"] is None for b in before["data"])
    t0 = int(time.time() * 1000) - 60_000
    produce(gw_cluster.bootstrap, topic, 1, 20, timestamp_ms=t0)
    consumer = Consumer({"bootstrap.servers": gw_cluster.bootstrap, "group.id": "oracle"})
    try:
        watermarks = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in (0, 1)]
        [by_time] = consumer.offsets_for_times([TopicPartition(topic, 1, t0 + 7)], timeout=10)
    finally:
        consumer.close()
    offsets = gw.get(c + f"/topics/{topic}/offsets", params={"timestamp": t0 + 7}).json()["data"]
    assert [(o["earliest_offset"], o["latest_offset"]) for o in offsets] == watermarks == [(0, 0), (0, 20)]
    assert offsets[1]["timestamp_offset"] == by_time.offset == 7 and offsets[0]["timestamp_offset"] is None
    one = gw.get(c + f"/topics/{topic}/partitions/1/offsets").json()
    assert "timestamp_offset" not in one and one["latest_offset"] == 20
    # the leader's log size, from its metrics: the broker exports them at scrape time
    wait_until(lambda: (gw.get(c + f"/topics/{topic}/partitions/1/offsets").json()["size_bytes"] or 0) > 20 * 2,
               30, "the partition's size from the leader's metrics")
    after = wait_until(lambda: (a := gw.get(c + "/throughput").json())["messages_in_total"]
                       >= before["messages_in_total"] + 20 and a, 30, "the produced records in the throughput")
    assert after["bytes_in_total"] > before["bytes_in_total"] and after["sampled_at_ms"] >= before["sampled_at_ms"]
