"""read_committed against read_uncommitted consumption of the same transactional data (issue 20).

    .venv/bin/python -m bench.read_committed [--records 200000] [--per-txn 1000] [--abort-every 10] [--rounds 3]

A 1-broker dev cluster; confluent-kafka's transactional producer writes ``--records`` records
of 200 bytes to one partition in transactions of ``--per-txn`` records, aborting every
``--abort-every``-th one. Then, alternately and ``--rounds`` times each, a librdkafka consumer
with ``isolation.level`` read_uncommitted and one with read_committed read the partition from
the start to its end (position = high watermark = last stable offset once every transaction
ended). The time of each read gives a rate in log bytes/s (the same bytes are fetched either
way; read_committed drops the aborted records client-side from the aborted-transaction list
the broker returns). Goal: read_committed >= 0.9 x read_uncommitted (medians).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from odradek.dev.harness import start_cluster, stop_cluster

TOPIC, VALUE_BYTES, DEADLINE_S = "read-committed", 200, 300


def produce(bootstrap: str, records: int, per_txn: int, abort_every: int) -> tuple[int, int]:
    """(records committed, records aborted)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-read-committed",
                         "linger.ms": 20, "batch.size": 1 << 20})
    producer.init_transactions(60)
    value = os.urandom(VALUE_BYTES // 2).hex().encode()
    committed = aborted = 0
    for txn in range(records // per_txn):
        producer.begin_transaction()
        for i in range(per_txn):
            producer.produce(TOPIC, value, key=str(i).encode())
            if i % 10_000 == 0:
                producer.poll(0)
        producer.flush(60)
        if abort_every and txn % abort_every == abort_every - 1:
            producer.abort_transaction(60)
            aborted += per_txn
        else:
            producer.commit_transaction(60)
            committed += per_txn
    return committed, aborted


def end_offset(bootstrap: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-rc-probe"})
    try:
        return c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)[1]
    finally:
        c.close()


def read_all(bootstrap: str, isolation: str, end: int) -> tuple[float, int]:
    """Seconds to read the partition from its start to ``end``, and the records received."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-rc-{isolation}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 8 << 20})
    got = 0
    try:
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        started = time.monotonic()
        deadline = started + DEADLINE_S
        while time.monotonic() < deadline:
            got += sum(1 for m in consumer.consume(num_messages=10_000, timeout=0.2) if m.error() is None)
            if consumer.position([TopicPartition(TOPIC, 0)])[0].offset >= end:
                break
        return time.monotonic() - started, got
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--per-txn", type=int, default=1000)
    ap.add_argument("--abort-every", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cluster = start_cluster(Path(tmp), brokers=1)
        try:
            cluster.create_topic(TOPIC, partitions=1)
            committed, aborted = produce(cluster.bootstrap, args.records, args.per_txn, args.abort_every)
            end = end_offset(cluster.bootstrap)
            size = sum(p.stat().st_size for p in Path(tmp).glob(f"broker-*/{TOPIC}-0/*.log"))
            print(f"{committed} records committed, {aborted} aborted, log end {end}, {size / 1e6:.1f} MB")
            rates: dict[str, list[float]] = {"read_uncommitted": [], "read_committed": []}
            for i in range(args.rounds):
                for isolation in rates:
                    seconds, got = read_all(cluster.bootstrap, isolation, end)
                    rates[isolation].append(size / seconds)
                    print(f"round {i} {isolation}: {got} records in {seconds:.2f}s ({size / seconds / 1e6:.1f} MB/s)")
        finally:
            stop_cluster(cluster, strict=False)
    medians = {k: statistics.median(v) for k, v in rates.items()}
    ratio = medians["read_committed"] / medians["read_uncommitted"]
    print(f"median read_uncommitted {medians['read_uncommitted'] / 1e6:.1f} MB/s, read_committed "
          f"{medians['read_committed'] / 1e6:.1f} MB/s: ratio {ratio:.2f} (goal >= 0.9: "
          f"{'met' if ratio >= 0.9 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
