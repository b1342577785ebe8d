"""Fixtures shared by every test directory (their helpers live in ``tests/support/`` and
``odradek.dev``).

- ``wait_for``: ``wait_for(condition, timeout, what)`` polls until ``condition()`` is truthy
  and returns it, failing with ``what`` at the deadline (``odradek.dev.waiting.wait_until``).
- ``zookeeper`` (session): a real standalone ZooKeeper (``odradek.dev.zookeeper``) on a free
  loopback port; ``.connect`` is ``127.0.0.1:PORT``; stopped by PID at the end.
- ``cluster_name``: a fresh cluster name per test, so each test has its own chroot
  ``/odradek/<name>`` in the shared ZooKeeper.
- ``controllers``: starts controller processes (``python -m odradek.controller``) on free
  ports; every one started is stopped by PID at teardown (SIGTERM, then SIGKILL).
- ``http``: ``http(method, url, body)`` -> (status, JSON answer), errors included.
- ``cluster`` (module): a dev cluster of 3 brokers (``odradek.dev.harness.start_cluster``:
  ZooKeeper, controller and brokers as processes), stopped at the end; afterwards every process
  it ever recorded must be gone, else it is killed by PID and the teardown fails.
- ``gw_cluster`` (module): the same with the HTTP gateway (``.gateway`` is its URL).
"""

from __future__ import annotations

import os
import re
import uuid
from typing import Any, Callable

import pytest

from odradek.dev.harness import Cluster, start_cluster, stop_cluster
from odradek.dev.waiting import wait_until
from odradek.dev.zookeeper import ZooKeeperServer
from tests.support.controllers import CONTROLLER_SESSION_TIMEOUT_S, ControllerProcess, http_json
from tests.support.gateway import cluster_with_gateway

# Kafka's tools (kafka-configs, kafka-topics, ...) start on C1 and the serial collector here and in
# the processes the tests start (bench.apache_kafka.QUICK_TOOL_JVM); ODRADEK_QUICK_TOOL_JVM=0: Kafka's own flags
os.environ.setdefault("ODRADEK_QUICK_TOOL_JVM", "1")


@pytest.fixture
def wait_for() -> Callable[..., Any]:
    return wait_until


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory) -> ZooKeeperServer:
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def cluster_name(request) -> str:
    base = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name)[:40].strip("-")
    return f"{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def http() -> Callable[..., tuple[int, Any]]:
    """``http(method, url, body=None, timeout=10)`` -> (status, decoded JSON)."""
    return http_json


@pytest.fixture
def controllers(zookeeper, cluster_name, tmp_path) -> Callable[..., ControllerProcess]:
    """``start(id, *extra_args)`` -> ``ControllerProcess`` in this test's cluster."""
    started: list[ControllerProcess] = []

    def start(instance_id: str, *extra: str) -> ControllerProcess:
        args = ["--zookeeper", zookeeper.connect, "--cluster", cluster_name, "--id", instance_id,
                "--listen", "127.0.0.1:0", "--zk-session-timeout", str(CONTROLLER_SESSION_TIMEOUT_S),
                "--log-level", "DEBUG", *extra]
        proc = ControllerProcess(args, tmp_path / f"controller-{instance_id}.log",
                                 CONTROLLER_SESSION_TIMEOUT_S)
        started.append(proc)
        return proc.wait_listening()

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Cluster:
    c = start_cluster(tmp_path_factory.mktemp("cluster"), brokers=3)
    yield c
    stop_cluster(c)


@pytest.fixture(scope="module")
def gw_cluster(tmp_path_factory) -> Cluster:
    with cluster_with_gateway(tmp_path_factory.mktemp("gateway")) as c:
        yield c
