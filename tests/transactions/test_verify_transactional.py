"""Acceptance of transactions through ``odradek verify --transactional``: RF=3,
min.insync.replicas=2, transactional producers (transactions of 20 values, every 7th aborted)
and a consume-transform-produce copier (offsets sent to its transactions), SIGKILLs of a
partition leader and of a transaction coordinator (FindCoordinator key type 1),
read_committed reads: no committed value lost, no aborted value ever read (a phantom), none
duplicated or reordered, the copier's committed offsets exactly those of its committed output.
``VERIFY_SEED=N`` replays a run's choices; CI runs 2 faults (the whole area's time budget),
``ODRADEK_VERIFY_TXN_KILLS=N`` runs more (6 faults: ~6 min)."""

from __future__ import annotations

import os
import random

import pytest

from odradek.dev.harness import start_cluster, stop_cluster
from odradek.verify import Config, run
from odradek.verify.copier import check_copy

KILLS = int(os.environ.get("ODRADEK_VERIFY_TXN_KILLS", "2"))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_kills_with_transactional_producers_lose_nothing_and_show_no_aborted_value(tmp_path):
    seed = int(os.environ.get("VERIFY_SEED", random.randrange(1 << 30)))
    print(f"VERIFY_SEED={seed}")
    # 10 s ZooKeeper sessions, as the other verify runs in CI (Kafka's default is 18 s): a SIGKILLed
    # broker stays registered, and its restart waits, that long
    cluster = start_cluster(tmp_path / "cluster", brokers=3, extra=("--config", "zookeeper.session.timeout.ms=10000"))
    try:
        cfg = Config(data_dir=cluster.data_dir, partitions=6, replication_factor=3, min_insync=2,
                     producers=2, clients=("confluent",), rate=50, kills=KILLS, faults=("leader", "coordinator"),
                     interval=1.0, downtime=1.0, settle=10.0, seed=seed, out=tmp_path / "verify", transactional=True,
                     session_timeout=10.0)
        report, _ = run(cfg)
    finally:
        stop_cluster(cluster)
    summary = report.summary(True)
    print(summary)
    assert sum(report.faults.values()) == KILLS, summary
    assert report.faults.get("coordinator") == KILLS // 2, summary
    assert report.acked > 100 and report.failed > 20, summary   # committed and aborted transactions
    assert report.lost == [], summary
    assert report.phantom == [], summary
    assert report.duplicated == [], summary
    assert report.reordered == [], summary
    assert report.copied > 100 and report.copier["aborted"] > 0 and report.copier["caught_up"], summary
    assert report.copy == [], summary
    assert report.problems(True) == [], summary


# -- the copy check on its own (no cluster) ----------------------------------------------------
INPUTS = {0: [(0, "a"), (1, "b"), (3, "c")], 1: [(0, "d")]}   # offset 2: an aborted record or a marker


def test_a_copy_committed_with_its_offsets_passes():
    outputs = {0: [(0, "0:0"), (5, "0:1"), (9, "0:3")], 1: [(0, "1:0")]}
    assert check_copy(INPUTS, outputs, {0: 4, 1: 1}) == []


def test_the_copy_check_finds_each_kind_of_anomaly():
    whats = lambda outputs, committed: sorted(a["what"] for a in check_copy(INPUTS, outputs, committed))  # noqa: E731
    # the offsets moved past an input whose output is missing (offsets committed without output)
    assert "input below the committed offset without output" in whats({0: [(0, "0:0"), (1, "0:3")],
                                                                      1: [(0, "1:0")]}, {0: 4, 1: 1})
    # an output whose input's offset was not committed (output committed without its offsets)
    assert whats({0: [(0, "0:0"), (1, "0:1"), (2, "0:3")], 1: [(0, "1:0")]}, {0: 2, 1: 1}) == [
        "committed offset does not count the committed outputs", "committed offset short of the input's last record",
        "output of an input at or past the committed offset"]
    # an input copied twice
    assert "output duplicated" in whats({0: [(0, "0:0"), (1, "0:1"), (2, "0:1"), (3, "0:3")],
                                         1: [(0, "1:0")]}, {0: 4, 1: 1})
    # an output of an offset that holds no committed input (an aborted input copied)
    assert "output of no committed input record" in whats({0: [(0, "0:0"), (1, "0:1"), (2, "0:2"), (3, "0:3")],
                                                           1: [(0, "1:0")]}, {0: 4, 1: 1})
