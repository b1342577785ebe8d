"""The "odradek" data source on real Spark (local[2]) against a dev cluster's gateway: batch
reads (exactly once with minPartitions, typed columns, ranges by offsets and by timestamps,
read_committed over transactions), batch writes, an Avro topic read into typed columns and
written back through the gateway's schema registry, Protobuf and JSON Schema topics read into
typed columns, and spark-submit of the example job."""

from __future__ import annotations

import base64
import datetime
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from odradek.client import GatewayClient
from odradek.spark import options as opts
from odradek.spark.bundle import build as build_bundle
from tests.support.keys import java_partition
from tests.support.spark import python_without_odradek, spark_env

ROOT = Path(__file__).resolve().parents[2]


def fill(gw_cluster, partitions: int, per_partition: int, t0: int) -> str:
    topic = f"spark-{uuid.uuid4().hex[:8]}"
    gw_cluster.create_topic(topic, partitions=partitions, replication_factor=1)
    with GatewayClient(gw_cluster.gateway) as gw:
        for p in range(partitions):
            results = gw.produce(topic, [{"key": b"k%d" % (i % 10), "value": b"%d-%d" % (p, i), "partition": p,
                                          "timestamp": t0 + i, "headers": [("h", b"%d" % i)]}
                                         for i in range(per_partition)])
            assert all(r.error_code is None for r in results)
    return topic


def reader(spark, gw_cluster, topic: str):
    return spark.read.format("odradek").option("gateway", gw_cluster.gateway).option("subscribe", topic)


def test_split_plans_at_least_min_partitions_covering_each_range_once():
    ranges = [opts.Range("t", p, 0, 1000 * (p + 1)) for p in range(3)]
    pieces = opts.split(ranges, 12)
    assert len(pieces) >= 12
    for p in range(3):
        mine = sorted((r.start, r.end) for r in pieces if r.partition == p)
        assert mine[0][0] == 0 and mine[-1][1] == 1000 * (p + 1)
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:]))


def test_batch_read_with_min_partitions_reads_every_record_once_typed(spark, gw_cluster):
    t0 = int(time.time() * 1000) - 100_000
    topic = fill(gw_cluster, 6, 500, t0)
    df = reader(spark, gw_cluster, topic).option("minPartitions", "12").option("includeHeaders", "true").load()
    assert df.rdd.getNumPartitions() >= 12
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
        ("timestamp", "timestamp"), ("timestampType", "int"), ("headers", "array<struct<key:string,value:binary>>")]
    rows = df.collect()
    assert len(rows) == 3000
    assert sorted((r.partition, r.offset) for r in rows) == [(p, o) for p in range(6) for o in range(500)]
    assert all(bytes(r.value) == b"%d-%d" % (r.partition, r.offset) and r.topic == topic for r in rows)
    first = next(r for r in rows if r.partition == 2 and r.offset == 7)
    assert bytes(first.key) == b"k7" and [(h.key, bytes(h.value)) for h in first.headers] == [("h", b"7")]
    assert int(first.timestamp.timestamp() * 1000) == t0 + 7
    assert "headers" not in reader(spark, gw_cluster, topic).load().columns


def test_offset_ranges_by_json_and_by_timestamp_select_exactly_their_records(spark, gw_cluster):
    t0 = int(time.time() * 1000) - 100_000
    topic = fill(gw_cluster, 2, 100, t0)
    by_offsets = (reader(spark, gw_cluster, topic)
                  .option("startingOffsets", json.dumps({topic: {"0": 10, "1": -2}}))
                  .option("endingOffsets", json.dumps({topic: {"0": 20, "1": 5}})).load())
    assert sorted((r.partition, r.offset) for r in by_offsets.collect()) == \
        [(0, o) for o in range(10, 20)] + [(1, o) for o in range(5)]
    by_time = (reader(spark, gw_cluster, topic).option("startingTimestamp", str(t0 + 30))
               .option("endingOffsetsByTimestamp", json.dumps({topic: {"0": t0 + 40, "1": t0 + 35}})).load())
    assert sorted((r.partition, r.offset) for r in by_time.collect()) == \
        [(0, o) for o in range(30, 40)] + [(1, o) for o in range(30, 35)]
    assign = (spark.read.format("odradek").option("gateway", gw_cluster.gateway)
              .option("assign", json.dumps({topic: [1]})).load())
    assert {r.partition for r in assign.collect()} == {1}


