"""Partition scale at CI size (issue 21): 3 brokers, 2 controllers, 3,000 partitions at RF 3.

One module-scoped dev cluster; the tests run in order, each leaving the cluster whole for the
next: every partition led with a full ISR; a controlled shutdown moves every leadership off
a broker while a producer writes to partitions it led and sees no error; the broker
restarted rejoins every ISR; the active controller killed together with a broker, the standby
takes over and every partition is led again, then both come back and every ISR is full.
Waits are on conditions with deadlines (generous: the CI machine is loaded).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from bench.scale import every_full, every_led, view
from odradek.dev.harness import start_cluster, stop_cluster
from odradek.dev.waiting import wait_until

TOPICS, PARTITIONS, RF = 30, 100, 3
TOTAL = TOPICS * PARTITIONS
NAMES = [f"scale-{i:03d}" for i in range(TOPICS)]
DEADLINE_S = 120
PRODUCED = 100  # partitions of broker 2 written to across its controlled shutdown
# ZooKeeper sessions of 10 s (as the verify clusters'), controllers' and brokers': how long a
# SIGKILLed controller's /controller and broker's registration outlive them
SESSION = "zookeeper.session.timeout.ms=10000"


class Probe:
    """``view`` over this module's topics, for ``wait_until``."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap

    def admin(self):
        from confluent_kafka.admin import AdminClient
        return AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 60000})

    def wait(self, ok, what: str, timeout: float = DEADLINE_S) -> dict:
        def reached() -> dict | None:
            v = view(self, NAMES)
            return v if ok(v) else None
        return wait_until(reached, timeout, what, 0.5)


@pytest.fixture(scope="module")
def scale(tmp_path_factory) -> Probe:
    c = start_cluster(tmp_path_factory.mktemp("scale"), brokers=3, replication_factor=RF, min_insync_replicas=2,
                      extra=("--controllers", "2", "--config", SESSION, "--controller-config", SESSION))
    try:
        yield Probe(c)
    finally:
        stop_cluster(c)


def _pid(cluster, name: str) -> int:
    return cluster.pids[name]


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_every_partition_led_with_full_isr(scale):
    from confluent_kafka.admin import NewTopic
    admin = scale.admin()
    futures = admin.create_topics([NewTopic(n, num_partitions=PARTITIONS, replication_factor=RF) for n in NAMES],
                                  request_timeout=60, operation_timeout=60)
    for name, fut in futures.items():
        fut.result(timeout=90)
    v = scale.wait(every_full(TOTAL), f"{TOTAL} partitions led with a full ISR")
    assert sorted(v["leaders"]) == [1, 2, 3]


def _led_by(scale, broker: int) -> list[tuple[str, int]]:
    md = scale.admin().list_topics(timeout=60)
    return [(name, p.id) for name in NAMES for p in md.topics[name].partitions.values() if p.leader == broker]


def test_controlled_shutdown_moves_every_leadership_without_client_errors(scale):
    """A producer writes to partitions broker 2 leads, before and while it shuts down: every
    record is acknowledged, none fails (NOT_LEADER_OR_FOLLOWER during the handover is retried
    inside the client, as with Kafka); afterwards broker 2 leads nothing and said so before
    exiting. acks=all, min.insync.replicas 2."""
    from confluent_kafka import Producer
    cluster = scale.cluster
    led = _led_by(scale, 2)
    assert len(led) > TOTAL // 6, f"broker 2 leads only {len(led)} partitions"
    watched = led[::max(1, len(led) // PRODUCED)]
    errors, delivered = [], []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 120000})

    def report(err, msg):
        (errors if err is not None else delivered).append(err or msg.partition())

    def produce_round() -> None:
        for name, p in watched:
            producer.produce(name, b"v", partition=p, on_delivery=report)
        producer.poll(0)

    produce_round()
    assert producer.flush(DEADLINE_S) == 0, "records left undelivered before the shutdown"
    log = Path(cluster.data_dir) / "logs" / "broker-2.log"
    since = log.stat().st_size
    pid = _pid(cluster, "broker-2")
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + DEADLINE_S
    while not _gone(pid):  # keep producing while the broker hands its leaderships over
        assert time.monotonic() < deadline, "broker 2 did not finish its controlled shutdown"
        if len(producer) == 0:  # the previous round is delivered: the next one
            produce_round()
        producer.poll(0.2)
    produce_round()
    assert producer.flush(DEADLINE_S) == 0, "records left undelivered"
    assert errors == [], errors[:5]
    text = log.read_text(errors="replace")[since:]
    assert "controlled shutdown done: no leaderships left here" in text, text[-2000:]
    assert 2 not in view(scale, NAMES)["leaders"]


def test_restarted_broker_rejoins_every_isr(scale):
    scale.cluster.run("start", "2")
    scale.wait(every_full(TOTAL), "broker 2 back in every ISR")


def test_controller_failover_with_a_broker(scale):
    cluster = scale.cluster
    first = cluster.status()["controller_url"]
    pid3 = _pid(cluster, "broker-3")
    cluster.run("kill", "controller")  # SIGKILL the active controller ...
    os.kill(pid3, signal.SIGKILL)  # ... and a broker with it
    wait_until(lambda: _gone(pid3), 10, "broker 3 to die")
    v = scale.wait(lambda v: every_led(TOTAL)(v) and 3 not in v["leaders"],
                   "every partition led again by a live broker")
    assert set(v["leaders"]) <= {1, 2}
    now = cluster.status()["controller_url"]
    assert now and now != first, "the standby did not take over"
    dead = [n for n in ("controller-0", "controller-1") if n not in cluster.pids]
    for name in [*dead, "3"]:
        cluster.run("start", name)
    scale.wait(every_full(TOTAL), "every ISR full again after the restarts")
