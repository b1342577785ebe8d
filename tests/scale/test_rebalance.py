"""Issue 31's acceptance on a dev cluster: brokers added and drained, replication factors
changed, and a controller failover in the middle of a rebalance, with ``odradek rebalance
--data-dir`` (the controller plans and executes) while the verifier's ``acks=all`` producer
writes, and not one acknowledged record lost.

One module-scoped cluster of 3 brokers and 2 controllers (min.insync.replicas 2): ``moving``
(24 partitions, RF 3) under the verifier's load, after ~0.5 MB of bulk records per partition
(so that a move takes long enough for the throttle's window to fill; the checker is given the
verifier's records only), ``factor`` (4 partitions, RF 2, ~0.5 MB each). The tests run in order: ``odradek dev start 4`` and ``5``, ``--add-brokers 4,5``
under a throttle; ``--remove-brokers 5`` under the same throttle; ``factor`` from RF 2 to 3 with
the active controller killed mid-way (the standby resumes from ZooKeeper) and back to 2; last,
the verifier's checker over a full read. Waits are conditions with deadlines.

The throttle check, from the brokers' metrics (Kafka's LeaderReplication and FollowerReplication
``byte-rate``, bytes/s of throttled replicas over the quota's window): once a second while the
moves run, the busiest throttled direction of any broker (the bottleneck of the copy); its
median within 20% of the throttle (the first seconds read above: printed, not asserted).
"""

from __future__ import annotations

import itertools
import json
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter

import pytest

from odradek.cluster import control_plane_rebalance as cpr
from odradek.cluster.control_plane_http import send_blocking
from odradek.dev.harness import start_cluster, stop_cluster
from odradek.dev.waiting import wait_until
from odradek.verify import History, check
from odradek.verify.reader import read_all
from odradek.verify.workload import make_producers

TOPIC, PARTITIONS = "moving", 24
RF_TOPIC = "factor"
PREFILL_BYTES = 500_000   # per partition of TOPIC and RF_TOPIC
BULK = b"bulk"            # the prefilled records' values start so (not the verifier's)
DEADLINE_S = 300
THROTTLE = 500_000   # bytes/s
RATE = re.compile(r"^kafka_server_(leader|follower)replication_byte_rate\s+([0-9.e+]+)", re.M)


def _argv(cluster, *args: str) -> list[str]:
    return [sys.executable, "-m", "odradek.cli", "rebalance", "--data-dir", str(cluster.data_dir), *args]


