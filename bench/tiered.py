"""Tiered storage (issue 37): reads from the object store against reads of the local disk.

    .venv/bin/python -m bench.tiered [--mb 200] [--record-bytes 4096] [--segment-mb 8] [--local-segments 3]

A one-broker ``dev up --tiered`` cluster (S3Proxy beside it, the remote log manager every
second); a topic with ``remote.storage.enable``, ``--segment-mb`` segments and a local limit of
``--local-segments`` of them; ``--mb`` MB produced (librdkafka, acks=1), then, once the broker's
disk is back near the limit (every rolled segment uploaded, the older ones deleted locally):

(a) remote: one reader fetching from offset 0 to the local log start, one Fetch (v12, 1 MiB per
    partition, the way a consumer fetches) after the other: MB/s and each fetch's latency
    (p50/p99; a fetch answered without records because its store read outlived
    remote.fetch.max.wait.ms counts as one);
(b) local: the same from the local log start to the end, twice; the second pass is the one
    reported (the page cache warm, as a consumer at the tail finds it);
(c) a confluent-kafka consumer reading the whole topic from offset 0: MB/s end to end.

Prints and writes bench/results/tiered-<time>.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.side_by_side import save_result
from odradek.dev.harness import start_cluster, stop_cluster
from odradek.dev.waiting import wait_until
from odradek.records import iter_headers
from tests.support.kafka_wire import WireClient, fetch_partition

TOPIC = "bench-tiered"


def produce(bootstrap: str, mb: int, record_bytes: int) -> int:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1, "enable.idempotence": False})
    value = bytes(range(256)) * (record_bytes // 256) + b"x" * (record_bytes % 256)
    count = mb * 1_000_000 // record_bytes
    for i in range(count):
        while True:
            try:
                p.produce(TOPIC, value=value, key=b"%d" % i, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(300) == 0
    return count


def local_bytes(cluster) -> int:
    return sum(p.stat().st_size for p in (Path(cluster.data_dir) / "broker-1" / f"{TOPIC}-0").glob("*.log"))


def local_log_start(cluster) -> int:
    return min(int(p.stem) for p in (Path(cluster.data_dir) / "broker-1" / f"{TOPIC}-0").glob("*.log"))


def fetch_range(address: str, start: int, end: int) -> dict:
    """Fetches one after the other from ``start`` until ``end``: bytes, seconds, per-fetch ms."""
    latencies, size, offset, empty = [], 0, start, 0
    began = time.perf_counter()
    with WireClient(address, timeout=60) as client:
        while offset < end:
            t = time.perf_counter()
            answer = fetch_partition(client, TOPIC, offset)
            latencies.append((time.perf_counter() - t) * 1000)
            assert answer.error_code == 0, f"fetch at {offset}: error {answer.error_code}"
            records = bytes(answer.records or b"")
            size += len(records)
            empty += not records
            for header in iter_headers(records):
                offset = max(offset, header.last_offset + 1)
    seconds = time.perf_counter() - began
    qs = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
    return {"offsets": end - start, "mb": size / 1e6, "seconds": round(seconds, 2),
            "mb_per_s": round(size / 1e6 / seconds, 1), "fetches": len(latencies),
            "empty_fetches": empty, "p50_ms": round(qs[49], 2),
            "p99_ms": round(qs[98], 2)}


def consume_all(bootstrap: str, count: int) -> dict:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-tiered", "enable.auto.commit": False,
                  "fetch.max.bytes": 50 * 1024 * 1024, "max.partition.fetch.bytes": 8 * 1024 * 1024})
    got, size = 0, 0
    began = time.perf_counter()
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 600
        while got < count and time.monotonic() < deadline:
            for m in c.consume(num_messages=10_000, timeout=0.5):
                if m.error() is None:
                    got += 1
                    size += len(m.value()) + len(m.key() or b"")
    finally:
        c.close()
    seconds = time.perf_counter() - began
    assert got == count, f"consumed {got} of {count}"
    return {"records": got, "mb": round(size / 1e6, 1), "seconds": round(seconds, 2),
            "mb_per_s": round(size / 1e6 / seconds, 1)}


def run(mb: int, record_bytes: int, segment_mb: int, local_segments: int) -> dict:
    segment = segment_mb << 20
    with tempfile.TemporaryDirectory() as tmp:
        cluster = start_cluster(Path(tmp), brokers=1, extra=("--tiered",))
        try:
            cluster.create_topic(TOPIC, config={"remote.storage.enable": "true", "segment.bytes": str(segment),
                                                "local.retention.bytes": str(local_segments * segment)})
            cluster.wait_for_leaders(TOPIC, 1)
            began = time.perf_counter()
            count = produce(cluster.bootstrap, mb, record_bytes)
            produced_s = time.perf_counter() - began
            peak = [0]

            def settled():
                peak[0] = max(peak[0], local_bytes(cluster))
                return local_bytes(cluster) <= (local_segments + 2) * segment
            wait_until(settled, 600, "the disk back near local.retention.bytes", interval=0.5)
            uploaded_s = time.perf_counter() - began
            address, local = cluster.leader_address(TOPIC, 0), local_log_start(cluster)
            remote = fetch_range(address, 0, local)
            fetch_range(address, local, count)
            tail = fetch_range(address, local, count)
            consumer = consume_all(cluster.bootstrap, count)
        finally:
            stop_cluster(cluster, strict=False)
    return {"produced_mb": mb, "record_bytes": record_bytes, "records": count, "segment_mb": segment_mb,
            "local_retention_mb": local_segments * segment_mb, "produce_s": round(produced_s, 1),
            "produced_to_disk_near_limit_s": round(uploaded_s, 1), "local_mb_peak_seen_after_produce": round(peak[0] / 1e6, 1),
            "remote": remote, "local_second_pass": tail, "consumer_from_0": consumer}


def report(r: dict) -> None:
    print(f"{r['produced_mb']} MB in {r['records']} records of {r['record_bytes']} B, {r['segment_mb']} MiB segments, "
          f"local limit {r['local_retention_mb']} MiB: produced in {r['produce_s']} s, disk near the limit after "
          f"{r['produced_to_disk_near_limit_s']} s")
    for name in ("remote", "local_second_pass"):
        s = r[name]
        print(f"{name}: {s['mb']:.1f} MB in {s['fetches']} fetches, {s['mb_per_s']} MB/s, fetch p50 {s['p50_ms']} ms, "
              f"p99 {s['p99_ms']} ms ({s['empty_fetches']} answered without records)")
    c = r["consumer_from_0"]
    print(f"confluent-kafka consumer from offset 0: {c['records']} records, {c['mb_per_s']} MB/s", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--record-bytes", type=int, default=4096)
    ap.add_argument("--segment-mb", type=int, default=8)
    ap.add_argument("--local-segments", type=int, default=3)
    args = ap.parse_args(argv)
    result = run(args.mb, args.record_bytes, args.segment_mb, args.local_segments)
    report(result)
    save_result("tiered", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
