"""Produce throughput with the broker's Prometheus metrics on, divided by off (issue 19: >= 0.98).

    .venv/bin/python -m bench.metrics_overhead --rounds 5 --records 1000000 --size 1024

Two single-broker dev clusters run side by side: one with ``metrics.port`` set (request
timing on every connection, a scrape of its /metrics every second from this process, far more
often than Prometheus' usual 15-30 s), one with ``metrics.port=-1`` (no endpoint, no request
timing; the per-topic byte and record counts are plain int additions either way). Kafka's
ProducerPerformance (acks=1, the side-by-side suite's producer settings) writes to each in
turn, alternating which goes first each round so that drift on a shared machine falls on
both. Figures: the ratio of the median records/s; the geometric mean of each round's on/off
ratio (paired: robust to load that drifts between rounds); and the broker's CPU time per
record, off ÷ on (what throughput would be when the broker is CPU-bound, the least sensitive
to other processes on the machine). Also measures, per call, what the
counting costs: prometheus-client's ``Counter.labels(topic).inc`` against ``TopicStats.produced``.
Writes bench/results/metrics-overhead-<time>.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import statistics
import tempfile
import threading
import time
import timeit
import urllib.request
from pathlib import Path

from bench.side_by_side import RESULTS, cpu_seconds, producer_performance
from odradek.dev.harness import start_cluster, stop_cluster


class _Target:
    """What ``producer_performance`` needs of a system: its bootstrap servers."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def delete_topic(self, name: str) -> None:
        """Each round writes records x size bytes: drop them so long runs do not fill the disk."""
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.delete_topics([name], operation_timeout=60, request_timeout=60)[name].result(timeout=90)


def _scraper(url: str, stop: threading.Event, interval: float, counts: list[float]) -> threading.Thread:
    def run() -> None:
        while not stop.wait(interval):
            started = time.perf_counter()
            with urllib.request.urlopen(url, timeout=10) as resp:
                resp.read()
            counts.append(time.perf_counter() - started)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def counting_cost(calls: int = 200_000) -> dict:
    """Seconds per call: prometheus-client's labelled counter vs the broker's plain ints."""
    from prometheus_client import CollectorRegistry, Counter

    from odradek.broker.metrics.stats import TopicStats
    counter = Counter("bytes_in", "x", ["topic"], registry=CollectorRegistry())
    stats = TopicStats()
    client = min(timeit.repeat(lambda: counter.labels("t").inc(1024), number=calls, repeat=3)) / calls
    plain = min(timeit.repeat(lambda: stats.produced("t", 1024, 1), number=calls, repeat=3)) / calls
    return {"prometheus_client_labels_inc_ns": round(client * 1e9), "topic_stats_produced_ns": round(plain * 1e9)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--scrape-interval", type=float, default=1.0)
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="odradek-metrics-bench-"))
    clusters = {"on": start_cluster(root / "on", brokers=1),
                "off": start_cluster(root / "off", brokers=1, extra=("--config", "metrics.port=-1"))}
    stop, scrapes = threading.Event(), []
    results: dict[str, list[dict]] = {"on": [], "off": []}
    try:
        url = clusters["on"].status()["metrics_url"]["broker-1"]
        _scraper(url, stop, args.scrape_interval, scrapes)
        for r in range(args.rounds):
            for which in (("on", "off") if r % 2 == 0 else ("off", "on")):
                pid, target = [clusters[which].pids["broker-1"]], _Target(clusters[which].bootstrap)
                cpu0 = cpu_seconds(pid)
                run = producer_performance(target, f"bench-{r}", args.records, args.size, "1")
                run["broker_cpu_us_per_record"] = round((cpu_seconds(pid) - cpu0) * 1e6 / args.records, 2)
                results[which].append(run)
                target.delete_topic(f"bench-{r}")
                print(f"round {r} metrics {which}: {run['records_s']} records/s ({run['mb_s']} MB/s)", flush=True)
    finally:
        stop.set()
        for c in clusters.values():
            stop_cluster(c, strict=False)
        shutil.rmtree(root, ignore_errors=True)
    median = {k: statistics.median(x["records_s"] for x in v) for k, v in results.items()}
    paired = statistics.geometric_mean(on["records_s"] / off["records_s"]
                                       for on, off in zip(results["on"], results["off"]))
    cpu = {k: statistics.median(x["broker_cpu_us_per_record"] for x in v) for k, v in results.items()}
    summary = {"time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "args": vars(args), "median_records_s": median, "ratio_on_off": round(median["on"] / median["off"], 3),
               "paired_ratio_on_off": round(paired, 3), "median_broker_cpu_us_per_record": cpu,
               "cpu_ratio_off_on": round(cpu["off"] / cpu["on"], 3),
               "scrapes": len(scrapes),
               "median_scrape_ms": round(statistics.median(scrapes) * 1000, 2) if scrapes else None,
               "runs": results, "per_call": counting_cost()}
    out = RESULTS / f"metrics-overhead-{datetime.datetime.now():%Y-%m-%d-%H%M}.json"
    out.write_text(json.dumps(summary, indent=2))
    shown = ("median_records_s", "ratio_on_off", "paired_ratio_on_off", "median_broker_cpu_us_per_record",
             "cpu_ratio_off_on", "scrapes", "median_scrape_ms", "per_call")
    print(json.dumps({k: summary[k] for k in shown}, indent=2))
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