def _rebalance(cluster, *args: str) -> str:
    proc = subprocess.run(_argv(cluster, *args), capture_output=True, text=True, timeout=DEADLINE_S,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"rebalance {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _throttles(cluster, brokers) -> list[str]:
    """The throttle configs set dynamically on the topics and on ``brokers``."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resources = [ConfigResource("TOPIC", t) for t in (TOPIC, RF_TOPIC)] + \
        [ConfigResource("BROKER", str(b)) for b in brokers]
    dynamic = (ConfigSource.DYNAMIC_TOPIC_CONFIG.value, ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    return sorted(f"{r.name}:{e.name}={e.value}" for resource in resources   # librdkafka: one broker a call
                  for r, f in admin.describe_configs([resource]).items() for e in f.result(30).values()
                  if "throttled" in e.name and getattr(e.source, "value", e.source) in dynamic and e.value)


def _busiest_rate(cluster, brokers) -> float:
    """The highest throttled byte rate of any broker's leader or follower quota."""
    metrics = json.loads((cluster.data_dir / "cluster.json").read_text())["metrics"]
    rates = [0.0]
    for b in brokers:
        with urllib.request.urlopen(metrics[f"broker-{b}"], timeout=10) as resp:
            rates += [float(v) for _, v in RATE.findall(resp.read().decode())]
    return max(rates)


def _controller_status(cluster) -> dict | None:
    for url in json.loads((cluster.data_dir / "cluster.json").read_text())["controllers"]:
        try:
            code, body = send_blocking(url, cpr.status(), timeout=30)
        except OSError:
            continue
        if code == 200:
            return body
    return None


class Run:
    """``odradek rebalance ... --throttle THROTTLE`` in the background; while it runs, the
    throttle configs seen and the busiest throttled rate, once a second."""

    def __init__(self, cluster, brokers, *args: str) -> None:
        self.cluster, self.brokers, self.args = cluster, brokers, args
        self.proc = subprocess.Popen(_argv(cluster, *args, "--throttle", str(THROTTLE)), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        self.seen: set[str] = set()
        self.rates: list[float] = []

    def sample(self) -> None:
        self.seen.update(_throttles(self.cluster, self.brokers))
        self.rates.append(_busiest_rate(self.cluster, self.brokers))

    def finish(self) -> str:
        deadline = time.monotonic() + DEADLINE_S
        while self.proc.poll() is None and time.monotonic() < deadline:
            self.sample()
            time.sleep(1.0)
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, f"rebalance {self.args} exited {self.proc.returncode}\n{out}\n{err}"
        assert "completed" in out, out
        return out

    def check_throttle(self) -> None:
        assert any(s.endswith(f"follower.replication.throttled.rate={THROTTLE}") for s in self.seen), self.seen
        assert any(".replication.throttled.replicas=" in s for s in self.seen), self.seen
        assert _throttles(self.cluster, self.brokers) == [], "the throttle is removed once the moves are done"
        moving = [r for r in self.rates if r > 0]
        print(f"{self.args}: busiest throttled byte rate while moving: median {statistics.median(moving):.0f} B/s, "
              f"max {max(moving):.0f} B/s for a throttle of {THROTTLE} B/s ({len(moving)} samples)")
        assert len(moving) >= 5, f"the move was too short to measure: {moving}"
        # the first seconds read above (several followers' first fetches of one leader land in
        # one short window): the max is printed, a figure, not asserted
        assert statistics.median(moving) == pytest.approx(THROTTLE, rel=0.2), moving


def _assignment(cluster) -> dict[tuple[str, int], tuple[tuple[int, ...], int, tuple[int, ...]]]:
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=30)
    return {(t.topic, p.id): (tuple(p.replicas), p.leader, tuple(p.isrs))
            for t in md.topics.values() if not t.topic.startswith("__") for p in t.partitions.values()}


def _within_one(counts: Counter, brokers) -> bool:
    values = [counts.get(b, 0) for b in brokers]
    mean = sum(values) / len(values)
    return all(abs(v - mean) < 1 for v in values)


def _balanced(cluster, brokers) -> dict:
    """The assignment once every broker is within one replica and one leader of the mean, every
    partition led by its preferred leader and in sync."""
    def reached():
        a = _assignment(cluster)
        replicas = Counter(itertools.chain.from_iterable(r for r, _, _ in a.values()))
        leaders = Counter(leader for _, leader, _ in a.values())
        synced = all(set(r) == set(isr) and leader == r[0] for r, leader, isr in a.values())
        return a if synced and _within_one(replicas, brokers) and _within_one(leaders, brokers) else None
    return wait_until(reached, DEADLINE_S, f"brokers {list(brokers)} within one replica and one leader of the mean",
                      1.0)


def _prefill(cluster, topic: str, partitions: int) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20})
    value = BULK + b"." * 10_000
    for i in range(partitions * PREFILL_BYTES // len(value)):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(120) == 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("rebalance"), brokers=3, replication_factor=3, min_insync_replicas=2,
                      extra=("--controllers", "2"))
    try:
        for topic, partitions, rf in ((TOPIC, PARTITIONS, 3), (RF_TOPIC, 4, 2)):
            c.create_topic(topic, partitions=partitions, replication_factor=rf)
            c.wait_for_leaders(topic, partitions)
            _prefill(c, topic, partitions)
        yield c
    finally:
        stop_cluster(c)


