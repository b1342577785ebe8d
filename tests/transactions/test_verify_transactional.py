"""Acceptance of transactions through ``odradek verify --transactional``: RF=3,
min.insync.replicas=2, transactional producers (transactions of 20 values, every 7th aborted),
SIGKILLs of partition leaders and of random brokers (transaction coordinators among them),
read_committed reads: no committed value lost, no aborted value ever read (a phantom), none
duplicated or reordered. ``VERIFY_SEED=N`` replays a run's choices; CI runs 2 faults (the
whole area's time budget), ``ODRADEK_VERIFY_TXN_KILLS=N`` runs more (6 faults: ~6 min)."""

from __future__ import annotations

import os
import random

import pytest

from odradek.dev.harness import start_cluster, stop_cluster
from odradek.verify import Config, run

KILLS = int(os.environ.get("ODRADEK_VERIFY_TXN_KILLS", "2"))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_kills_with_transactional_producers_lose_nothing_and_show_no_aborted_value(tmp_path):
    seed = int(os.environ.get("VERIFY_SEED", random.randrange(1 << 30)))
    print(f"VERIFY_SEED={seed}")
    cluster = start_cluster(tmp_path / "cluster", brokers=3)
    try:
        cfg = Config(data_dir=cluster.data_dir, partitions=6, replication_factor=3, min_insync=2,
                     producers=2, clients=("confluent",), rate=50, kills=KILLS, faults=("leader", "broker"),
                     interval=1.0, downtime=1.0, settle=10.0, seed=seed, out=tmp_path / "verify", transactional=True)
        report, _ = run(cfg)
    finally:
        stop_cluster(cluster)
    summary = report.summary(True)
    print(summary)
    assert sum(report.faults.values()) == KILLS, summary
    assert report.acked > 100 and report.failed > 20, summary   # committed and aborted transactions
    assert report.lost == [], summary
    assert report.phantom == [], summary
    assert report.duplicated == [], summary
    assert report.reordered == [], summary
    assert report.problems(True) == [], summary
