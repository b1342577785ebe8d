"""Spark batch read of one 6-partition topic with local[2]: the "odradek" data source through the
gateway, next to Spark's own Kafka source (spark-sql-kafka-0-10) against Apache Kafka.

    .venv/bin/python -m bench.spark [--mb 2048] [--rounds 1]

Each system runs alone (the other is stopped): one broker, the topic filled with Kafka's
ProducerPerformance (1 KiB records, the same tool for both), then the whole topic read into
Spark's ``noop`` sink (every column materialized, nothing written). MB/s counts record values.
The Kafka source's jars come from scripts/spark_kafka.sh (Maven, cached in .cache/). Figures
are printed and written as JSON to bench/results/spark-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.side_by_side import KafkaSystem, System, environment, producer_performance

ROOT = Path(__file__).resolve().parents[1]
RECORD_BYTES = 1024
PARTITIONS = 6
# Spark's Kafka source and what it needs beyond PySpark's own jars
KAFKA_SOURCE_JARS = ("spark-sql-kafka-0-10", "spark-token-provider-kafka-0-10", "kafka-clients", "commons-pool2")


class OdradekWithGateway(System):
    """A one-broker dev cluster with its gateway (stopped by PID through stop_cluster)."""
    name = "odradek"

    def __init__(self, root: Path) -> None:
        from odradek.dev.harness import start_cluster
        self.cluster = start_cluster(root / "odradek", brokers=1, gateway=True)
        self.bootstrap, self.gateway = self.cluster.bootstrap, self.cluster.gateway

    def broker_pids(self) -> list[int]:
        return [int(pid) for name, pid in self.cluster.pids.items() if name.startswith("broker-")]

    def stop(self) -> list[str]:
        from odradek.dev.harness import stop_cluster
        try:
            stop_cluster(self.cluster, strict=True)
        except AssertionError as e:
            return [f"odradek: {e}"]
        return []


def kafka_source_jars() -> list[str]:
    out = subprocess.run([str(ROOT / "scripts" / "spark_kafka.sh")], capture_output=True, text=True, check=True)
    jars = Path(out.stdout.strip().splitlines()[-1])
    return sorted(str(j) for j in jars.glob("*.jar") if j.name.startswith(KAFKA_SOURCE_JARS))


def spark_session(tmp: Path, jars: list[str]):
    os.environ.update({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                       "SPARK_LOCAL_IP": "127.0.0.1"})
    from pyspark.sql import SparkSession
    import odradek.spark
    spark = (SparkSession.builder.master("local[2]").appName("bench-spark")
             .config("spark.jars", ",".join(jars)).config("spark.local.dir", str(tmp))
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(spark)
    return spark


def _reader(spark, system: System, topic: str):
    if isinstance(system, OdradekWithGateway):
        reader = spark.read.format("odradek").option("gateway", system.gateway)
    else:
        reader = spark.read.format("kafka").option("kafka.bootstrap.servers", system.bootstrap)
    return reader.option("subscribe", topic).option("startingOffsets", "earliest").load()


def timed_read(spark, system: System, topic: str) -> float:
    df = _reader(spark, system, topic)
    t0 = time.monotonic()
    df.write.format("noop").mode("overwrite").save()
    return time.monotonic() - t0


def bench_system(spark, system: System, records: int, rounds: int) -> dict:
    topic = "spark-bench"
    system.create_topic(topic, PARTITIONS, 1)
    fill = producer_performance(system, topic, records, RECORD_BYTES, "1")
    rows = _reader(spark, system, topic).count()
    if rows != records:
        raise RuntimeError(f"{system.name}: Spark read {rows} records of {records}")
    seconds = [timed_read(spark, system, topic) for _ in range(rounds)]
    best = min(seconds)
    return {"records": records, "fill_mb_s": fill["mb_s"], "read_s": [round(s, 2) for s in seconds],
            "mb_s": round(records * RECORD_BYTES / 1e6 / best, 1), "records_s": round(records / best)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=2048, help="topic size in MB of record values (default 2048)")
    ap.add_argument("--rounds", type=int, default=1, help="timed reads per system (the best counts)")
    args = ap.parse_args(argv)
    records = args.mb * 1_000_000 // RECORD_BYTES
    results: dict = {"mb": args.mb, "record_bytes": RECORD_BYTES, "partitions": PARTITIONS, "master": "local[2]",
                     "environment": environment()}
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        spark = spark_session(Path(tmp), kafka_source_jars())
        try:
            for make in (OdradekWithGateway, lambda root: KafkaSystem(root, 1)):
                system = make(Path(tmp))
                try:
                    results[system.name] = bench_system(spark, system, records, args.rounds)
                finally:
                    leftovers = system.stop()
                    if leftovers:
                        print(f"left behind: {leftovers}", file=sys.stderr)
                print(f"{system.name:8} {json.dumps(results[system.name])}", flush=True)
        finally:
            spark.stop()
    results["ratio"] = round(results["odradek"]["mb_s"] / results["kafka"]["mb_s"], 2)
    print(f"odradek / Spark's Kafka source: {results['ratio']}x")
    out = ROOT / "bench" / "results" / f"spark-{time.strftime('%Y-%m-%d-%H%M', time.gmtime())}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
