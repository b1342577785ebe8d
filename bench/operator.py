"""Issue 7's speed figures for the operator, on the test control plane (etcd + kube-apiserver
from ``scripts/k8s``) and a 1-broker dev cluster:

- a topic CR's latency to Ready, measured from the moment the active controller has the topic
  (polled every 20 ms) to the moment the CR's Ready condition is True (watched through the
  API server), for ``--topics`` topics applied one after another; goal <= 2 s each;
- the operator's peak RSS (``VmHWM``) after reconciling a cluster and those topics; goal <= 150 MB.

    python -m bench.operator [--topics 10]

The Kubernetes binaries are built once by ``scripts/k8s/build.sh`` (cached in ``.cache/k8s``).
Writes ``bench/results/operator-<date>.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.side_by_side import RESULTS
from odradek.cluster import control_plane
from odradek.cluster.control_plane_http import call_blocking
from odradek.dev.waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]


def _binary(name: str) -> Path:
    out = subprocess.run([str(ROOT / "scripts/k8s/build.sh"), name], capture_output=True, text=True, check=True)
    return Path(out.stdout.split()[-1])


def _controller_has(url: str, topic: str) -> bool:
    return call_blocking(url, control_plane.cluster(), timeout=5).metadata.topic(topic) is not None


def _ready(k8s, namespace: str, name: str) -> bool:
    from tests.support.k8s import condition
    return (condition(k8s.topic(namespace, name), "Ready") or {}).get("status") == "True"


def measure(workdir: Path, topics: int) -> dict:
    from odradek.dev.harness import start_cluster, stop_cluster
    from tests.support.k8s import K8s, control_plane_module

    plane = control_plane_module.ControlPlane(workdir / "k8s", _binary("kube-apiserver")).start()
    dev = operator = None
    try:
        k8s = K8s(plane.kubeconfig)
        subprocess.run([str(_binary("kubectl")), "apply", "--server-side", "-f", str(ROOT / "crds")], check=True,
                       capture_output=True, env={**os.environ, **plane.env()})
        wait_until(lambda: k8s.get("/apis/odradek.dev/v1alpha1/odradektopics") is not None, 60, "the CRDs", 0.5,
                   retry_on=())
        dev = start_cluster(workdir / "dev", brokers=1)
        status = dev.status()
        log = open(workdir / "operator.log", "ab")
        operator = subprocess.Popen([sys.executable, "-m", "odradek.cli", "operator", "--all-namespaces"],
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, **plane.env(), "ODRADEK_OPERATOR_RETRY_DELAY": "1",
                                         "ODRADEK_OPERATOR_TRUSTED_CONTROLLER_URLS": "http://127.0.0.1"})
        log.close()
        k8s.core.create_namespace({"metadata": {"name": "bench"}})
        k8s.apply_cluster("bench", "dev", {"brokers": {"replicas": 1}, "controller": {"replicas": 1},
                                           "zookeeper": {"external": {"connect": status["zookeeper"]}}},
                          {"odradek.dev/controller-url": status["controller_url"]})
        latencies = []
        for i in range(topics):
            name = f"bench-{i}"
            k8s.apply_topic("bench", name, {"cluster": "dev", "partitions": 3, "replicas": 1})
            # polled every 20 ms, failing at the first error: the time between the two is what is measured
            accepted = wait_until(lambda: _controller_has(status["controller_url"], name) and time.monotonic(), 60,
                                  f"{name} in the controller", 0.02, retry_on=())
            ready = wait_until(lambda: _ready(k8s, "bench", name) and time.monotonic(), 60, f"{name} Ready", 0.02,
                               retry_on=())
            latencies.append(round(ready - accepted, 3))
        rss = _vm_hwm_mb(operator.pid)
        return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "topics": topics, "ready_after_controller_s": latencies,
                "ready_p50_s": round(statistics.median(latencies), 3), "ready_max_s": max(latencies),
                "operator_peak_rss_mb": round(rss, 1), "goals": {"ready_s": 2.0, "rss_mb": 150}}
    finally:
        if operator is not None:
            control_plane_module.terminate(operator, 15)
        if dev is not None:
            stop_cluster(dev, strict=False)
        plane.stop()


def _vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topics", type=int, default=10)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="odradek-bench-operator-") as tmp:
        result = measure(Path(tmp), args.topics)
    print(json.dumps(result, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"operator-{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d-%H%M}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
