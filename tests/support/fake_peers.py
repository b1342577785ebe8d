"""Stand-ins for the peers of the control plane, as tiny JSON HTTP servers on loopback.

- ``FakeBroker``: a broker's ``control_plane.METADATA`` (records every snapshot, refuses
  stale controller epochs with 409 as a broker does), registered in ``/brokers/ids/<id>``
  with its own ZooKeeper session, so ``leave()`` / ``join()`` make it die and come back.
- ``FakeController``: the active controller's health, cluster and maintenance answers, for the operator.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from kazoo.client import KazooClient

from odradek.cluster import control_plane as cp
from odradek.cluster import paths
from tests.support.fake_rebalance import PATH as REBALANCE_PATH
from tests.support.fake_rebalance import FakeRebalancer

Answer = Callable[[str, str, "dict | None"], "tuple[int, dict]"]


def serve_json(answer: Answer) -> tuple[ThreadingHTTPServer, str]:
    """Serve ``answer(method, path, body)`` -> (status, JSON) on a free port, in a daemon
    thread; returns the server (``shutdown()`` and ``server_close()`` it) and its URL.
    ``server.requests`` lists each request's (method, Host header, path): the Host tells which
    URL a caller used, since a freed port is reused and a closed peer's callers may come back."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            self.server.requests.append((self.command, self.headers.get("Host", ""), self.path))
            self._reply(*answer("GET", self.path, None))

        def do_POST(self) -> None:  # noqa: N802
            self.server.requests.append((self.command, self.headers.get("Host", ""), self.path))
            length = int(self.headers.get("Content-Length") or 0)
            self._reply(*answer(self.command, self.path, json.loads(self.rfile.read(length) or b"null")))

        do_PUT = do_DELETE = do_POST

        def _reply(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.requests = []
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


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
        self._server, self.url = serve_json(self._receive)

    def _receive(self, method: str, path: str, body: dict | None) -> tuple[int, dict]:
        with self._lock:
            if (method, path) != (cp.METADATA.method, cp.METADATA.path()):
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


class FakeController:
    """A stand-in for the active controller's health and cluster answers, so a
    test can report under-replicated partitions and replica placement at will; its rebalance
    routes are ``rebalancer``'s (``fake_rebalance``)."""

    def __init__(self) -> None:
        self.under_replicated = 0
        self.topics: list[dict] = []
        self.rebalancer = FakeRebalancer(lambda: self.topics)
        self.maintenance: set[int] = set()    # brokers in maintenance mode (its PUT/DELETE routes)
        self.server, self.url = serve_json(self._answer)

    def _answer(self, method: str, path: str, body: dict | None) -> tuple[int, dict]:
        if path.startswith(REBALANCE_PATH):
            return self.rebalancer.answer(method, path, body)
        route = re.fullmatch(re.escape(cp.PREFIX) + r"/brokers/(\d+)/maintenance", path)
        if route:
            broker = int(route.group(1))
            {"PUT": self.maintenance.add, "DELETE": self.maintenance.discard}.get(method, lambda b: None)(broker)
            return 200, {"broker": broker, "maintenance": broker in self.maintenance, "leaders": 0}
        if (method, path) == (cp.HEALTH.method, cp.HEALTH.path()):
            return 200, {"id": "fake-0", "url": self.url, "active": True, "epoch": 1,
                         "under_replicated_partitions": self.under_replicated}
        if (method, path) == (cp.CLUSTER.method, cp.CLUSTER.path()):
            return 200, {"cluster_id": "fake", "controller_id": "fake-0", "controller_epoch": 1, "brokers": [],
                         "topics": self.topics, "under_replicated_partitions": self.under_replicated}
        return 404, {"error": "not found", "message": path}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
