"""Acceptance of the brokers' and controllers' /metrics (issue 19) with a real Prometheus server
(Debian's package) scraping a dev cluster of 3 brokers and 2 controllers every second, and
PromQL answering, as a platform team's dashboards and alerts would ask:

- the active controller count sums to 1; 0 while the active one is dead and its ZooKeeper
  session not yet expired (a failover), then 1 again;
- bytes in grows by what a produce sent (within 5%: the batch headers);
- a group's lag equals its unconsumed records;
- under-replicated partitions > 0 after a broker is killed, back to 0 after its restart;
- every query of the chart's Grafana dashboard names only metrics a scrape exports;
- ``odradek top`` in a real terminal (tmux) shows the brokers and a URP change.

One cluster and one Prometheus for the module; the tests run in file order (the controller
failover last: it leaves one controller).
"""

from __future__ import annotations

import re
import sys
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.dev.harness import start_cluster, stop_cluster
from odradek.dev.waiting import wait_until
from tests.support.monitoring import metric_names, panel_queries
from tests.support.prometheus import PrometheusServer, binary
from tests.support.tmux import TmuxPane

pytestmark = pytest.mark.timeout(600)

TOPIC, PARTITIONS = "observed", 3
RECORDS, VALUE_BYTES = 200, 1000
LAG_S = 2.0  # replica.lag.time.max.ms: a killed follower leaves the ISR after this


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    binary()  # skip (or fail under make test) before starting anything
    c = start_cluster(tmp_path_factory.mktemp("observability"), brokers=3, gateway=True,
                      extra=("--controllers", "2", "--config", f"replica.lag.time.max.ms={int(LAG_S * 1000)}"))
    c.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3, config={"min.insync.replicas": "2"})
    yield c
    stop_cluster(c)


@pytest.fixture(scope="module")
def prometheus(cluster, tmp_path_factory):
    urls = cluster.status()["metrics_url"]
    jobs = {"odradek-broker": [u for n, u in urls.items() if n.startswith("broker-")],
            "odradek-controller": [u for n, u in urls.items() if n.startswith("controller-")]}
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"), jobs).start()
    try:
        wait_until(server.targets_up, 60, "prometheus to scrape every broker and controller", 0.5)
        yield server
    finally:
        server.stop()


def _equals(prom: PrometheusServer, promql: str, expected: float):
    return lambda: prom.scalar(promql) == expected


def test_one_active_controller(prometheus):
    wait_until(_equals(prometheus, "sum(kafka_controller_kafkacontroller_activecontrollercount)", 1), 30,
               "one active controller in PromQL", 0.5)


def test_bytes_in_grows_by_what_a_produce_sent(cluster, prometheus):
    query = f'sum(kafka_server_brokertopicmetrics_bytesin_total{{topic="{TOPIC}"}})'
    before = prometheus.scalar(query) or 0.0  # no series before the first produce
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20})
    sent = 0
    for i in range(RECORDS):
        key, value = f"k{i}".encode(), bytes([i % 256]) * VALUE_BYTES
        producer.produce(TOPIC, key=key, value=value)
        sent += len(key) + len(value)
    assert producer.flush(60) == 0

    def grown():
        now = prometheus.scalar(query)
        return now is not None and abs((now - before) - sent) <= 0.05 * sent and now - before
    delta = wait_until(grown, 30, f"bytes in to grow by {sent} (±5%) in PromQL", 0.5)
    assert abs(delta - sent) <= 0.05 * sent


def test_group_lag_equals_unconsumed_records(cluster, prometheus):
    group, consume = "observed-group", RECORDS // 4
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "max.poll.interval.ms": 60000})
    consumer.subscribe([TOPIC])
    got = []
    wait_until(lambda: got.extend(m for m in consumer.consume(consume - len(got), 1.0) if not m.error())
               or len(got) >= consume, 60, f"{consume} records consumed", 0)
    # every partition gets a commit (0 where nothing was read): lag is per committed partition
    positions = {p: 0 for p in range(PARTITIONS)}
    for m in got:
        positions[m.partition()] = max(positions[m.partition()], m.offset() + 1)
    consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in positions.items()], asynchronous=False)
    consumer.close()
    lag = f'sum(kafka_consumergroup_lag{{consumergroup="{group}"}})'
    try:
        wait_until(_equals(prometheus, lag, RECORDS - len(got)), 30,
                   f"the lag of {group} to be {RECORDS - len(got)} in PromQL", 0.5)
    except TimeoutError as e:
        raise AssertionError(f"{e}; PromQL says {prometheus.query(f'kafka_consumergroup_lag')}") from None


def test_every_dashboard_query_names_only_exported_metrics(cluster):
    """The chart's Grafana dashboard against a live scrape of every broker, controller and the
    gateway (after the produce and the group commit above: per-topic and per-group series exist)."""
    exported = set()
    for url in cluster.status()["metrics_url"].values():
        with urllib.request.urlopen(url, timeout=10) as resp:
            exported |= {line.split("{")[0].split(" ")[0] for line in resp.read().decode().splitlines()
                         if line and not line.startswith("#")}
    missing = {title: sorted(names - exported) for title, exprs in panel_queries().items()
               for names in [set().union(*map(metric_names, exprs))] if names - exported}
    assert not missing, f"dashboard panels naming metrics no scrape exports: {missing}"


def test_under_replicated_partitions_after_a_broker_kill_and_restart(cluster, prometheus):
    urp = "sum(kafka_server_replicamanager_underreplicatedpartitions)"
    wait_until(_equals(prometheus, urp, 0), 30, "no under-replicated partitions", 0.5)
    cluster.run("kill", "3")
    wait_until(lambda: (prometheus.scalar(urp) or 0) > 0, 60, "URP > 0 after broker 3 was killed", 0.5)
    cluster.run("start", "3")
    wait_until(_equals(prometheus, urp, 0), 90, "URP back to 0 after broker 3 restarted", 0.5)


def test_odradek_top_in_a_real_terminal_shows_brokers_and_a_urp_change(cluster, tmp_path):
    """``odradek top`` in a detached tmux session (its own server socket) against the cluster:
    the pane shows the three brokers, then URP > 0 and a DOWN broker after broker 2 is killed,
    and URP 0 again after its restart."""
    with TmuxPane(tmp_path / "tmux.sock", [sys.executable, "-m", "odradek.cli", "top", "--data-dir",
                                           str(cluster.data_dir), "--interval", "1"]) as pane:
        pane.wait_for(lambda t: all(f"broker-{i}" in t for i in (1, 2, 3)) and "URP: 0" in t,
                      "the three brokers and URP 0")
        cluster.run("kill", "2")
        pane.wait_for(lambda t: re.search(r"URP: [1-9]", t) and "DOWN" in t, "URP > 0 and broker-2 DOWN")
        cluster.run("start", "2")
        pane.wait_for(lambda t: "URP: 0" in t and "DOWN" not in t, "URP back to 0 after broker 2 restarted", 90)


def test_active_controller_count_is_zero_during_a_failover(cluster, prometheus):
    """The active controller is SIGKILLed: until its ZooKeeper session expires nobody holds
    /controller, the standby reports 0 and the dead one is not scraped (its series go stale)."""
    active = "sum(kafka_controller_kafkacontroller_activecontrollercount)"
    wait_until(_equals(prometheus, active, 1), 30, "one active controller", 0.5)
    cluster.run("kill", "controller")
    wait_until(_equals(prometheus, active, 0), 30, "no active controller during the failover", 0.2)
    wait_until(_equals(prometheus, active, 1), 90, "the standby to take over", 0.5)
