"""Idle CPU of a 3-broker cluster, Odradek next to Kafka.

Followers of an idle partition must not fetch in a busy loop: issue 3 asks for at most 2% of
a core per broker. Each system gets 3 brokers and ``--topics`` topics of 6 partitions, RF=3
(so every broker follows and leads), a few records so the fetchers have started, then its
brokers' CPU time (utime+stime from /proc) is measured over ``--seconds`` with no client
connected. The systems run one after the other, never at the same time.

    python -m bench.idle [--seconds 60] [--topics 4] [--systems odradek,kafka]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path

from bench.side_by_side import KAFKA, ODRADEK, RESULTS, KafkaSystem, OdradekSystem, System, cpu_seconds

SYSTEMS = {ODRADEK: OdradekSystem, KAFKA: KafkaSystem}
SETTLE_S = 5.0


def idle_cpu(system: System, topics: int, seconds: float) -> dict:
    from confluent_kafka import Producer
    names = [f"idle-{i}" for i in range(topics)]
    for name in names:
        system.create_topic(name, 6, 3, {"min.insync.replicas": "2"})
    producer = Producer({"bootstrap.servers": system.bootstrap, "acks": "all", "enable.idempotence": False})
    for name in names:
        for i in range(60):
            producer.produce(name, value=b"x" * 100, key=b"%d" % i)
    if producer.flush(60):
        raise RuntimeError(f"{system.name}: records not acknowledged")
    del producer
    time.sleep(SETTLE_S)  # let the last follower fetches and ISR updates finish: not measured
    per_broker = {}
    pids = system.broker_pids()
    before = {pid: cpu_seconds([pid]) for pid in pids}
    started = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    for pid in pids:
        per_broker[pid] = round(100 * (cpu_seconds([pid]) - before[pid]) / elapsed, 2)
    return {"system": system.name, "seconds": round(elapsed, 1), "partitions": 6 * topics,
            "cpu_percent_per_broker": list(per_broker.values()),
            "max_cpu_percent": max(per_broker.values())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--topics", type=int, default=4)
    ap.add_argument("--systems", default=f"{ODRADEK},{KAFKA}")
    args = ap.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="odradek-idle-") as root:
        for name in args.systems.split(","):
            system = SYSTEMS[name](Path(root), 3)
            try:
                results.append(idle_cpu(system, args.topics, args.seconds))
            except Exception as e:  # noqa: BLE001 - one system failing still reports the other
                print(f"{name}: {type(e).__name__}: {e}", file=sys.stderr)
                continue
            finally:
                left = system.stop()
                if left:
                    print(f"left behind: {left}", file=sys.stderr)
            r = results[-1]
            print(f"{r['system']:8} idle CPU per broker over {r['seconds']} s, {r['partitions']} partitions RF=3: "
                  + ", ".join(f"{c:.2f}%" for c in r["cpu_percent_per_broker"]), flush=True)
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    out = RESULTS / f"idle-{stamp}.json"
    out.write_text(json.dumps({"measured": stamp, "results": results}, indent=2) + "\n")
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
