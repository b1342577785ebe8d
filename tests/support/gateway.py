"""The HTTP gateway as its own process, and what its tests send it.

``GatewayProcess`` runs ``odradek gateway`` on port 0 and reads the port it bound from its
ports report (``odradek.ports``; options such as auth or TLS given by the test) and stops it by PID; ``cluster_with_gateway`` is a dev cluster of 3 brokers with its
gateway (the ``gw_cluster`` fixtures), stopped on exit; ``write_tokens`` writes a bearer-token file; ``V2*`` and
``ARROW`` are the REST Proxy v2 and Arrow content types.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx

from odradek import ports
from odradek.dev.harness import Cluster, start_cluster, stop_cluster
from odradek.dev.waiting import wait_until

V2 = "application/vnd.kafka.v2+json"
V2_JSON = "application/vnd.kafka.json.v2+json"
V2_BINARY = "application/vnd.kafka.binary.v2+json"
ARROW = "application/vnd.apache.arrow.stream"


@contextmanager
def cluster_with_gateway(data_dir: Path) -> Iterator[Cluster]:
    c = start_cluster(data_dir, brokers=3, gateway=True)
    assert c.gateway, "odradek dev up did not report a gateway URL"
    try:
        yield c
    finally:
        stop_cluster(c)


class GatewayProcess:
    """``odradek gateway`` as its own process on a free port (stopped by PID)."""

    def __init__(self, bootstrap: str, log: Path, *options: str, verify: ssl.SSLContext | bool = True):
        self.verify = verify   # the CA file an https gateway is checked against
        self.log = log
        report = log.with_suffix(".ports.json")
        report.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odradek.gateway", "--bootstrap-servers", bootstrap, "--port", "0", *options],
            stdout=log.open("wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, ports.ENV: str(report)})
        try:
            self.port = ports.wait_for(report, 60, lambda: self.proc.poll() is None, "the gateway")["http"]
        except ports.PortsNotReported as e:
            raise AssertionError(f"{e}:\n{log.read_text()[-3000:]}") from None
        self.url = f"{'https' if '--ssl-certfile' in options else 'http'}://127.0.0.1:{self.port}"
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
