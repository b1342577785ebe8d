"""Structured Streaming from a topic through the gateway: maxOffsetsPerTrigger, AvailableNow,
a restart from the checkpoint that neither misses nor repeats a record."""

from __future__ import annotations

import json
import uuid

import pytest
from pyspark.errors import StreamingQueryException

from odradek.client import GatewayClient
from odradek.dev.waiting import wait_until


def produce(gw_cluster, topic: str, start: int, count: int, partitions: int, pad: int = 0) -> None:
    with GatewayClient(gw_cluster.gateway) as gw:
        results = gw.produce(topic, [{"value": b"%d" % i + b" " * pad, "partition": i % partitions}
                                     for i in range(start, start + count)])
        assert all(r.error_code is None for r in results)


def run_available_now(spark, gw_cluster, topic: str, checkpoint, sink, **options) -> list[int]:
    """One AvailableNow run; returns the size of each micro-batch (a failed query raises)."""
    sizes: list[int] = []

    def collect(df, batch_id: int) -> None:
        rows = df.selectExpr("partition", "offset", "CAST(value AS STRING) v").collect()
        sizes.append(len(rows))
        with open(sink, "a") as f:
            for r in rows:
                f.write(json.dumps([batch_id, r.partition, r.offset, r.v]) + "\n")

    stream = (spark.readStream.format("odradek").option("gateway", gw_cluster.gateway).option("subscribe", topic)
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "100").options(**options).load())
    query = (stream.writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination(300)
    finally:
        query.stop()
    return sizes


def test_streaming_with_max_offsets_per_trigger_restarts_from_its_checkpoint(spark, gw_cluster, tmp_path):
    topic = f"stream-{uuid.uuid4().hex[:6]}"
    gw_cluster.create_topic(topic, partitions=3)
    produce(gw_cluster, topic, 0, 450, 3)
    checkpoint, sink = tmp_path / "checkpoint", tmp_path / "sink.jsonl"
    first = run_available_now(spark, gw_cluster, topic, checkpoint, sink)
    assert sum(first) == 450 and max(first) <= 100 and len([s for s in first if s]) >= 5, first
    produce(gw_cluster, topic, 450, 150, 3)
    second = run_available_now(spark, gw_cluster, topic, checkpoint, sink)
    assert sum(second) == 150, second
    seen = [json.loads(line) for line in sink.read_text().splitlines()]
    values = sorted(int(v) for _, _, _, v in seen)
    assert values == list(range(600)), "a record was missed or read twice across the restart"


def sink_offsets(sink) -> list[int]:
    return sorted(offset for _, _, offset, _ in map(json.loads, sink.read_text().splitlines()))


def test_retention_removing_needed_data_fails_or_continues_per_fail_on_data_loss(spark, gw_cluster, tmp_path):
    topic = f"loss-{uuid.uuid4().hex[:6]}"
    gw_cluster.create_topic(topic, partitions=1, config={"segment.bytes": "1024"})
    produce(gw_cluster, topic, 0, 100, 1)
    strict, lenient = tmp_path / "strict", tmp_path / "lenient"
    for q in (strict, lenient):
        assert sum(run_available_now(spark, gw_cluster, topic, q / "checkpoint", q / "sink")) == 100
    for i in range(100, 140):  # one 600-byte record per request: a 1 KiB segment each
        produce(gw_cluster, topic, i, 1, 1, pad=600)
    _alter_topic(gw_cluster, topic, {"retention.bytes": "3000"})
    with GatewayClient(gw_cluster.gateway) as gw:
        wait_until(lambda: gw.offsets(topic, 0)[0] > 100, timeout=120, what="retention to remove offsets >= 100")
        low = gw.offsets(topic, 0)[0]
    with pytest.raises(StreamingQueryException, match=r"Offsets of .*-0 from 100 to .* are gone.*failOnDataLoss"):
        run_available_now(spark, gw_cluster, topic, strict / "checkpoint", strict / "sink")
    assert sink_offsets(strict / "sink") == list(range(100)), "the failing query read nothing more"
    run_available_now(spark, gw_cluster, topic, lenient / "checkpoint", lenient / "sink", failOnDataLoss="false")
    got = sink_offsets(lenient / "sink")
    resumed = got[100:]
    assert got[:100] == list(range(100)) and resumed[0] >= low and resumed == list(range(resumed[0], 140)), \
        "continues from the earliest available offset, to the end, once each"


def _alter_topic(gw_cluster, topic: str, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    admin = gw_cluster.admin()
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in config.items()]
    for future in admin.incremental_alter_configs([ConfigResource("topic", topic, incremental_configs=entries)]).values():
        future.result(timeout=60)


def test_streaming_write_copies_a_topic_at_least_once(spark, gw_cluster, tmp_path):
    source, sink = f"copy-in-{uuid.uuid4().hex[:6]}", f"copy-out-{uuid.uuid4().hex[:6]}"
    gw_cluster.create_topic(source, partitions=3)
    gw_cluster.create_topic(sink, partitions=2)
    produce(gw_cluster, source, 0, 300, 3)
    stream = (spark.readStream.format("odradek").option("gateway", gw_cluster.gateway).option("subscribe", source)
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "120").load())
    query = (stream.selectExpr("key", "value").writeStream.format("odradek").option("gateway", gw_cluster.gateway)
             .option("topic", sink).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination(300)
    finally:
        query.stop()
    with GatewayClient(gw_cluster.gateway) as gw:
        values = [int(v.decode()) for p in range(2) for v in _values(gw, sink, p)]
    assert sorted(set(values)) == list(range(300)), "every record copied (a retried task may add duplicates)"


def _values(gw: GatewayClient, topic: str, partition: int) -> list[bytes]:
    import base64
    records, _ = gw.read_json(topic, partition, 0)
    return [base64.b64decode(r["value"]) for r in records]


def test_partitions_added_between_runs_are_read_from_their_earliest(spark, gw_cluster, tmp_path):
    from confluent_kafka.admin import NewPartitions
    topic = f"grow-{uuid.uuid4().hex[:6]}"
    gw_cluster.create_topic(topic, partitions=1)
    produce(gw_cluster, topic, 0, 50, 1)
    checkpoint, sink = tmp_path / "checkpoint", tmp_path / "sink.jsonl"
    assert sum(run_available_now(spark, gw_cluster, topic, checkpoint, sink)) == 50
    admin = gw_cluster.admin()
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=60)
    gw_cluster.wait_for_leaders(topic, 3)
    # straight to the brokers: the gateway's producer learns of new partitions only at its next
    # metadata refresh (librdkafka's topic.metadata.refresh.interval.ms)
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": gw_cluster.bootstrap})
    for i in range(50, 140):
        producer.produce(topic, b"%d" % i, partition=i % 3)
    assert producer.flush(60) == 0
    run_available_now(spark, gw_cluster, topic, checkpoint, sink)
    seen = [json.loads(line) for line in sink.read_text().splitlines()]
    assert sorted(int(v) for _, _, _, v in seen) == list(range(140))
    assert {p for _, p, _, _ in seen} == {0, 1, 2}


