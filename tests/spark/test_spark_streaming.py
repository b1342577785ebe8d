"""Structured Streaming from a topic through the gateway: maxOffsetsPerTrigger, AvailableNow,
a restart from the checkpoint that neither misses nor repeats a record."""

from __future__ import annotations

import json
import uuid

from odradek.client import GatewayClient


def produce(gw_cluster, topic: str, start: int, count: int, partitions: int) -> None:
    with GatewayClient(gw_cluster.gateway) as gw:
        results = gw.produce(topic, [{"value": b"%d" % i, "partition": i % partitions}
                                     for i in range(start, start + count)])
        assert all(r.error_code is None for r in results)


def run_available_now(spark, gw_cluster, topic: str, checkpoint, sink) -> list[int]:
    """One AvailableNow run; returns the size of each micro-batch."""
    sizes: list[int] = []

    def collect(df, batch_id: int) -> None:
        rows = df.selectExpr("partition", "offset", "CAST(value AS STRING) v").collect()
        sizes.append(len(rows))
        with open(sink, "a") as f:
            for r in rows:
                f.write(json.dumps([batch_id, r.partition, r.offset, r.v]) + "\n")

    stream = (spark.readStream.format("odradek").option("gateway", gw_cluster.gateway).option("subscribe", topic)
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "100").load())
    query = (stream.writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
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
