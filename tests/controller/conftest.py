"""Fixtures for the controller's tests.

- ``zk``: a kazoo client chrooted to this test's cluster (``/odradek/<cluster_name>``), to
  inspect and prepare ZooKeeper directly.
- ``stores``: ``stores()`` -> a started ``ZkStore`` on this test's cluster (closed at teardown),
  to drive the store as a controller would (election, fenced writes).
- ``fake_brokers``: ``fake_brokers(id)`` -> a registered ``tests.support.fake_peers.FakeBroker``
  (closed at teardown).
"""

from __future__ import annotations

from typing import Callable

import pytest
from kazoo.client import KazooClient

from odradek.cluster import paths
from odradek.cluster.zk_session import ZkTimeouts
from odradek.controller.zkstore import ZkStore
from tests.support.fake_peers import FakeBroker


@pytest.fixture
def zk(zookeeper, cluster_name) -> KazooClient:
    root = KazooClient(hosts=zookeeper.connect)
    root.start(timeout=30)
    root.ensure_path(paths.chroot(cluster_name))
    root.stop()
    root.close()
    client = KazooClient(hosts=zookeeper.connect + paths.chroot(cluster_name))
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def stores(zookeeper, cluster_name):
    made = []

    def make() -> ZkStore:
        store = ZkStore(zookeeper.connect, cluster_name, ZkTimeouts(5000))
        store.start(30)
        made.append(store)
        return store
    yield make
    for store in made:
        store.close()


@pytest.fixture
def fake_brokers(zk, zookeeper, cluster_name) -> Callable[[int], FakeBroker]:
    made: list[FakeBroker] = []

    def make(broker_id: int, join: bool = True) -> FakeBroker:
        broker = FakeBroker(broker_id, zookeeper.connect + paths.chroot(cluster_name))
        made.append(broker)
        return broker.join() if join else broker

    yield make
    for broker in made:
        broker.close()
