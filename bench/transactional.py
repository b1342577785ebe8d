"""Transactional produce: records in transactions of ``--per-txn`` records, each committed before
the next begins (issue 20's goal: >= 1.0x Kafka's rate). ``side_by_side`` runs it as scenario 7
on both systems (RF 3, min.insync.replicas 2, 6 partitions); alone:

    .venv/bin/python -m bench.transactional --bootstrap 127.0.0.1:9092 --topic txn [--records 200000]

The client is confluent-kafka (librdkafka) for both systems, with the side-by-side producer's
batching (linger 5 ms, 256 KiB batches): ``begin_transaction``, ``--per-txn`` produces, then
``commit_transaction``, which flushes and waits for the coordinator's answer. The figure is
records/s over the whole run (init_transactions excluded), and the commit call's p50/p99 — the
two-phase part (EndTxn, markers on every partition written, acknowledged) that plain produce
does not pay.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid


def transactional_produce(bootstrap: str, topic: str, records: int = 200_000, per_txn: int = 1000,
                          size: int = 1024) -> dict:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
                         "linger.ms": 5, "batch.size": 262144, "compression.type": "none"})
    producer.init_transactions(60)
    value, commits = b"x" * size, []
    started = time.perf_counter()
    for _ in range(records // per_txn):
        producer.begin_transaction()
        for _ in range(per_txn):
            while True:
                try:
                    producer.produce(topic, value)
                    break
                except BufferError:  # the local queue is full: serve delivery reports, then retry
                    producer.poll(0.01)
        commit_started = time.perf_counter()
        producer.commit_transaction(60)
        commits.append(1000 * (time.perf_counter() - commit_started))
    seconds = time.perf_counter() - started
    sent = per_txn * len(commits)
    commits.sort()
    return {"records": sent, "transactions": len(commits), "records_s": round(sent / seconds),
            "mb_s": round(sent * size / seconds / 1e6, 1), "commit_p50_ms": round(statistics.median(commits), 2),
            "commit_p99_ms": round(commits[int(0.99 * (len(commits) - 1))], 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.transactional", description=__doc__.split("\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True, help="an existing topic (RF 3 for the intended figure)")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--per-txn", type=int, default=1000)
    ap.add_argument("--size", type=int, default=1024)
    args = ap.parse_args(argv)
    print(json.dumps(transactional_produce(args.bootstrap, args.topic, args.records, args.per_txn, args.size)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
