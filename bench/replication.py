"""Replication cost (issue 3): idle CPU of a replicated cluster, and what acks=all RF=3 costs.

    .venv/bin/python -m bench.replication [--idle-seconds 60] [--records 100000] [--rounds 1]

(a) idle: a 3-broker dev cluster (`odradek dev up`), ``--topics`` topics of 6 partitions RF=3
    (every broker leads some partitions and follows the others), a few acks=all records so
    every follower fetcher runs, then each broker's CPU (utime+stime from /proc/PID/stat) over
    ``--idle-seconds`` with no client connected. Target: <= 2% of a core per broker.
(b) produce: 1 KiB records with Kafka's ProducerPerformance (batches natively; the same driver
    and producer settings as bench.side_by_side, Kafka from scripts/kafka.sh), 6 partitions:
    3 brokers RF=3 acks=all min.insync.replicas=2 (on the idle cluster, afterwards), then
    1 broker RF=1 acks=1. MB/s and ProducerPerformance's p50/p99 send latency (at full speed,
    so queueing is included).

Results: printed, and `bench/results/replication-<date>.json`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path

from bench.side_by_side import RESULTS, OdradekSystem, System, cpu_seconds, environment, measured, \
    producer_performance

PARTITIONS = 6
RECORD_BYTES = 1024
IDLE_TARGET_PERCENT = 2.0
SETTLE_S = 5.0  # after the warm-up records: the last follower fetches and ISR updates, not measured


def idle_cpu(system: System, topics: int, seconds: float) -> dict:
    """Each broker's CPU, in % of one core, over ``seconds`` of an idle replicated cluster."""
    from confluent_kafka import Producer
    names = [f"idle-{i}" for i in range(topics)]
    for name in names:
        system.create_topic(name, PARTITIONS, 3, {"min.insync.replicas": "2"})
    producer = Producer({"bootstrap.servers": system.bootstrap, "acks": "all", "enable.idempotence": False})
    for name in names:
        for i in range(10 * PARTITIONS):
            producer.produce(name, value=b"x" * 100, key=b"%d" % i)
    if producer.flush(60):
        raise RuntimeError("warm-up records not acknowledged")
    del producer
    time.sleep(SETTLE_S)
    pids = system.broker_pids()
    before = {pid: cpu_seconds([pid]) for pid in pids}
    started = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    percent = [round(100 * (cpu_seconds([pid]) - before[pid]) / elapsed, 2) for pid in pids]
    return {"seconds": round(elapsed, 1), "brokers": len(pids), "partitions_rf3": topics * PARTITIONS,
            "cpu_percent_per_broker": percent, "max_cpu_percent": max(percent),
            "target_percent": IDLE_TARGET_PERCENT, "within_target": max(percent) <= IDLE_TARGET_PERCENT}


def produce_runs(system: System, case: str, rf: int, acks: str, records: int, rounds: int) -> list[dict]:
    runs = []
    for rnd in range(rounds):
        topic = f"bench-rf{rf}-acks-{acks}-{rnd}"
        system.create_topic(topic, PARTITIONS, rf, {"min.insync.replicas": "2"} if rf > 1 else {})
        run = measured(system, producer_performance, system, topic, records, RECORD_BYTES, acks)
        runs.append({"case": case, "round": rnd, **run})
        print(f"  {case:22} round {rnd}: {run['mb_s']:7.1f} MB/s  p50 {run['p50_ms']:6.0f} ms  "
              f"p99 {run['p99_ms']:6.0f} ms  broker CPU {run['broker_cpu_s']} s", flush=True)
        system.delete_topic(topic)
    return runs


def with_system(root: Path, brokers: int, fn):
    system = OdradekSystem(root, brokers)
    try:
        return fn(system)
    finally:
        left = system.stop()
        if left:
            print(f"left behind: {left}", file=sys.stderr)


def median(runs: list[dict], key: str) -> float:
    values = sorted(r[key] for r in runs)
    return values[len(values) // 2]


def summary(runs: list[dict]) -> dict:
    cases = sorted({r["case"] for r in runs})
    return {case: {key: median([r for r in runs if r["case"] == case], key)
                   for key in ("mb_s", "records_s", "p50_ms", "p99_ms", "broker_cpu_s")} for case in cases}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--idle-seconds", type=float, default=60.0)
    ap.add_argument("--topics", type=int, default=4, help="idle: topics of 6 partitions, RF=3")
    ap.add_argument("--records", type=int, default=100_000, help="produce: 1 KiB records per run")
    ap.add_argument("--rounds", type=int, default=1, help="produce: runs per case (the median is reported)")
    ap.add_argument("--skip-idle", action="store_true")
    args = ap.parse_args(argv)
    report: dict = {"measured": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "environment": environment(),
                    "records": args.records, "record_bytes": RECORD_BYTES, "partitions": PARTITIONS}
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="odradek-replication-") as root:
        def three_brokers(system: System) -> None:
            if not args.skip_idle:
                report["idle"] = idle = idle_cpu(system, args.topics, args.idle_seconds)
                print(f"idle CPU per broker over {idle['seconds']} s, {idle['partitions_rf3']} partitions RF=3: "
                      + ", ".join(f"{c:.2f}%" for c in idle["cpu_percent_per_broker"])
                      + f" (target <= {IDLE_TARGET_PERCENT}%)", flush=True)
            runs.extend(produce_runs(system, "3 brokers RF=3 acks=all", 3, "all", args.records, args.rounds))

        with_system(Path(root), 3, three_brokers)
        with_system(Path(root), 1, lambda s: runs.extend(
            produce_runs(s, "1 broker RF=1 acks=1", 1, "1", args.records, args.rounds)))
    report["runs"] = runs
    report["produce"] = summary(runs)
    for case, figures in report["produce"].items():
        print(f"{case:24} {figures['mb_s']:7.1f} MB/s  {figures['records_s']:8} records/s  "
              f"p50 {figures['p50_ms']:.0f} ms  p99 {figures['p99_ms']:.0f} ms")
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    out = RESULTS / f"replication-{stamp}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written {out}")
    return 0 if report.get("idle", {}).get("within_target", True) else 1


if __name__ == "__main__":
    sys.exit(main())
