"""The single-record acks=all round trip: one record at a time, the next sent once the last
is acknowledged (RF 3, min.insync.replicas 2), p50/p99 in milliseconds.

The path a change to batching, the controller or fetch sessions could slow without any
throughput figure showing it: each record waits for the followers' next fetch and the high
watermark's advance. ``side_by_side`` runs it as scenario 6 on both systems; alone:

    .venv/bin/python -m bench.round_trip --bootstrap 127.0.0.1:9092 --topic rt [--records 2000]

The client is confluent-kafka (librdkafka) for both systems: ``produce`` then ``flush``, timed
around the pair, after ``--warmup`` untimed records.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def single_record_round_trip(bootstrap: str, topic: str, records: int = 2000, warmup: int = 200,
                             size: int = 100) -> dict:
    from confluent_kafka import KafkaException, Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": False, "socket.nagle.disable": True})
    failures = []
    value = b"x" * size

    def report(err, _msg):
        if err is not None:
            failures.append(err)

    times = []
    for i in range(warmup + records):
        started = time.perf_counter()
        producer.produce(topic, value, partition=0, on_delivery=report)
        if producer.flush(30) != 0:
            raise RuntimeError(f"record {i} not acknowledged within 30 s")
        if i >= warmup:
            times.append(1000 * (time.perf_counter() - started))
    if failures:
        raise KafkaException(failures[0])
    times.sort()
    return {"records": records, "p50_ms": round(statistics.median(times), 3),
            "p99_ms": round(times[int(0.99 * (len(times) - 1))], 3), "max_ms": round(times[-1], 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.round_trip", description=__doc__.split("\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True, help="an existing topic (RF 3 for the intended figure)")
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    args = ap.parse_args(argv)
    print(json.dumps(single_record_round_trip(args.bootstrap, args.topic, args.records, args.warmup)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
