"""A dev cluster with its HTTP gateway (module scope), and helpers to start extra gateway
processes (auth on, short instance timeouts) against it; every process stopped by PID."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from odradek.dev.cluster import free_port
from tests.conftest import wait_until
from tests.integration.conftest import Cluster, start_cluster, stop_cluster

V2 = "application/vnd.kafka.v2+json"
V2_JSON = "application/vnd.kafka.json.v2+json"
V2_BINARY = "application/vnd.kafka.binary.v2+json"
ARROW = "application/vnd.apache.arrow.stream"


@pytest.fixture(scope="module")
def gw_cluster(tmp_path_factory) -> Cluster:
    c = start_cluster(tmp_path_factory.mktemp("gateway"), brokers=3, gateway=True)
    assert c.gateway, "odradek dev up did not report a gateway URL"
    yield c
    stop_cluster(c)


@pytest.fixture
def gw(gw_cluster) -> httpx.Client:
    with httpx.Client(base_url=gw_cluster.gateway, timeout=60) as client:
        yield client


class GatewayProcess:
    """``odradek gateway`` as its own process on a free port (stopped by PID)."""

    def __init__(self, bootstrap: str, log: Path, *options: str, verify: ssl.SSLContext | bool = True):
        self.port = free_port()
        self.url = f"{'https' if '--ssl-certfile' in options else 'http'}://127.0.0.1:{self.port}"
        self.verify = verify   # the CA file an https gateway is checked against
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odradek.gateway", "--bootstrap-servers", bootstrap, "--port", str(self.port),
             *options], stdout=log.open("wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_until(self._ready, 60, f"the gateway on port {self.port} to be ready")

    def _ready(self) -> bool:
        assert self.proc.poll() is None, f"the gateway exited:\n{self.log.read_text()[-3000:]}"
        try:
            return httpx.get(self.url + "/readyz", timeout=5, verify=self.verify).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> bool:
        """SIGTERM; True if the gateway shut down gracefully (uvicorn re-raises the signal
        after its shutdown, so the exit status is -15 either way: the log tells)."""
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            return False
        return "Application shutdown complete" in self.log.read_text()


def write_tokens(path: Path, tokens: list[dict]) -> Path:
    path.write_text(json.dumps({"tokens": tokens}))
    return path
