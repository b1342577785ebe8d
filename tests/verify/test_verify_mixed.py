"""Acceptance of issue 15's nemeses through ``odradek verify --nemesis mixed``: a 3-broker
cluster in a network namespace of its own (``odradek dev up --netns``, so the partition
nemesis can cut a broker off), RF=3, min.insync.replicas=2, idempotent acks=all producers,
one fault of each kind (kill, pause, zk-kill, zk-pause, controller-pause, disk-full on a tmpfs
the run mounts, partition): 0 lost, 0 duplicated, 0 reordered, 0 phantom, 0 inconsistent,
and afterwards no tmpfs, namespace or rule of the run left.

The run is the command itself (a subprocess: it enters the cluster's namespace); needs root,
as mounting and network namespaces do. ``VERIFY_SEED=N`` replays a run's choices.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from odradek.dev import netns
from odradek.dev.harness import start_cluster, stop_cluster
from odradek.verify.faults import NEMESES

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs and network namespaces need root")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_mixed_nemesis_loses_duplicates_and_reorders_nothing(tmp_path):
    seed = int(os.environ.get("VERIFY_SEED", random.randrange(1 << 30)))
    print(f"VERIFY_SEED={seed}")
    cluster = start_cluster(tmp_path / "cluster", brokers=3, extra=("--netns",))
    name = json.loads((cluster.data_dir / "cluster.json").read_text())["netns"]
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "odradek.cli", "verify", "--data-dir", str(cluster.data_dir),
             "--nemesis", "mixed", "--kills", str(len(NEMESES)), "--idempotent", "--json",
             "--partitions", "3", "--producers", "2", "--rate", "50", "--interval", "0.5", "--downtime", "1",
             "--settle", "2", "--seed", str(seed), "--out", str(tmp_path / "verify")],
            capture_output=True, text=True, timeout=540, stdin=subprocess.DEVNULL)
        mounts = [line for line in open("/proc/mounts") if "odradek-verify-" in line]
    finally:
        stop_cluster(cluster)
    assert proc.returncode in (0, 1), proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    summary = json.dumps({k: report[k] for k in ("faults", "acked", "per_nemesis", "problems", "unrecovered")})
    assert report["faults"] == dict.fromkeys(NEMESES, 1), summary
    assert report["acked"] > 500, summary
    for anomaly in ("lost", "duplicated", "reordered", "phantom", "inconsistent"):
        assert report[anomaly]["count"] == 0, (anomaly, report[anomaly]["examples"][:3], summary)
    assert report["problems"] == [], summary
    assert report["unrecovered"] == [], summary
    assert set(report["per_nemesis"]) <= set(NEMESES) | {"none"}, summary
    assert mounts == [], mounts
    assert not netns.path(name).exists(), f"namespace {name} left after `odradek dev down`"
