"""Issue 31's acceptance on a dev cluster: brokers added and drained, and replication factors
changed, with ``odradek rebalance`` while an ``acks=all`` producer writes, and not one
acknowledged record lost.

One module-scoped cluster of 3 brokers (min.insync.replicas 2) with 24 partitions at RF 3;
the tests run in order: ``odradek dev start 4`` and ``5`` add brokers, ``--add-brokers 4,5``
leaves every broker within one replica and one leader of the mean; ``--remove-brokers 5``
drains broker 5 with the same checks on the four left; a topic goes from RF 2 to 3 and back;
last, every acknowledged record is read back at its offset. Waits are conditions with
deadlines.
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

from odradek.dev.harness import start_cluster, stop_cluster
from odradek.dev.waiting import wait_until

TOPIC, PARTITIONS = "moving", 24
RF_TOPIC = "factor"
DEADLINE_S = 300
THROTTLE = 400_000   # bytes/s: a move of several seconds, so that the quota's window fills
FOLLOWER_RATE = re.compile(r"^kafka_server_followerreplication_byte_rate\s+([0-9.e+]+)", re.M)


class Load:
    """An idempotent ``acks=all`` producer writing to every partition until stopped; keeps each
    acknowledged record's (partition, offset) -> value."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5})
        self.acked: dict[tuple[int, int], bytes] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked[(msg.partition(), msg.offset())] = msg.value()

    def _run(self) -> None:
        for i in itertools.count():
            if self._stop.is_set():
                break
            self.producer.produce(TOPIC, value=b"%08d" % i + b"." * 1000, partition=i % PARTITIONS,
                                  on_delivery=self._delivered)
            self.producer.poll(0.005)   # ~200 records/s: a load, not a benchmark, on 2 shared cores
        self.producer.flush(60)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)


def _argv(cluster, *args: str) -> list[str]:
    return [sys.executable, "-m", "odradek.cli", "rebalance", "--data-dir", str(cluster.data_dir), *args]


