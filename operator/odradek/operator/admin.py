"""The operator's client of the controller's control plane (docs/control-plane.md).

Several controller instances run; one is active, the others answer 503 ``NOT_CONTROLLER``.
``ControllerClient`` takes the candidate URLs (the controller Service's endpoints, or the
operator's override, ``OperatorSettings.controller_urls``), finds the active one through each
instance's health route and re-resolves once when a call meets ``NOT_CONTROLLER``. Requests are
built by ``odradek.cluster.control_plane``; answers stay JSON, the form the operator's decisions
(``topics``, ``rolling``) read.

With the cluster's control plane on mutual TLS the client presents the operator's own
certificate (``tls``; CN ``<cluster>-operator``, which the controller admits). Blocking
(``control_plane_http.send_blocking``): the kopf handlers that use it are synchronous
and run in kopf's thread pool.
"""

from __future__ import annotations

from typing import Any, Iterable

from odradek.cluster import control_plane as cp
from odradek.cluster import control_plane_users as cpu
from odradek.cluster.control_plane_http import send_blocking
from odradek.cluster.control_plane_tls import ControlPlaneTls

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


class ControllerClient:
    """``tls``: the operator's control-plane certificate (``principals.operator_tls``), used
    for ``https://`` candidates; None: plaintext only."""

    def __init__(self, candidates: Iterable[str], timeout: float = TIMEOUT_S,
                 tls: ControlPlaneTls | None = None) -> None:
        self.candidates = [c.rstrip("/") for c in candidates]
        self.timeout = timeout
        self.tls = tls
        self._active: str | None = None

    def _send(self, url: str, request: cp.Request) -> tuple[int, Any]:
        return send_blocking(url, request, self.timeout, self.tls if url.startswith("https:") else None)

    def active_url(self, refresh: bool = False) -> str:
        if self._active and not refresh:
            return self._active
        errors = []
        for url in self.candidates:
            try:
                status, health = self._send(url, cp.health())
            except OSError as e:
                errors.append(f"{url}: {e}")
                continue
            if status == 200 and isinstance(health, dict) and health.get("active"):
                self._active = (health.get("url") or url).rstrip("/")
                # An instance advertises the URL it was told; trust it only if it answers.
                if self._active != url:
                    try:
                        self._send(self._active, cp.health())
                    except OSError:
                        self._active = url
                return self._active
            errors.append(f"{url}: standby")
        detail = "; ".join(errors) if errors else "no controller endpoints"
        raise Unreachable(f"no active controller ({detail})")

    def request(self, request: cp.Request) -> Any:
        """The active controller's JSON answer to ``request``."""
        for attempt in range(2):
            url = self.active_url(refresh=attempt > 0)
            try:
                status, answer = self._send(url, request)
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
        return self.request(cp.health())

    def cluster(self) -> dict:
        return self.request(cp.cluster())

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> dict:
        return self.request(cp.create_topic(cp.CreateTopic(name, partitions, replication_factor, configs=configs)))

    def delete_topic(self, name: str) -> None:
        self.request(cp.delete_topic(name))

    def create_partitions(self, name: str, count: int) -> dict:
        return self.request(cp.create_partitions(name, cp.CreatePartitions(count)))

    def alter_configs(self, name: str, set_: dict[str, str], delete: list[str]) -> dict:
        return self.request(cp.alter_configs(name, cp.AlterConfigs(set_, tuple(delete))))

    def put_user(self, name: str, spec: cpu.UserSpec) -> dict:
        return self.request(cpu.put_user(name, spec))

    def delete_user(self, name: str, principal: str | None = None) -> dict:
        return self.request(cpu.delete_user(name, principal))

    def describe_user(self, name: str, principal: str | None = None) -> dict:
        return self.request(cpu.describe_user(name, principal))

    def maintenance(self, broker_id: int) -> dict:
        """``{"broker", "maintenance", "leaders"}``: leaders = partitions with other replicas it still leads."""
        return self.request(cp.maintenance(broker_id))

    def enable_maintenance(self, broker_id: int) -> dict:
        """Move the broker's leaderships away and elect it nowhere until disabled (it keeps replicating)."""
        return self.request(cp.enable_maintenance(broker_id))

    def disable_maintenance(self, broker_id: int) -> dict:
        """End maintenance; its preferred leaderships are elected back to it."""
        return self.request(cp.disable_maintenance(broker_id))
