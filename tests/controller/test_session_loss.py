"""A controller cut off from ZooKeeper stops acting at once, and is a standby when it returns.

The controller reaches ZooKeeper through a small TCP relay in the test, so the test can cut
its connection (its session then expires in ZooKeeper) without touching the shared server.
"""

from __future__ import annotations

import socket
import threading

import pytest

from odradek.cluster import control_plane as cp


class Relay:
    """Forwards 127.0.0.1:<port> to ZooKeeper; ``cut()`` drops and refuses connections."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.cut_off = threading.Event()
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except (socket.timeout, OSError):
                continue
            if self.cut_off.is_set():
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        self.cut_off.set()
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def restore(self) -> None:
        self.cut_off.clear()

    def close(self) -> None:
        self._closed.set()
        self.cut()
        self._thread.join(5)
        self._listener.close()


@pytest.fixture
def relay(zookeeper):
    r = Relay(("127.0.0.1", zookeeper.port))
    yield r
    r.close()


def test_cut_off_controller_answers_not_controller_and_comes_back_as_standby(
        controllers, fake_brokers, relay, zookeeper, wait_for):
    broker = fake_brokers(1)
    a = controllers("a", "--zookeeper", f"127.0.0.1:{relay.port}")
    assert a.wait_active()["epoch"] == 1
    b = controllers("b")
    assert a.call("POST", cp.CREATE_TOPIC.path(), {"name": "before"})[0] == 201

    relay.cut()
    wait_for(lambda: not a.health()["active"], 5, "the cut-off controller to stop acting")
    status, body = a.call("POST", cp.CREATE_TOPIC.path(), {"name": "during"})
    assert (status, body["error"]) == (503, "NOT_CONTROLLER")

    assert b.wait_active(a.session_timeout + 20)["epoch"] == 2
    assert b.call("POST", cp.CREATE_TOPIC.path(), {"name": "during"})[0] == 201
    wait_for(lambda: (s := broker.latest()) and s["controller_epoch"] == 2, 10, "a push from b")

    relay.restore()
    wait_for(lambda: "stepping down as controller (epoch 1)" in a.log(), 60,
             "a to learn its session expired")
    health = wait_for(lambda: (h := a.health()) and "ZooKeeper session connected" in a.log().split(
        "stepping down")[-1] and h, 60, "a to reconnect")
    assert (health["active"], health["epoch"]) == (False, None)
    assert b.health()["active"] and broker.latest()["controller_epoch"] == 2
