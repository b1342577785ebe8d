"""The v3 views the console draws (brokers, partitions, replicas, consumer groups and lag;
Odradek's overview, throughput, partition offsets, group offset reset and delete) against one
dev cluster, with Kafka's own clients as the oracle (librdkafka's Metadata, DescribeCluster,
watermarks, offsets_for_times, a consumer group's members and committed offsets)."""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace

import pytest

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource

from odradek.dev.waiting import wait_until
from odradek.gateway.broker_metrics import BrokerMetrics
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
    broker = described.nodes[0].id
    resource = ConfigResource("broker", str(broker))
    kafka_configs = admin.describe_configs([resource])[resource].result(30)
    configs = {e["name"]: e for e in gw.get(one["configs"]["related"]).json()["data"]}
    assert set(configs) == set(kafka_configs)
    assert {n: configs[n]["value"] for n in configs if not configs[n]["is_sensitive"]} == {
        n: e.value for n, e in kafka_configs.items() if not e.is_sensitive}
    error(gw.get(c + "/brokers/999/configs"), 404, 404)
    md = admin.list_topics(timeout=30)
    held = sorted((t, p) for t in md.topics for p, pm in md.topics[t].partitions.items() if broker in pm.replicas)
    replicas = gw.get(one["partition_replicas"]["related"]).json()["data"]
    assert sorted((r["topic_name"], r["partition_id"]) for r in replicas) == held
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


# -- consumer groups ------------------------------------------------------------------------------
def consume(consumer: Consumer, n: int) -> list:
    got = []
    wait_until(lambda: got.extend(m for m in consumer.consume(n - len(got), 1.0) if not m.error()) or len(got) >= n,
               60, f"{n} records")
    return got


def committed(admin, group: str) -> dict[tuple[str, int], int]:
    [future] = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    return {(tp.topic, tp.partition): tp.offset for tp in future.result(30).topic_partitions}


