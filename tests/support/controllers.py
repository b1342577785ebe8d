"""Controller instances as processes (``python -m odradek.controller``) and JSON over HTTP.

``ControllerProcess`` starts one, finds the URL it bound in its log, and stops it by PID
(SIGTERM so it resigns, or SIGKILL so ``/controller`` outlives it until the ZooKeeper session
expires). ``http_json`` is one HTTP call with a JSON body, errors included.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from odradek.cluster import control_plane as cp
from odradek.dev.waiting import wait_until

CONTROLLER_SESSION_TIMEOUT_S = 3.0


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
        return self.call("GET", cp.HEALTH.path())[1]

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