class Load:
    """The verifier's idempotent acks=all producer on ``TOPIC`` with its history."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.history, self.stop_event = History(), threading.Event()
        self.producers = make_producers(1, ("confluent",), cluster.access, TOPIC, list(range(PARTITIONS)),
                                        self.history, self.stop_event, rate=150.0, idempotent=True)
        for p in self.producers:
            p.start()

    def acked(self) -> int:
        return sum(1 for op in self.history if op.f == "send" and op.type == "ok")

    def stop(self) -> None:
        self.stop_event.set()
        for p in self.producers:
            p.join(120)


@pytest.fixture(scope="module")
def load(cluster):
    load = Load(cluster)
    wait_until(lambda: load.acked() > 500, 120, "the verifier's first 500 acknowledged records", 0.2)
    yield load
    load.stop()


def test_add_brokers(cluster, load):
    for broker in ("4", "5"):
        assert f"broker-{broker} started" in cluster.run("start", broker).stdout
    cluster.refresh()
    assert sorted(cluster.brokers) == [1, 2, 3, 4, 5]
    dry = _rebalance(cluster, "--add-brokers", "4,5", "--dry-run")
    assert "replicas to move" in dry
    assert all(set(r) <= {1, 2, 3} for r, _, _ in _assignment(cluster).values()), "a dry run moves nothing"
    run = Run(cluster, [1, 2, 3, 4, 5], "--add-brokers", "4,5", "--concurrency", "4")
    run.finish()
    run.check_throttle()
    a = _balanced(cluster, [1, 2, 3, 4, 5])
    total = sum(len(r) for r, _, _ in a.values())
    assert sum(4 in r for r, _, _ in a.values()) >= total // 5 and sum(5 in r for r, _, _ in a.values()) >= total // 5


def test_remove_brokers(cluster, load):
    run = Run(cluster, [1, 2, 3, 4, 5], "--remove-brokers", "5", "--concurrency", "4")
    run.finish()
    run.check_throttle()
    a = _balanced(cluster, [1, 2, 3, 4])
    assert not any(5 in r for r, _, _ in a.values()), "broker 5 is drained"


def _factor_is(cluster, factor: int) -> None:
    def changed():
        rs = [(r, isr) for (t, _), (r, _, isr) in _assignment(cluster).items() if t == RF_TOPIC]
        return len(rs) == 4 and all(len(r) == factor and set(r) == set(isr) for r, isr in rs)
    wait_until(changed, DEADLINE_S, f"{RF_TOPIC} at replication factor {factor}, in sync", 1.0)


def test_a_controller_failover_mid_rebalance_resumes_it(cluster, load):
    """RF 2 -> 3 one partition at a time: once the first move is done, the active controller is
    killed; the standby loads the execution from ZooKeeper and finishes it, and the command
    (following the progress) finds the new controller."""
    run = Run(cluster, [1, 2, 3, 4], "--topic", RF_TOPIC, "--replication-factor", "3", "--concurrency", "1")
    status = wait_until(lambda: (s := _controller_status(cluster)) and s["state"] == "executing"
                        and s["moves_done"] >= 1 and s, DEADLINE_S, "the first move of the RF change", 0.2)
    assert status["moves_done"] < status["moves_total"], "the failover comes mid-way"
    cluster.run("kill", "controller")
    out = run.finish()
    _factor_is(cluster, 3)
    final = wait_until(lambda: _controller_status(cluster), 60, "the new active controller's status", 1.0)
    assert final["state"] == "completed" and final["moves_done"] == final["moves_total"] == 4, (final, out)
    assert _throttles(cluster, [1, 2, 3, 4]) == []


def test_replication_factor_down(cluster, load):
    _rebalance(cluster, "--topic", RF_TOPIC, "--replication-factor", "2")
    _factor_is(cluster, 2)


def test_no_acknowledged_record_lost(cluster, load):
    load.stop()
    assert not [p.error for p in load.producers if p.error is not None]
    records, complete, errors = read_all(cluster.access, TOPIC, list(range(PARTITIONS)), timeout=120)
    records = {p: [(o, v) for o, v in rs if not v.startswith(BULK.decode())] for p, rs in records.items()}
    load.history.read("final", records, complete, error="; ".join(errors[:5]) or None)
    report = check(load.history, topic=TOPIC)
    assert report.acked > 500 and not report.problems(), report.summary()
