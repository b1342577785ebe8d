"""The single-record acks=all round trip: one record at a time, the next sent once the last
is acknowledged (RF 3, min.insync.replicas 2), p50/p99 in milliseconds.

The path a change to batching, the controller or fetch sessions could slow without any
throughput figure showing it: each record waits for the followers' next fetch and the high
watermark's advance. ``side_by_side`` runs it as scenario 6 on both systems; alone:

    .venv/bin/python -m bench.round_trip --bootstrap 127.0.0.1:9092 --topic rt [--records 2000]

The client is confluent-kafka (librdkafka) for both systems: ``produce`` then ``flush``, timed
around the pair, after ``--warmup`` untimed records.

Where an Odradek broker's time goes on this path (issue 33): ``--odradek`` starts a 3-broker dev
cluster (heavy: run it through the shared runner), warms the path first (``warm_round_trips``),
then measures ``--records`` twice and adds to each figure every broker's CPU per round trip
(``/proc`` utime + stime, and stime alone) and the leader's own request phase timings (mean ms
per Produce and Fetch, from its metrics endpoint: queue, local, remote, response send, total):

    .venv/bin/python -m bench.round_trip --odradek [--records 3000]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Callable


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


WARM_CHUNK, WARM_CHUNKS = 1000, 15   # the path warmed first: 15 chunks of 1,000 single records


def warm_round_trips(run_chunk: Callable[[], dict], chunks: int = WARM_CHUNKS) -> list[float]:
    """Untimed round trips before a measurement, ``chunks`` calls of ``run_chunk()`` (a
    ``single_record_round_trip`` of ``WARM_CHUNK`` records); each chunk's p50 in ms, to show
    the path settling. Kafka's three brokers needed ~13,000 records to reach their steady state
    (docs/performance.md, "What runs"); Odradek's is steady from the first chunk."""
    return [run_chunk()["p50_ms"] for _ in range(chunks)]


def odradek_cpu_per_round_trip(records: int = 3000, rounds: int = 2) -> list[dict]:
    """The round trip on a fresh 3-broker Odradek dev cluster, with each broker's CPU per round
    trip and the leader's request phase timings (see the module doc)."""
    from bench.side_by_side import OdradekSystem
    from odradek.dev.harness import partition_leaders
    system = OdradekSystem(Path(tempfile.mkdtemp(prefix="round-trip-")), 3)
    try:
        system.create_topic("rt", 1, 3, {"min.insync.replicas": "2"})
        leader = partition_leaders(system.bootstrap, "rt")[0]
        metrics = json.loads((system.cluster.data_dir / "cluster.json").read_text())["metrics"][f"broker-{leader}"]
        brokers = {name: pid for name, pid in system.pids.items() if name.startswith("broker-")}
        warm_round_trips(lambda: single_record_round_trip(system.bootstrap, "rt", WARM_CHUNK, 0))
        figures = []
        for _ in range(rounds):
            cpu, phases = {k: _cpu_s(p) for k, p in brokers.items()}, _phases(metrics)
            result = single_record_round_trip(system.bootstrap, "rt", records, 0)
            after, later = {k: _cpu_s(p) for k, p in brokers.items()}, _phases(metrics)
            result["leader"] = f"broker-{leader}"
            result["cpu_ms_per_round_trip"] = {k: round(1000 * (after[k][0] - cpu[k][0]) / records, 3) for k in brokers}
            result["sys_ms_per_round_trip"] = {k: round(1000 * (after[k][1] - cpu[k][1]) / records, 3) for k in brokers}
            result["leader_phase_ms"] = {f"{api}.{phase}": round((s - phases.get((api, phase), (0, 0))[0])
                                                                 / max(1, n - phases.get((api, phase), (0, 0))[1]), 4)
                                         for (api, phase), (s, n) in later.items()}
            result["load"] = round(os.getloadavg()[0], 1)
            figures.append(result)
        return figures
    finally:
        system.stop()


def _cpu_s(pid: int) -> tuple[float, float]:
    """(utime + stime, stime) of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, int(fields[12]) / tick


_PHASE = re.compile(r'kafka_network_requestmetrics_(requestqueue|local|remote|responsesend|total)timems_(sum|count)'
                    r'\{request="(Produce|Fetch)"\} ([0-9.e+-]+)')


def _phases(url: str) -> dict[tuple[str, str], tuple[float, float]]:
    """{(api, phase): (sum of ms, count)} from a broker's metrics endpoint."""
    found: dict[tuple[str, str], list[float]] = {}
    for phase, kind, api, value in _PHASE.findall(urllib.request.urlopen(url, timeout=10).read().decode()):
        found.setdefault((api, phase), [0.0, 0.0])[kind == "count"] = float(value)
    return {k: (v[0], v[1]) for k, v in found.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.round_trip", description=__doc__.split("\n")[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--topic", help="an existing topic (RF 3 for the intended figure)")
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--odradek", action="store_true", help="on a fresh 3-broker dev cluster, with CPU and phase timings")
    args = ap.parse_args(argv)
    if args.odradek:
        for figure in odradek_cpu_per_round_trip(args.records):
            print(json.dumps(figure))
        return 0
    if not (args.bootstrap and args.topic):
        ap.error("--bootstrap and --topic, or --odradek")
    print(json.dumps(single_record_round_trip(args.bootstrap, args.topic, args.records, args.warmup)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
