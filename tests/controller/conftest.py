"""Fixtures for the controller's tests.

- ``zk``: a kazoo client chrooted to this test's cluster (``/odradek/<cluster_name>``), to
  inspect and prepare ZooKeeper directly.
- ``stores``: ``stores()`` -> a started ``ZkStore`` on this test's cluster (closed at teardown),
  to drive the store as a controller would (election, fenced writes).
- ``fake_brokers``: ``fake_brokers(id)`` -> ``FakeBroker``: a tiny HTTP server standing in for
  a broker's ``POST /internal/v1/metadata`` (records every snapshot, refuses stale controller
  epochs with 409 as a broker does), registered in ``/brokers/ids/<id>`` with its own
  ZooKeeper session, so ``leave()`` / ``join()`` make the broker die and come back;
  ``epoch`` is its registration's czxid (the broker epoch).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

import pytest
from kazoo.client import KazooClient

from odradek.cluster import paths
from odradek.controller.zkstore import ZkStore


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
        store = ZkStore(zookeeper.connect, cluster_name, session_timeout=5.0)
        store.start(30)
        made.append(store)
        return store
    yield make
    for store in made:
        store.close()


class FakeBroker:
    def __init__(self, broker_id: int, zk_hosts: str) -> None:
        self.id = broker_id
        self._zk_hosts = zk_hosts
        self._zk: KazooClient | None = None
        self.snapshots: list[dict] = []
        self.refused: list[dict] = []
        self.max_epoch = -1
        self.fail_next = 0  # answer 500 to this many pushes first
        self._lock = threading.Lock()
        broker = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, answer = broker._receive(self.path, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def _receive(self, path: str, body: dict) -> tuple[int, dict]:
        with self._lock:
            if path != "/internal/v1/metadata":
                return 404, {"error_code": 42, "error": "INVALID_REQUEST", "message": path}
            if self.fail_next > 0:
                self.fail_next -= 1
                self.refused.append(body)
                return 500, {"error_code": -1, "error": "UNKNOWN_SERVER_ERROR", "message": "injected"}
            if body["controller_epoch"] < self.max_epoch:
                self.refused.append(body)
                return 409, {"error_code": 11, "error": "STALE_CONTROLLER_EPOCH",
                             "message": f"epoch {body['controller_epoch']} < {self.max_epoch}"}
            self.max_epoch = body["controller_epoch"]
            self.snapshots.append(body)
            return 200, {"accepted": True}

    def latest(self) -> dict | None:
        with self._lock:
            return self.snapshots[-1] if self.snapshots else None

    def partition(self, topic: str, partition: int) -> dict | None:
        snap = self.latest()
        for t in (snap or {}).get("topics", []):
            if t["name"] == topic:
                return next((p for p in t["partitions"] if p["partition"] == partition), None)
        return None

    def join(self) -> "FakeBroker":
        """Register ``/brokers/ids/<id>`` (ephemeral) in a new ZooKeeper session, as a freshly
        started broker: the snapshots it received before are forgotten."""
        with self._lock:
            self.snapshots.clear()
        self._zk = KazooClient(hosts=self._zk_hosts)
        self._zk.start(timeout=30)
        self._zk.ensure_path(paths.BROKER_IDS)
        info = {"id": self.id, "host": "127.0.0.1", "port": 9092 + self.id,
                "internal_url": self.url, "rack": None}
        self._zk.create(paths.broker(self.id), json.dumps(info).encode(), ephemeral=True)
        return self

    @property
    def epoch(self) -> int:
        """The broker epoch: the czxid of the current registration."""
        return self._zk.exists(paths.broker(self.id)).czxid

    def leave(self) -> None:
        """Close the ZooKeeper session: the registration disappears at once."""
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None

    def close(self) -> None:
        self.leave()
        self._server.shutdown()
        self._server.server_close()


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