def test_group_lag_follows_a_kafka_consumer(gw_cluster, gw):
    c, topic, group = cluster_path(gw), new_topic(gw_cluster, partitions=2), f"lag-{uuid.uuid4().hex[:6]}"
    for p in (0, 1):
        produce(gw_cluster.bootstrap, topic, p, 15)
    consumer = Consumer({"bootstrap.servers": gw_cluster.bootstrap, "group.id": group, "client.id": "lagging",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        consumer.commit(consume(consumer, 10)[-1], asynchronous=False)
        group_json = wait_until(lambda: (g := gw.get(c + f"/consumer-groups/{group}").json())["state"] == "STABLE"
                                and g, 30, "the group to be stable")
        assert group_json["partition_assignor"] == "range" and not group_json["is_simple"]
        assert group in {g["consumer_group_id"] for g in gw.get(c + "/consumer-groups").json()["data"]}
        [member] = gw.get(c + f"/consumer-groups/{group}/consumers").json()["data"]
        assert (member["consumer_id"], member["client_id"], member["host"]) == (
            consumer.memberid(), "lagging", "/127.0.0.1")  # Kafka's InetAddress.toString
        assigned = gw.get(member["assignments"]["related"]).json()["data"]
        assert sorted((a["topic_name"], a["partition_id"]) for a in assigned) == [(topic, 0), (topic, 1)]
        oracle = {tp.partition: tp.offset for tp in consumer.committed(
            [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10) if tp.offset >= 0}
        lags = gw.get(c + f"/consumer-groups/{group}/lags").json()["data"]
        assert {lag["partition_id"]: (lag["current_offset"], lag["log_end_offset"], lag["lag"]) for lag in lags} == {
            p: (o, 15, 15 - o) for p, o in oracle.items()}
        assert all(lag["consumer_id"] == consumer.memberid() for lag in lags)
        summary = gw.get(c + f"/consumer-groups/{group}/lag-summary").json()
        assert summary["total_lag"] == sum(15 - o for o in oracle.values())
        assert summary["max_lag"] == max(15 - o for o in oracle.values())
        consume(consumer, 20)
        consumer.commit(asynchronous=False)   # every position, at the ends: the lag falls to 0
        wait_until(lambda: gw.get(c + f"/consumer-groups/{group}/lag-summary").json()["total_lag"] == 0, 30,
                   "the lag to fall to 0")
        one = gw.get(c + f"/consumer-groups/{group}/lags/{topic}/partitions/0").json()
        assert (one["current_offset"], one["lag"]) == (15, 0)
    finally:
        consumer.close()
    error(gw.get(c + "/consumer-groups/no-such-group"), 404, 404)
    error(gw.get(c + f"/consumer-groups/{group}/consumers/no-such-member"), 404, 404)


def test_offset_reset_and_delete_only_when_the_group_is_empty(gw_cluster, gw):
    c, topic, group = cluster_path(gw), new_topic(gw_cluster, partitions=1), f"reset-{uuid.uuid4().hex[:6]}"
    t0 = int(time.time() * 1000) - 60_000
    produce(gw_cluster.bootstrap, topic, 0, 10, timestamp_ms=t0)
    admin = gw_cluster.admin()
    consumer = Consumer({"bootstrap.servers": gw_cluster.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    reset = c + f"/consumer-groups/{group}/offsets:reset"
    try:
        consumer.subscribe([topic])
        consumer.commit(consume(consumer, 10)[-1], asynchronous=False)
        assert "has no members" in error(gw.post(reset, json={"topic_name": topic, "to": "earliest"}), 409, 40904)
        error(gw.delete(c + f"/consumer-groups/{group}"), 409, 40904)
        assert committed(admin, group) == {(topic, 0): 10}   # refused: nothing changed
    finally:
        consumer.close()   # leaves the group: it is empty now
    answer = gw.post(reset, json={"topic_name": topic, "to": "earliest"})
    assert answer.status_code == 200 and answer.json()["data"] == [
        {"topic_name": topic, "partition_id": 0, "offset": 0}], answer.text
    assert committed(admin, group) == {(topic, 0): 0}
    assert gw.get(c + f"/consumer-groups/{group}/lag-summary").json()["total_lag"] == 10
    for target, offset in (({"to": "timestamp", "timestamp": t0 + 4}, 4), ({"to": "offset", "offset": 99}, 10),
                           ({"to": "latest", "partition_id": 0}, 10), ({"to": "timestamp", "timestamp": t0 + 10**9}, 10)):
        assert gw.post(reset, json={"topic_name": topic, **target}).status_code == 200
        assert committed(admin, group) == {(topic, 0): offset}, target
    error(gw.post(reset, json={"topic_name": topic, "to": "offset"}), 422, 422)
    error(gw.post(reset, json={"topic_name": topic, "to": "earliest", "partition_id": 5}), 404, 40402)
    assert gw.delete(c + f"/consumer-groups/{group}").status_code == 204
    error(gw.get(c + f"/consumer-groups/{group}"), 404, 404)
    error(gw.delete(c + f"/consumer-groups/{group}"), 404, 404)



def test_broker_metrics_urls_fixed_or_a_template():
    brokers = {1: SimpleNamespace(host="b-1.svc"), 2: SimpleNamespace(host="b-2.svc")}
    assert BrokerMetrics("http://{host}:9404/metrics").urls(brokers) == {
        1: "http://b-1.svc:9404/metrics", 2: "http://b-2.svc:9404/metrics"}
    fixed = BrokerMetrics("1=http://a/metrics, 3=http://c/metrics")
    assert fixed.urls(brokers) == {1: "http://a/metrics"}   # only live brokers
    assert not BrokerMetrics("").configured and BrokerMetrics("").urls(brokers) == {}
    with pytest.raises(ValueError, match="BROKER_ID=URL"):
        BrokerMetrics("http://a/metrics")
