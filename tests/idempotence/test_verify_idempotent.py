"""Acceptance of the idempotent producer through ``odradek verify --idempotent``: RF=3,
min.insync.replicas=2, acks=all, idempotent producers (confluent-kafka and kafka-python),
SIGKILLs of partition leaders: 0 lost, 0 reordered and 0 duplicated (duplicates fail the run).
``VERIFY_SEED=N`` replays a run's choices. CI runs 4 kills with 10 s ZooKeeper sessions (a
killed broker's restart waits for its session to expire: Kafka's 18 s default made this one
test 3 minutes); ``ODRADEK_VERIFY_KILLS=N`` runs more."""

from __future__ import annotations

import os
import random

import pytest

from odradek.dev.harness import start_cluster, stop_cluster
from odradek.verify import Config, run

KILLS = int(os.environ.get("ODRADEK_VERIFY_KILLS", "4"))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_leader_kills_with_idempotent_producers_lose_and_duplicate_nothing(tmp_path):
    seed = int(os.environ.get("VERIFY_SEED", random.randrange(1 << 30)))
    print(f"VERIFY_SEED={seed}")
    cluster = start_cluster(tmp_path / "cluster", brokers=3, extra=("--config", "zookeeper.session.timeout.ms=10000"))
    try:
        cfg = Config(data_dir=cluster.data_dir, partitions=6, replication_factor=3, min_insync=2,
                     producers=2, clients=("confluent", "kafka-python"), rate=50, kills=KILLS,
                     faults=("leader",), interval=1.0, downtime=1.0, seed=seed, out=tmp_path / "verify",
                     idempotent=True, session_timeout=10.0)
        report, _ = run(cfg)
    finally:
        stop_cluster(cluster)
    summary = report.summary(True)
    print(summary)
    assert report.faults == {"leader": KILLS}, summary
    assert report.acked > 500, summary
    assert report.lost == [], summary
    assert report.duplicated == [], summary
    assert report.reordered == [], summary
    assert report.problems(True) == [], summary