def _rebalance(cluster, *args: str) -> str:
    proc = subprocess.run(_argv(cluster, *args), capture_output=True, text=True, timeout=DEADLINE_S,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"rebalance {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _throttles(cluster, brokers) -> list[str]:
    """The throttle configs set dynamically on ``TOPIC`` and on ``brokers``."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resources = [ConfigResource("TOPIC", TOPIC)] + [ConfigResource("BROKER", str(b)) for b in brokers]
    dynamic = (ConfigSource.DYNAMIC_TOPIC_CONFIG.value, ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    return sorted(f"{r.name}:{e.name}={e.value}" for resource in resources   # librdkafka: one broker a call
                  for r, f in admin.describe_configs([resource]).items() for e in f.result(30).values()
                  if "throttled" in e.name and getattr(e.source, "value", e.source) in dynamic and e.value)


def _follower_rates(cluster, brokers) -> list[float]:
    metrics = json.loads((cluster.data_dir / "cluster.json").read_text())["metrics"]
    rates = []
    for b in brokers:
        with urllib.request.urlopen(metrics[f"broker-{b}"], timeout=10) as resp:
            rates += [float(v) for v in FOLLOWER_RATE.findall(resp.read().decode())]
    return rates


def _rebalance_throttled(cluster, *args: str) -> tuple[str, list[str], list[float]]:
    """The rebalance with ``--throttle THROTTLE``; while it runs, the throttle configs seen and the
    new brokers' throttled follower byte rates (Kafka's FollowerReplication byte-rate), once a second."""
    proc = subprocess.Popen(_argv(cluster, *args, "--throttle", str(THROTTLE)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    seen: set[str] = set()
    rates: list[float] = []
    deadline = time.monotonic() + DEADLINE_S
    while proc.poll() is None and time.monotonic() < deadline:
        seen.update(_throttles(cluster, [4, 5]))
        rates += [r for r in _follower_rates(cluster, [4, 5]) if r > 0]
        time.sleep(1.0)
    out, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 0, f"rebalance {' '.join(args)} exited {proc.returncode}\n{out}\n{err}"
    return out, sorted(seen), rates


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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("rebalance"), brokers=3, replication_factor=3, min_insync_replicas=2)
    try:
        c.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        c.create_topic(RF_TOPIC, partitions=4, replication_factor=2)
        c.wait_for_leaders(TOPIC, PARTITIONS)
        c.wait_for_leaders(RF_TOPIC, 4)
        yield c
    finally:
        stop_cluster(c)


@pytest.fixture(scope="module")
def load(cluster):
    load = Load(cluster.bootstrap)
    wait_until(lambda: len(load.acked) > 2000, 120, "the producer's first 2000 acknowledged records", 0.2)
    yield load
    load.stop()


def test_add_brokers(cluster, load):
    for broker in ("4", "5"):
        out = cluster.run("start", broker).stdout
        assert f"broker-{broker} started" in out
    cluster.refresh()
    assert sorted(cluster.brokers) == [1, 2, 3, 4, 5]
    dry = _rebalance(cluster, "--add-brokers", "4,5", "--dry-run")
    assert "replicas to move" in dry
    assert all(set(r) <= {1, 2, 3} for r, _, _ in _assignment(cluster).values()), "a dry run moves nothing"
    out, seen, rates = _rebalance_throttled(cluster, "--add-brokers", "4,5", "--concurrency", "4")
    assert "done:" in out
    assert f"4:follower.replication.throttled.rate={THROTTLE}" in seen, seen
    assert any(s.startswith(f"{TOPIC}:follower.replication.throttled.replicas=") for s in seen), seen
    assert _throttles(cluster, [1, 2, 3, 4, 5]) == [], "the throttle is removed once the moves are done"
    # the throttle holds: the throttled followers' byte rate (Kafka's, over the quota's window)
    # sampled while moving, within +20% of it at the median; a window's first seconds may read
    # above (the max is printed); how far below depends on the machine: a figure, not asserted
    assert rates and statistics.median(rates) <= 1.2 * THROTTLE, rates
    print(f"throttled follower byte rate while moving: median {statistics.median(rates):.0f} B/s, "
          f"max {max(rates):.0f} B/s for a throttle of {THROTTLE} B/s ({len(rates)} samples)")
    a = _balanced(cluster, [1, 2, 3, 4, 5])
    assert sum(4 in r for r, _, _ in a.values()) >= 14 and sum(5 in r for r, _, _ in a.values()) >= 14


def test_remove_brokers(cluster, load):
    _rebalance(cluster, "--remove-brokers", "5")
    a = _balanced(cluster, [1, 2, 3, 4])
    assert not any(5 in r for r, _, _ in a.values()), "broker 5 is drained"


@pytest.mark.parametrize("factor", [3, 2])
def test_replication_factor(cluster, load, factor):
    _rebalance(cluster, "--topic", RF_TOPIC, "--replication-factor", str(factor))

    def changed():
        rs = [(r, isr) for (t, _), (r, _, isr) in _assignment(cluster).items() if t == RF_TOPIC]
        return len(rs) == 4 and all(len(r) == factor and set(r) == set(isr) for r, isr in rs)
    wait_until(changed, DEADLINE_S, f"{RF_TOPIC} at replication factor {factor}, in sync", 1.0)


def test_no_acknowledged_record_lost(cluster, load):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    load.stop()
    assert not load.errors, load.errors[:5]
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "rebalance-check",
                         "enable.auto.commit": False, "auto.offset.reset": "error"})
    got: dict[tuple[int, int], bytes] = {}
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])

        def read_all():
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                if m.error() is None:
                    got[(m.partition(), m.offset())] = m.value()
            return set(load.acked) <= set(got)
        wait_until(read_all, DEADLINE_S, f"{len(load.acked)} acknowledged records read back", 0)
    finally:
        consumer.close()
    lost = [k for k, v in load.acked.items() if got.get(k) != v]
    assert not lost, f"{len(lost)} acknowledged records lost or changed, first {sorted(lost)[:5]}"