def test_batch_write_then_read_back(spark, gw_cluster):
    """Every row comes back, each key on the partition Kafka's Java producer would put it on."""
    out = f"spark-out-{uuid.uuid4().hex[:6]}"
    gw_cluster.create_topic(out, partitions=3)
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(1000)], "key string, value string")
    df.write.format("odradek").option("gateway", gw_cluster.gateway).option("topic", out).mode("append").save()
    back = reader(spark, gw_cluster, out).load().selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v",
                                                            "partition")
    rows = back.collect()
    assert sorted((r.k, r.v) for r in rows) == sorted((f"k{i}", f"v{i}") for i in range(1000))
    assert all(r.partition == java_partition(r.k.encode(), 3) for r in rows)


def test_a_write_to_a_missing_topic_fails_the_job(spark, gw_cluster):
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="not found"):
        df.write.format("odradek").option("gateway", gw_cluster.gateway).option("topic", "no-such-topic") \
            .mode("append").save()


def test_spark_submit_of_the_example_job_with_the_package_as_py_files(gw_cluster, tmp_path):
    """Driver and workers run an interpreter without odradek installed: the zip is all they have,
    and the job names format("odradek") with no registration call."""
    topic = fill(gw_cluster, 3, 200, int(time.time() * 1000) - 50_000)
    out = f"counts-{uuid.uuid4().hex[:6]}"
    gw_cluster.create_topic(out, partitions=1)
    bundle = build_bundle(tmp_path / "odradek-spark.zip")
    python = python_without_odradek(tmp_path / "bare")
    submit = Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, **spark_env(tmp_path), "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python,
           "PYTHONPATH": str(bundle)}  # where the driver's data-source lookup looks (docs/spark.md)
    proc = subprocess.run([str(submit), "--master", "local[2]", "--conf", f"spark.local.dir={tmp_path}",
                           "--conf", "spark.ui.enabled=false", "--py-files", str(bundle),
                           str(ROOT / "examples" / "spark_counts_by_key.py"),
                           "--gateway", gw_cluster.gateway, "--input", topic, "--output", out],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    with GatewayClient(gw_cluster.gateway) as gw:
        records, _ = gw.read_json(out, 0, 0)
    got = {base64.b64decode(r["key"]).decode(): base64.b64decode(r["value"]).decode() for r in records}
    assert got == {f"k{i}": "60" for i in range(10)}, "3 partitions x 200 records over 10 keys: 60 each"


def test_read_committed_reads_committed_transactions_only(spark, gw_cluster):
    """``kafka.isolation.level=read_committed`` through the gateway: the records of committed
    transactions, never those of an aborted one, none of a transaction still open (its end is
    the last stable offset; read_uncommitted, the default, would read all 40)."""
    from confluent_kafka import Producer
    topic = f"spark-txn-{uuid.uuid4().hex[:8]}"
    gw_cluster.create_topic(topic, partitions=2, replication_factor=1)
    producer = Producer({"bootstrap.servers": gw_cluster.bootstrap, "transactional.id": topic, "linger.ms": 5})
    producer.init_transactions(60)

    def transaction(name: str) -> None:
        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic, value=f"{name}-{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0
    for name, commit in (("committed-1", True), ("aborted", False), ("committed-2", True), ("open", None)):
        transaction(name)
        if commit is True:
            producer.commit_transaction(30)
        elif commit is False:
            producer.abort_transaction(30)
    try:
        rows = reader(spark, gw_cluster, topic).option("kafka.isolation.level", "read_committed").load().collect()
        assert sorted(bytes(r.value).decode() for r in rows) == sorted(
            f"committed-{n}-{i}" for n in (1, 2) for i in range(10))
    finally:
        producer.abort_transaction(30)


ORDER = json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"}, {"name": "amount", "type": "double"},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}}]})


def test_an_avro_topic_is_read_into_typed_columns_and_written_back(spark, gw_cluster):
    """Records of confluent_kafka's AvroSerializer (registered under ``<topic>-value`` in the
    gateway's registry) come out of ``valueFormat=avro`` as a typed struct; Spark writes them to
    another topic with the schema it registers, and AvroDeserializer reads the same values."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic, out = f"spark-avro-{uuid.uuid4().hex[:8]}", f"spark-avro-out-{uuid.uuid4().hex[:8]}"
    for name in (topic, out):
        gw_cluster.create_topic(name, partitions=2, replication_factor=1)
    registry = SchemaRegistryClient({"url": gw_cluster.gateway})
    t0 = datetime.datetime(2026, 11, 29, 8, 0, tzinfo=datetime.timezone.utc)
    orders = [{"id": i, "customer": f"c{i % 3}", "amount": i * 1.5, "note": None if i % 2 else f"n{i}",
               "at": t0 + datetime.timedelta(milliseconds=i), "lines": [{"sku": f"s{i}", "qty": i % 5}] * (i % 3)}
              for i in range(60)]
    serialize = AvroSerializer(registry, ORDER)
    producer = Producer({"bootstrap.servers": gw_cluster.bootstrap})
    for order in orders:
        producer.produce(topic, value=serialize(order, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0

    df = reader(spark, gw_cluster, topic).option("valueFormat", "avro").load()
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,customer:string,amount:double,note:string,at:timestamp,"
        "lines:array<struct<sku:string,qty:int>>>")
    local = [{**o, "at": o["at"].astimezone().replace(tzinfo=None)} for o in orders]  # Spark's collect: local time
    assert sorted((r.value.asDict(recursive=True) for r in df.collect()), key=lambda v: v["id"]) == local
    assert df.where("value.amount > 80").select("value.customer").count() == 6, "typed columns in SQL"

    (df.select("value").write.format("odradek").option("gateway", gw_cluster.gateway).option("topic", out)
     .option("valueFormat", "avro").option("autoRegisterSchemas", "true").mode("append").save())
    deserialize = AvroDeserializer(registry)
    consumer = Consumer({"bootstrap.servers": gw_cluster.bootstrap, "group.id": out, "auto.offset.reset": "earliest"})
    consumer.subscribe([out])
    got, deadline = [], time.monotonic() + 60
    try:
        while len(got) < len(orders) and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                got.append(deserialize(message.value(), SerializationContext(out, MessageField.VALUE)))
    finally:
        consumer.close()
    assert sorted(got, key=lambda v: v["id"]) == orders
    assert registry.get_latest_version(f"{out}-value").schema.schema_type == "AVRO"


def test_protobuf_and_json_schema_topics_are_read_into_typed_columns(spark, gw_cluster):
    """Records of confluent_kafka's ProtobufSerializer (a message with a Timestamp, a nested
    repeated message, an enum and a map; its .proto registered in the gateway's registry) and
    JSONSerializer, read with ``valueFormat`` protobuf and jsonschema."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf import message_factory
    from tests.spark.test_spark_formats import proto_file

    order_class = message_factory.GetMessageClass(proto_file()[1].message_types_by_name["Order"])
    person = json.dumps({"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                                                          "scores": {"type": "array", "items": {"type": "number"}}}})
    topics = {kind: f"spark-{kind}-{uuid.uuid4().hex[:8]}" for kind in ("protobuf", "jsonschema")}
    for topic in topics.values():
        gw_cluster.create_topic(topic, partitions=1, replication_factor=1)
    registry = SchemaRegistryClient({"url": gw_cluster.gateway})
    serializers = {"protobuf": ProtobufSerializer(order_class, registry, {"use.deprecated.format": False}),
                   "jsonschema": JSONSerializer(person, registry)}
    t0 = datetime.datetime(2026, 11, 29, 8, 0, tzinfo=datetime.timezone.utc)
    producer = Producer({"bootstrap.servers": gw_cluster.bootstrap})
    for i in range(20):
        order = order_class(id=i, kind=i % 2, lines=[order_class.Line(sku=f"s{i}")])
        order.at.FromDatetime(t0 + datetime.timedelta(seconds=i))
        order.attrs["i"] = str(i)
        values = {"protobuf": order, "jsonschema": {"id": i, "name": f"n{i}", "scores": [i / 2]}}
        for kind, topic in topics.items():
            producer.produce(topic, value=serializers[kind](values[kind], SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0

    orders = (reader(spark, gw_cluster, topics["protobuf"]).option("valueFormat", "protobuf")
              .option("valueMessageName", "shop.Order").load())
    assert orders.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,at:timestamp,lines:array<struct<sku:string>>,kind:string,attrs:map<string,string>>")
    got = sorted((r.value.asDict(recursive=True) for r in orders.collect()), key=lambda v: v["id"])
    assert got[3] == {"id": 3, "at": (t0 + datetime.timedelta(seconds=3)).astimezone().replace(tzinfo=None),
                      "lines": [{"sku": "s3"}], "kind": "B", "attrs": {"i": "3"}}
    assert [v["id"] for v in got] == list(range(20))
    people = reader(spark, gw_cluster, topics["jsonschema"]).option("valueFormat", "jsonschema").load()
    assert people.schema["value"].dataType.simpleString() == "struct<id:bigint,name:string,scores:array<double>>"
    assert sorted(tuple(r) for r in people.select("value.*").collect()) == sorted(
        (i, f"n{i}", [i / 2]) for i in range(20))
