"""Kill the active controller while topics are being created: a standby takes over and every
topic ends up with a consistent assignment in ZooKeeper and in Metadata."""

import json
import threading
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from odradek.dev.harness import start_cluster, stop_cluster


# ZooKeeper sessions of 10 s (as the verify clusters'), controllers' and brokers': a SIGKILLed
# controller's /controller outlives it that long before a standby may take over
SESSION = "zookeeper.session.timeout.ms=10000"


@pytest.fixture(scope="module")
def cluster_two_controllers(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("two-controllers"), brokers=3,
                      extra=("--controllers", "2", "--config", SESSION, "--controller-config", SESSION))
    yield c
    stop_cluster(c)


def test_standby_takes_over_during_topic_creation(cluster_two_controllers):
    cluster = cluster_two_controllers
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    created, stop = [], threading.Event()

    def create_loop():
        i = 0
        while not stop.is_set() and i < 200:
            name = f"fo-{i}"
            try:
                admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=1)],
                                    request_timeout=20)[name].result(30)
                created.append(name)
            except Exception:
                pass  # timed out during the election: checked for consistency below
            i += 1

    t = threading.Thread(target=create_loop)
    t.start()
    deadline = time.monotonic() + 30
    while len(created) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    first = cluster.status()["controller_url"]
    cluster.run("kill", "controller")  # SIGKILL the active one
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        now = cluster.status().get("controller_url")
        if now and now != first:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("no standby took over")
    count_at_failover = len(created)
    deadline = time.monotonic() + 60
    while len(created) < count_at_failover + 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    t.join(120)
    assert len(created) >= count_at_failover + 5, "topic creation did not resume after failover"

    zk = KazooClient(hosts=cluster.status()["zookeeper"] + "/odradek/odradek")
    zk.start(10)
    try:
        in_zk = {}
        for name in zk.get_children("/brokers/topics"):
            assignment = json.loads(zk.get(f"/brokers/topics/{name}")[0])
            states = [json.loads(zk.get(f"/brokers/topics/{name}/partitions/{p}/state")[0])
                      for p in sorted(zk.get_children(f"/brokers/topics/{name}/partitions"), key=int)]
            assert len(states) == 3 and all(s["leader"] >= 0 for s in states), name
            in_zk[name] = assignment
    finally:
        zk.stop()
        zk.close()
    assert set(created) <= set(in_zk)
    metadata = admin.list_topics(timeout=30)
    for name in in_zk:
        if name.startswith("fo-"):
            topic = metadata.topics[name]
            assert topic.error is None and len(topic.partitions) == 3, name
            assert all(p.leader >= 1 for p in topic.partitions.values())


def _partitions(cluster, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, ISR) from a fresh Metadata request."""
    parts = cluster.admin().list_topics(topic, timeout=10).topics[topic].partitions
    return {p: (m.leader, list(m.replicas), sorted(m.isrs)) for p, m in parts.items()}


def _maintenance(cluster, *args: str) -> dict:
    """``odradek maintenance ... --json`` against the dev cluster (both controllers)."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "odradek.cli", "maintenance", *args, "--json",
                           "--data-dir", str(cluster.data_dir)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_maintenance_moves_leadership_away_survives_a_controller_failover_and_gives_it_back(cluster_two_controllers):
    """Redpanda's maintenance mode: the broker leads nothing while produce and consume go on,
    a new controller (the old one killed) still elects it nowhere, and disabling it elects
    its preferred leaderships back."""
    from odradek.dev.waiting import wait_until
    from tests.support.clients import confluent_consume, confluent_produce
    from tests.support.records import make_records, verify
    cluster = cluster_two_controllers
    for name in ("controller-0", "controller-1"):  # the first test killed one
        if name not in cluster.pids:
            cluster.run("start", name)
    cluster.create_topic("maint", partitions=6, replication_factor=3)
    wait_until(lambda: all(len(isr) == 3 for _, _, isr in _partitions(cluster, "maint").values()), 60, "full ISRs")
    assert _maintenance(cluster, "enable", "2") == {"broker": 2, "maintenance": True, "leaders": 0}
    wait_until(lambda: all(leader not in (-1, 2) for leader, _, _ in _partitions(cluster, "maint").values()),
               30, "broker 2 to lead nothing")
    records = make_records(300)
    delivered = confluent_produce(cluster.bootstrap, "maint", records, acks="all")
    got, _ = confluent_consume(cluster.bootstrap, "maint", 6, len(records))
    verify(records, got, delivered)

    first = cluster.status()["controller_url"]
    cluster.run("kill", "controller")
    wait_until(lambda: cluster.status().get("controller_url") not in (None, first), 60, "a standby to take over")
    assert _maintenance(cluster, "status", "2") == {"broker": 2, "maintenance": True, "leaders": 0}
    cluster.run("kill", "1", "--graceful")  # the new controller hands 1's leaderships to 3, never to 2
    try:
        wait_until(lambda: all(leader == 3 for leader, _, _ in _partitions(cluster, "maint").values()), 60,
                   "broker 3 to lead every partition")
    finally:
        cluster.run("start", "1")
    wait_until(lambda: all(len(isr) == 3 for _, _, isr in _partitions(cluster, "maint").values()), 60, "full ISRs")

    preferred = {p for p, (_, replicas, _) in _partitions(cluster, "maint").items() if replicas[0] == 2}
    answer = _maintenance(cluster, "disable", "2")  # its leaderships of __consumer_offsets (RF 3) count too
    assert answer["maintenance"] is False and answer["leaders"] >= len(preferred), answer
    wait_until(lambda: {p for p, (leader, _, _) in _partitions(cluster, "maint").items() if leader == 2} == preferred,
               30, "broker 2's preferred leaderships back")
    cluster.run("start", next(n for n in ("controller-0", "controller-1") if n not in cluster.pids))