def test_min_offsets_per_trigger_holds_small_batches_back_and_progress_reports_the_latest(spark, gw_cluster,
                                                                                            tmp_path):
    topic, name = f"min-{uuid.uuid4().hex[:6]}", f"min_{uuid.uuid4().hex[:6]}"
    gw_cluster.create_topic(topic, partitions=2)
    produce(gw_cluster, topic, 0, 50, 2)
    stream = (spark.readStream.format("odradek").option("gateway", gw_cluster.gateway).option("subscribe", topic)
              .option("startingOffsets", "earliest").option("minOffsetsPerTrigger", "100")
              .option("maxTriggerDelay", "1h").option("kafka.client.id", "min-offsets-test").load())
    query = (stream.writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())

    def rows() -> int:
        return spark.sql(f"SELECT count(*) AS n FROM {name}").collect()[0].n
    try:
        query.processAllAvailable()
        assert rows() == 50, "the first batch does not wait (as Spark's Kafka source)"
        produce(gw_cluster, topic, 50, 30, 2)
        query.processAllAvailable()
        assert rows() == 50, "30 new offsets < minOffsetsPerTrigger: no batch yet"
        produce(gw_cluster, topic, 80, 80, 2)
        query.processAllAvailable()
        assert rows() == 160
        source = query.lastProgress["sources"][0]
        latest = json.loads(source["latestOffset"]) if isinstance(source["latestOffset"], str) else source["latestOffset"]
        assert latest == {f"{topic}/0": 80, f"{topic}/1": 80}, source
    finally:
        query.stop()
