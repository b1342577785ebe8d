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
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.dev import netns
from odradek.dev.harness import start_cluster, stop_cluster
from odradek.verify.faults import NEMESES

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs and network namespaces need root")

RUN_TIMEOUT_S = 720  # ~100 s on a quiet machine; 10 minutes once at a load average of 30
SESSION_TIMEOUT_S = 10


def run_verify(argv: list[str]) -> tuple[int, str, str]:
    """The command, stopped with SIGTERM past the deadline (it then removes its tmpfs and rules)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        pytest.fail(f"odradek verify still running after {RUN_TIMEOUT_S}s:\n{err[-4000:]}")
    return proc.returncode, out, err


def run_mounts(under: Path) -> list[str]:
    """Mount points of the run's tmpfs under ``under`` (``odradek-verify-...``)."""
    return [line.split()[1] for line in open("/proc/mounts")
            if line.startswith("odradek-verify-") and line.split()[1].startswith(str(under))]


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 240)
def test_mixed_nemesis_loses_duplicates_and_reorders_nothing(tmp_path):
    seed = int(os.environ.get("VERIFY_SEED", random.randrange(1 << 30)))
    print(f"VERIFY_SEED={seed}")
    # brokers' ZooKeeper sessions of 10 s (Kafka's 18 s default would stretch every pause and cut-off,
    # which scale with it, by 80%); verify is told the same with --session-timeout
    cluster = start_cluster(tmp_path / "cluster", brokers=3,
                            extra=("--netns", "--config", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_S * 1000}"))
    name = json.loads((cluster.data_dir / "cluster.json").read_text())["netns"]
    try:
        code, out, err = run_verify(
            [sys.executable, "-m", "odradek.cli", "verify", "--data-dir", str(cluster.data_dir),
             "--nemesis", "mixed", "--kills", str(len(NEMESES)), "--idempotent", "--json",
             "--partitions", "3", "--producers", "2", "--rate", "50", "--interval", "0.5", "--downtime", "1",
             "--settle", "2", "--session-timeout", str(SESSION_TIMEOUT_S), "--seed", str(seed),
             "--out", str(tmp_path / "verify")])
    finally:
        mounts = run_mounts(tmp_path)
        for path in mounts:  # a run that could not clean up: do not leave its tmpfs behind
            subprocess.run(["umount", "-l", path], check=False)
        stop_cluster(cluster)
    assert code in (0, 1), err[-4000:]
    report = json.loads(out)
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
