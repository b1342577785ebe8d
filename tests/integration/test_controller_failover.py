"""Kill the active controller while topics are being created: a standby takes over and every
topic ends up with a consistent assignment in ZooKeeper and in Metadata."""

import json
import threading
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from odradek.dev.harness import start_cluster, stop_cluster


@pytest.fixture(scope="module")
def cluster_two_controllers(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("two-controllers"), brokers=3, extra=("--controllers", "2"))
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
