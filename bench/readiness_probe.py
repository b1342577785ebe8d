"""What a broker's readiness probe costs at many partitions: ``GET /internal/v1/ready`` (a count
kept on ISR changes) against ``GET /internal/v1/status`` (every hosted log serialised: the route
the operator's probe used before), each call on a new connection as a kubelet's probe makes it.

    .venv/bin/python -m bench.readiness_probe --partitions 3000 --calls 200

A one-broker dev cluster with one topic of ``--partitions`` partitions (the broker hosts them
all, as each broker of an RF 3 cluster of 3 brokers would). Prints and writes
bench/results/readiness-<time>.json: median and 99th percentile milliseconds and body bytes of
each route, and the start of the exec probe's own process (``odradek operator probe``, which
the kubelet runs for a mutual-TLS control plane: here it stops at loading its missing
certificate, so only the interpreter's start and the probe's imports are timed).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from bench.side_by_side import save_result
from odradek.cluster import control_plane as cp
from odradek.dev.harness import start_cluster, stop_cluster


def _get(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            body = resp.read()
    except urllib.error.HTTPError as e:  # 503: not ready, still an answer
        body = e.read()
    return time.perf_counter() - started, len(body)


def _summary(seconds: list[float]) -> dict:
    ms = sorted(s * 1000 for s in seconds)
    return {"median_ms": round(statistics.median(ms), 2), "p99_ms": round(ms[int(0.99 * (len(ms) - 1))], 2)}


def _measure(url: str, calls: int) -> dict:
    samples = [_get(url) for _ in range(calls)]
    return {**_summary([s for s, _ in samples]), "bytes": samples[-1][1]}


def _exec_start(calls: int) -> dict:
    odradek = str(Path(sys.executable).with_name("odradek"))
    argv = [odradek, "operator", "probe", "--port", "1", "--path", cp.READY.path(), "--path", cp.STATUS.path(),
            "--keystore", "/nonexistent.pem", "--truststore", "/nonexistent.crt"]
    seconds = []
    for _ in range(calls):
        started = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=False)
        seconds.append(time.perf_counter() - started)
    return _summary(seconds)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--partitions", type=int, default=3000)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--exec-calls", type=int, default=20)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="readiness-") as tmp:
        cluster = start_cluster(Path(tmp), brokers=1)
        try:
            cluster.create_topic("probe", partitions=args.partitions, timeout=300)
            ready_url = cluster.status()["readiness_url"]["1"]
            status_url = ready_url.removesuffix(cp.READY.path()) + cp.STATUS.path()
            result = {"partitions": args.partitions, "calls": args.calls,
                      "ready": _measure(ready_url, args.calls), "status": _measure(status_url, args.calls),
                      "exec_probe_start": _exec_start(args.exec_calls)}
        finally:
            stop_cluster(cluster)
    save_result("readiness", result)


if __name__ == "__main__":
    main()
