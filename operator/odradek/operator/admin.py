"""The operator's client of the controller's ``/internal/v1`` admin API (docs/control-plane.md).

Several controller instances run; one is active, the others answer 503 ``NOT_CONTROLLER``.
``ControllerClient`` takes the candidate URLs (the controller Service's endpoints, or the
operator's override, ``OperatorSettings.controller_urls``), finds the active one through each instance's
``GET /internal/v1/health`` and re-resolves once when a call meets ``NOT_CONTROLLER``.

Blocking (urllib): the kopf handlers that use it are synchronous and run in kopf's thread pool.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Iterable

TIMEOUT_S = 5.0
NOT_CONTROLLER = 41
UNKNOWN_TOPIC = 3
TOPIC_ALREADY_EXISTS = 36


class AdminError(Exception):
    """The controller answered an error body (``{"error_code", "error", "message"}``)."""

    def __init__(self, status: int, code: int, name: str, message: str) -> None:
        super().__init__(f"{name} ({code}): {message}")
        self.status, self.code, self.name, self.message = status, code, name, message

    @property
    def permanent(self) -> bool:
        """A client error that retrying the same request cannot fix (400/404/409)."""
        return 400 <= self.status < 500 and self.code != NOT_CONTROLLER


class Unreachable(Exception):
    """No active controller answered."""


def _call(method: str, url: str, body: Any = None, timeout: float = TIMEOUT_S) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw or b"null")
        except ValueError:
            return e.code, {"error_code": -1, "error": "UNKNOWN_SERVER_ERROR", "message": raw.decode(errors="replace")}


class ControllerClient:
    def __init__(self, candidates: Iterable[str], timeout: float = TIMEOUT_S) -> None:
        self.candidates = [c.rstrip("/") for c in candidates]
        self.timeout = timeout
        self._active: str | None = None

    def active_url(self, refresh: bool = False) -> str:
        if self._active and not refresh:
            return self._active
        errors = []
        for url in self.candidates:
            try:
                status, health = _call("GET", f"{url}/internal/v1/health", timeout=self.timeout)
            except OSError as e:
                errors.append(f"{url}: {e}")
                continue
            if status == 200 and isinstance(health, dict) and health.get("active"):
                self._active = (health.get("url") or url).rstrip("/")
                # An instance advertises the URL it was told; trust it only if it answers.
                if self._active != url:
                    try:
                        _call("GET", f"{self._active}/internal/v1/health", timeout=self.timeout)
                    except OSError:
                        self._active = url
                return self._active
            errors.append(f"{url}: standby")
        detail = "; ".join(errors) if errors else "no controller endpoints"
        raise Unreachable(f"no active controller ({detail})")

    def request(self, method: str, path: str, body: Any = None) -> Any:
        for attempt in range(2):
            url = self.active_url(refresh=attempt > 0)
            try:
                status, answer = _call(method, f"{url}{path}", body, self.timeout)
            except OSError as e:
                if attempt:
                    raise Unreachable(f"{url}: {e}") from None
                continue
            if status < 300:
                return answer
            answer = answer if isinstance(answer, dict) else {}
            err = AdminError(status, int(answer.get("error_code", -1)), answer.get("error", "UNKNOWN"),
                             answer.get("message", ""))
            if err.code != NOT_CONTROLLER or attempt:
                raise err
        raise Unreachable("the controller changed twice during one call")

    # -- the calls the operator makes ------------------------------------------------------
    def health(self) -> dict:
        return self.request("GET", "/internal/v1/health")

    def cluster(self) -> dict:
        return self.request("GET", "/internal/v1/cluster")

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> dict:
        return self.request("POST", "/internal/v1/topics",
                            {"name": name, "partitions": partitions, "replication_factor": replication_factor,
                             "configs": configs})

    def delete_topic(self, name: str) -> None:
        self.request("DELETE", f"/internal/v1/topics/{urllib.parse.quote(name, safe='')}")

    def create_partitions(self, name: str, count: int) -> dict:
        return self.request("POST", f"/internal/v1/topics/{urllib.parse.quote(name, safe='')}/partitions",
                            {"count": count})

    def alter_configs(self, name: str, set_: dict[str, str], delete: list[str]) -> dict:
        return self.request("PATCH", f"/internal/v1/topics/{urllib.parse.quote(name, safe='')}/configs",
                            {"set": set_, "delete": delete})
