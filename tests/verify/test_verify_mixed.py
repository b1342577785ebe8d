"""Acceptance of issue 15's nemeses, of the replication issue and of the idempotent producer,
in one ``odradek verify`` run under one nemesis on one cluster: 3 brokers and 2 controllers in a
network namespace of their own (``odradek dev up --netns``, so the partition nemesis can cut a
broker off), RF=3, min.insync.replicas=2, acks=all, five producers side by side
(confluent-kafka and kafka-python; three plain, one idempotent of each client), one fault of
each kind: issue 15's seven (kill: a partition leader SIGKILLed; pause, zk-kill, zk-pause,
controller-pause, disk-full on a tmpfs the run mounts, partition) and the replication issue's
SIGKILLs of the active controller (the standby takes over) and of a random broker, each
restarted. Every producer: 0 lost, 0 phantom, 0 inconsistent offsets; 0 reordered for the
producers whose client keeps order (idempotent ones, plain kafka-python: a plain librdkafka
producer's own reorders are reported as its client's, docs/verify.md); the idempotent ones 0
duplicated (their duplicates fail the run, ``Report.idempotent_producers``), the plain ones'
duplicates from retries are reported, not failed. Afterwards no tmpfs, namespace or rule of
the run is left.

It replaced two runs of two clusters (the seven-kind mixed run and the leader/controller/broker
kill run, 121 + 120 s in the 2026-11-29 full run). Leaders are killed in the secured and
transactional runs as well; ``ODRADEK_VERIFY_ROUNDS=N`` deals the deck N times (5: the
replication issue's 20 leader SIGKILLs, pauses and cut-offs), and ``odradek verify`` runs
hundreds outside CI (docs/verify.md).

The run is the command itself (a subprocess: it enters the cluster's namespace); needs root,
as mounting and network namespaces do. ``VERIFY_SEED=N`` replays a run's choices; the history
and the report are kept under the test's tmp_path (``verify/``).
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

ROUNDS = int(os.environ.get("ODRADEK_VERIFY_ROUNDS", "1"))
DECK = (*NEMESES, "controller", "broker")   # one round: each of the nine kinds once
IDEMPOTENT = ["confluent-4", "kafka-python-3"]   # the last two of five producers
RUN_TIMEOUT_S = 900 * ROUNDS  # 200-246 s at a load average of 5-7 (2026-11-29); 7 faults took 10 min once at 30
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
def test_every_nemesis_loses_nothing_and_idempotent_producers_duplicate_and_reorder_nothing(tmp_path):
    seed = int(os.environ.get("VERIFY_SEED", random.randrange(1 << 30)))
    print(f"VERIFY_SEED={seed}")
    # brokers' ZooKeeper sessions of 10 s (Kafka's 18 s default would stretch every pause and cut-off,
    # which scale with it, by 80%, and a SIGKILLed broker's restart waits for its old session to
    # expire); verify is told the same with --session-timeout
    cluster = start_cluster(tmp_path / "cluster", brokers=3, extra=(
        "--netns", "--controllers", "2", "--config", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_S * 1000}"))
    name = json.loads((cluster.data_dir / "cluster.json").read_text())["netns"]
    try:
        code, out, err = run_verify(
            [sys.executable, "-m", "odradek.cli", "verify", "--data-dir", str(cluster.data_dir),
             "--nemesis", ",".join(DECK), "--kills", str(ROUNDS * len(DECK)), "--json",
             "--partitions", "3", "--producers", "5", "--idempotent-producers", str(len(IDEMPOTENT)),
             "--clients", "confluent,kafka-python", "--rate", "50", "--interval", "0.5", "--downtime", "1",
             "--settle", "2", "--session-timeout", str(SESSION_TIMEOUT_S), "--seed", str(seed),
             "--out", str(tmp_path / "verify")])
    finally:
        mounts = run_mounts(tmp_path)
        for path in mounts:  # a run that could not clean up: do not leave its tmpfs behind
            subprocess.run(["umount", "-l", path], check=False)
        stop_cluster(cluster)
    assert code in (0, 1), err[-4000:]
    report = json.loads(out)
    summary = json.dumps({k: report[k] for k in ("faults", "acked", "per_producer", "per_nemesis", "problems",
                                                 "unrecovered", "duplicated", "reordered_by_client")})
    assert report["faults"] == dict.fromkeys(DECK, ROUNDS), summary
    assert report["idempotent_producers"] == IDEMPOTENT, summary
    assert report["acked"] > 1500, summary
    for anomaly in ("lost", "reordered", "phantom", "inconsistent", "duplicated_by_idempotent"):
        assert report[anomaly]["count"] == 0, (anomaly, report[anomaly]["examples"][:3], summary)
    assert report["problems"] == [], summary
    assert report["unrecovered"] == [], summary  # every restarted broker rejoined every ISR
    assert set(report["per_nemesis"]) <= set(DECK) | {"none"}, summary
    for producer in IDEMPOTENT:  # each idempotent producer had its share acknowledged
        assert report["per_producer"][producer]["ok"] > 100, summary
    assert mounts == [], mounts
    assert not netns.path(name).exists(), f"namespace {name} left after `odradek dev down`"
