"""SIGTERM with ZooKeeper and the controller both gone: the broker's controlled shutdown fails
``controlled.shutdown.max.retries`` times, ``controlled.shutdown.retry.backoff.ms`` apart, then
the broker shuts down anyway as Kafka's does ("unclean": leaderships not moved) with its logs
flushed and its clean-shutdown marker written, so a restart needs no recovery. Deregistering
from the unreachable ZooKeeper is bounded (it used to wait until SIGKILL)."""

from __future__ import annotations

import os
import signal
import time

from confluent_kafka import Producer

from odradek.broker.server import CONTROLLED_SHUTDOWN_TIMEOUT_S
from odradek.broker.storage.manager import CLEAN_SHUTDOWN_FILE
from odradek.broker.zk.session import STOP_TIMEOUT_S
from odradek.config import BROKER_CONFIGS
from odradek.dev import processes
from odradek.dev.harness import start_cluster, stop_cluster
from odradek.dev.processes import ProcessRecord
from odradek.dev.waiting import wait_until

RETRIES = BROKER_CONFIGS["controlled.shutdown.max.retries"].typed_default
BACKOFF_S = BROKER_CONFIGS["controlled.shutdown.retry.backoff.ms"].typed_default / 1000
LOADED_MACHINE_S = 20.0  # closing the logs and the process's exit on a busy 2-core CI machine
# every attempt fails after its timeout (the controller is unreachable), the attempts a backoff apart
SHUTDOWN_BOUND_S = RETRIES * max(BACKOFF_S, CONTROLLED_SHUTDOWN_TIMEOUT_S) + STOP_TIMEOUT_S + LOADED_MACHINE_S


def _live(cluster, name: str) -> ProcessRecord:
    """The running process ``name`` (from the cluster's state file: no CLI start-up to wait for)."""
    return next(r for r in cluster.leftovers() if r.name == name)


def _kill(cluster, *names: str) -> None:
    records = [_live(cluster, name) for name in names]
    for rec in records:
        os.kill(rec.pid, signal.SIGKILL)
    wait_until(lambda: not any(processes.alive(r) for r in records), 30, f"{', '.join(names)} to die")


def test_sigterm_without_zookeeper_and_controller_exits_in_bound_and_reopens_cleanly(tmp_path):
    cluster = start_cluster(tmp_path / "dev", brokers=1)
    try:
        cluster.create_topic("kept", partitions=2)
        producer = Producer({"bootstrap.servers": cluster.bootstrap})
        for i in range(200):
            producer.produce("kept", value=f"v{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0
        del producer  # its reconnection attempts would fill the test's output
        broker = _live(cluster, "broker-1")
        _kill(cluster, "controller-0", "zookeeper")
        log_path = tmp_path / "dev" / "logs" / "broker-1.log"
        wait_until(lambda: "ZooKeeper connection lost" in log_path.read_text(), 30, "the broker to notice")

        started = time.monotonic()
        os.kill(broker.pid, signal.SIGTERM)
        wait_until(lambda: not processes.alive(broker), SHUTDOWN_BOUND_S + 10, "broker 1 to exit after SIGTERM", 0.1)
        elapsed = time.monotonic() - started
        log = log_path.read_text()
        assert elapsed <= SHUTDOWN_BOUND_S, f"exited after {elapsed:.1f} s\n{log[-3000:]}"
        assert "proceeding to an unclean shutdown" in log
        assert (tmp_path / "dev" / "broker-1" / CLEAN_SHUTDOWN_FILE).exists(), log[-3000:]

        since = len(log)
        cluster.run("start", "1")  # returns once its logs are open, before it needs ZooKeeper
        reopened = log_path.read_text()[since:]
        assert "loaded 2 logs from" in reopened and "(clean shutdown)" in reopened, reopened
        assert "truncated" not in reopened and "rebuilding the indexes" not in reopened, reopened
        _kill(cluster, "broker-1")  # it would wait for ZooKeeper: nothing more to see
    finally:
        stop_cluster(cluster)
