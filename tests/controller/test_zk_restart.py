"""ZooKeeper sessions (``odradek.cluster.zk_session``, used by brokers and controllers) outlive a
ZooKeeper restart: the server restores sessions from its database with a fresh timeout, and the
client reconnects within 0.7 s of the server's return, so even an outage longer than the session
timeout expires nothing. kazoo's own policy (backing off to minutes) came back too late.

The test asserts what the speed is for, not the speed: the client reconnects into its old session
(same id, its ephemeral znode kept, never LOST).

A private ZooKeeper server (the shared one must not restart under other tests), an 8 s session:
the server's clock for a restored session starts when it loads its database, before it listens,
and a JVM start on a loaded machine took most of a 4 s session (a CI run saw LOST).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import pytest
from kazoo.client import KazooState

from odradek.cluster import zk_session
from odradek.cluster.zk_session import ZkTimeouts
from odradek.dev.waiting import wait_until
from odradek.dev import zookeeper as zk_server
from odradek.dev.processes import candidate_port
from odradek.dev.zookeeper import ZooKeeperServer
from tests.support.controllers import CONTROLLER_SESSION_TIMEOUT_S, ControllerProcess

# A deadline, not a speed: reconnecting late (kazoo's own back-off) expires the restored session,
# which the assertions after the wait catch (LOST, a new session id).
RECONNECT_DEADLINE_S = 60


def test_a_session_outlives_a_zookeeper_restart_longer_than_its_timeout(tmp_path):
    server = ZooKeeperServer(tmp_path / "zk").start()
    client = zk_session.client(server.connect, ZkTimeouts(session_ms=8000))
    states: list[str] = []
    connected = threading.Event()
    try:
        client.add_listener(lambda s: (states.append(s), connected.set() if s == KazooState.CONNECTED else None))
        client.start(timeout=10)
        client.create("/registration", b"x", ephemeral=True)
        session, czxid = client.client_id[0], client.exists("/registration").czxid
        port = server.port
        server.stop()
        wait_until(lambda: KazooState.SUSPENDED in states, 30, "the client to notice")
        connected.clear()
        time.sleep(9.0)                                 # down longer than the 8 s session timeout
        server = ZooKeeperServer(tmp_path / "zk", port=port).start()
        # however long the reconnection takes on a loaded machine, it must land in the old session
        wait_until(connected.is_set, RECONNECT_DEADLINE_S, f"the client to reconnect: {states}")
        assert KazooState.LOST not in states, states
        assert client.client_id[0] == session and client.exists("/registration").czxid == czxid
    finally:
        client.stop()
        client.close()
        server.stop()


def test_timeouts_follow_kafka():
    assert (ZkTimeouts().session_s, ZkTimeouts().connection_s) == (18.0, 18.0)   # connection: the session's
    assert ZkTimeouts.from_settings({"zookeeper.connection.timeout.ms": "6000"}).connection_s == 6.0


def test_sigterm_ends_an_active_controller_while_zookeeper_is_down(tmp_path):
    """Resigning waits on ZooKeeper; with ZooKeeper gone that wait is bounded (it used to last
    until SIGKILL): the controller exits and ``/controller`` goes with its session."""
    server = ZooKeeperServer(tmp_path / "zk").start()
    controller = None
    try:
        controller = ControllerProcess(
            ["--zookeeper", server.connect, "--cluster", "sigterm", "--id", "a", "--listen", "127.0.0.1:0",
             "--zk-session-timeout", str(CONTROLLER_SESSION_TIMEOUT_S)], tmp_path / "controller.log",
            CONTROLLER_SESSION_TIMEOUT_S).wait_listening()
        controller.wait_active()
        server.stop()
        wait_until(lambda: "ZooKeeper session suspended" in controller.log(), 30, "the controller to notice")
        os.kill(controller.pid, signal.SIGTERM)
        assert controller.proc.wait(30) == 0, controller.log()
        assert "could not resign cleanly" in controller.log()
    finally:
        if controller is not None:
            controller.kill()
        server.stop()


def test_a_restart_on_a_taken_port_fails_at_once_even_when_another_zookeeper_answers_there(tmp_path, zookeeper):
    """Another server answering ``srvr`` on the port is not this one serving: the JVM's exit
    (``Address already in use``) is seen, not taken for a start."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        with pytest.raises(zk_server.PortTaken):
            ZooKeeperServer(tmp_path / "plain", port=taken.getsockname()[1]).start()
    with pytest.raises(zk_server.PortTaken):
        ZooKeeperServer(tmp_path / "shadow", port=zookeeper.port).start()


def test_a_chosen_port_found_taken_is_retried_on_another(tmp_path, monkeypatch):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        offered = iter([taken.getsockname()[1]])
        monkeypatch.setattr(zk_server, "candidate_port", lambda: next(offered, None) or candidate_port())
        server = ZooKeeperServer(tmp_path / "zk").start()
        try:
            assert server.port != taken.getsockname()[1] and zk_server.serving(server.port)
        finally:
            server.stop()


def test_a_connection_attempt_that_hangs_gives_up_well_before_the_session_timeout():
    """kazoo gives one connect the whole session timeout; an address that drops the SYN (a
    ZooKeeper pod gone) would hold the client that long, past the restored session's expiry.
    A listener whose accept queue is full drops SYNs: the attempt ends after a third of it."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    address = listener.getsockname()
    queued = [socket.socket() for _ in range(3)]
    try:
        for s in queued:
            s.setblocking(False)
            s.connect_ex(address)
        client = zk_session.client(f"{address[0]}:{address[1]}", ZkTimeouts(session_ms=6000))
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            client.handler.create_connection(address=address, hostname=address[0], timeout=6.0)
        assert time.monotonic() - started < 5.0, "the attempt waited out the session timeout"
    finally:
        for s in queued:
            s.close()
        listener.close()


def test_a_server_that_accepts_and_never_answers_is_left_for_another_attempt():
    """kazoo waits the whole session timeout for the answer to its Connect request; a starting
    server that accepted without answering held a controller past its restored session's expiry
    (a CI run of the ZooKeeper restart test). A second attempt comes within the session timeout."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    closing = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not closing.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                pass
    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    address = listener.getsockname()
    client = zk_session.client(f"{address[0]}:{address[1]}", ZkTimeouts(session_ms=6000))
    try:
        client.start_async()
        wait_until(lambda: len(accepted) >= 2, 5.5, "a second connection attempt before the 6 s session ran out", 0.05)
    finally:
        client.stop()
        client.close()
        closing.set()
        acceptor.join(5)
        for s in accepted:
            s.close()
        listener.close()
