"""Fixtures shared by every test directory.

- ``zookeeper`` (session): a real standalone ZooKeeper (``odradek.dev.zookeeper``) on a free
  loopback port; ``.connect`` is ``127.0.0.1:PORT``; stopped by PID at the end.
- ``cluster_name``: a fresh cluster name per test, so each test has its own chroot
  ``/odradek/<name>`` in the shared ZooKeeper.
- ``controllers``: starts controller processes (``python -m odradek.controller``) on free
  ports; every one started is stopped by PID at teardown (SIGTERM, then SIGKILL).
- ``http``: ``http(method, url, body)`` -> (status, JSON answer), errors included.
- ``wait_for``: ``wait_for(condition, timeout, what)`` polls until ``condition()`` is truthy
  and returns it, failing with ``what`` at the deadline.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

from odradek.dev.zookeeper import ZooKeeperServer

CONTROLLER_SESSION_TIMEOUT_S = 3.0


def wait_until(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            result = condition()
            if result:
                return result
        except Exception as e:  # reported at the deadline
            last = e
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}"
                               + (f" (last error: {last!r})" if last else ""))
        time.sleep(interval)


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


def http_json(method: str, url: str, body: Any = None, timeout: float = 10.0) -> tuple[int, Any]:
    """One HTTP call with a JSON body; returns (status, decoded JSON answer)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


@pytest.fixture
def http() -> Callable[..., tuple[int, Any]]:
    """``http(method, url, body=None, timeout=10)`` -> (status, decoded JSON)."""
    return http_json


class ControllerProcess:
    """One ``python -m odradek.controller`` process, its log file and its internal URL."""

    def __init__(self, args: list[str], log_path: Path, session_timeout: float) -> None:
        self.log_path = log_path
        self.session_timeout = session_timeout  # how long /controller outlives a SIGKILL
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "odradek.controller", *args],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        self.url = ""

    def wait_listening(self, timeout: float = 30.0) -> "ControllerProcess":
        self.url = wait_until(self._bound_url, timeout, f"controller {self.log_path.stem} to listen")
        return self

    def _bound_url(self) -> str | None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"controller exited with {self.proc.returncode}:\n{self.log()}")
        m = re.search(r"serving the internal API on (\S+)", self.log())
        return m.group(1) if m else None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return http_json(method, self.url + path, body)

    def health(self) -> dict:
        return self.call("GET", "/internal/v1/health")[1]

    def wait_active(self, timeout: float = 30.0) -> dict:
        return wait_until(lambda: (h := self.health())["active"] and h, timeout,
                          f"controller {self.log_path.stem} to become active")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no resignation; ``/controller`` stays until the ZooKeeper session expires."""
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM (the controller resigns), SIGKILL after ``timeout``; returns the exit code."""
        if self.alive():
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait(10)
        return self.proc.returncode


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
