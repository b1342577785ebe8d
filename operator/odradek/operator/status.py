"""Pure status helpers: Kubernetes-style conditions and the cluster's readiness summary.

Condition types (both CRDs): ``Ready`` (True/False), ``NotReady`` (True while not ready, with
the reason), ``ReconciliationPaused`` (True while ``odradek.dev/pause-reconciliation`` is
``"true"``), ``Warning`` (True with a message, e.g. a refused scale-down),
``ControllerUrlRefused`` (an OdradekCluster's ``odradek.dev/controller-url`` is ignored: not
https to a Service of its namespace), ``GatewayUsersRefused`` (``gateway.users`` left out of the
gateway's tokens; reason ``GatewayUserNotReady`` while one of them is only not Ready yet, which
holds the cluster's Ready: ``gateway_users_pending``). ``lastTransitionTime``
moves only when a condition's status changes.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Iterable, Mapping


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(conditions: Iterable[Mapping[str, Any]] | None, type_: str, status: bool | None,
                  reason: str = "", message: str = "", generation: int | None = None) -> list[dict]:
    """A new list with ``type_`` set (``status`` None removes it)."""
    out = [dict(c) for c in (conditions or []) if c.get("type") != type_]
    if status is None:
        return out
    value = "True" if status else "False"
    old = next((c for c in (conditions or []) if c.get("type") == type_), None)
    changed = old is None or old.get("status") != value
    cond = {"type": type_, "status": value, "reason": reason or type_, "message": message,
            "lastTransitionTime": now() if changed else old.get("lastTransitionTime", now())}
    if generation is not None:
        cond["observedGeneration"] = generation
    out.append(cond)
    order = {"Ready": 0, "NotReady": 1, "ReconciliationPaused": 2, "Warning": 3, "ControllerUrlRefused": 4}
    return sorted(out, key=lambda c: order.get(c["type"], 9))


def readiness(conditions: Iterable[Mapping[str, Any]] | None, ready: bool, reason: str, message: str,
              generation: int | None) -> list[dict]:
    """Ready and NotReady together."""
    conds = set_condition(conditions, "Ready", ready, reason, message, generation)
    return set_condition(conds, "NotReady", None if ready else True, reason, message, generation)


GATEWAY_USER_NOT_READY = "GatewayUserNotReady"


def gateway_users_pending(conditions: Iterable[Mapping[str, Any]] | None) -> bool:
    """A ``gateway.users`` user is still being taken in (the reconcile's condition, cleared only
    once the gateway's tokens and Deployment carry it)."""
    return any(c.get("type") == "GatewayUsersRefused" and c.get("status") == "True"
               and c.get("reason") == GATEWAY_USER_NOT_READY for c in conditions or [])


def is_paused(meta: Mapping[str, Any]) -> bool:
    return str((meta.get("annotations") or {}).get("odradek.dev/pause-reconciliation", "")).lower() == "true"


@dataclass(frozen=True)
class ClusterHealth:
    """What the status timer gathered about a cluster's children and controller."""

    brokers_desired: int
    brokers_ready: int
    controllers_available: int
    zookeeper_desired: int          # 0 when external
    zookeeper_ready: int
    gateway_desired: int            # 0 when absent: the gateway never blocks Ready then
    gateway_available: int
    active_controller: str | None
    under_replicated: int | None
    rolling: str | None = None      # the roll plan's reason while a restart is pending
    blocked: str | None = None      # a refused scale-down
    gateway_pending: bool = False   # a gateway user not taken in yet (its clients would get 401s)
    gateway_rolled_out: bool = True  # no gateway pod of an older spec left (its tokens may lack a user)

    def verdict(self) -> tuple[bool, str, str]:
        """(ready, reason, message)."""
        waiting = []
        if self.zookeeper_desired and self.zookeeper_ready < self.zookeeper_desired:
            waiting.append(f"ZooKeeper {self.zookeeper_ready}/{self.zookeeper_desired} ready")
        if self.controllers_available < 1:
            waiting.append("no controller available")
        if self.brokers_ready < self.brokers_desired:
            waiting.append(f"brokers {self.brokers_ready}/{self.brokers_desired} ready")
        if self.gateway_desired and self.gateway_available < 1:
            waiting.append("no gateway available")
        if self.gateway_desired and self.gateway_pending:
            waiting.append("gateway users not taken in yet (condition GatewayUsersRefused)")
        if self.gateway_desired and not self.gateway_rolled_out:
            waiting.append("gateway rolling out its new spec")
        if waiting:
            return False, "ChildrenNotReady", "; ".join(waiting)
        if self.active_controller is None:
            return False, "NoActiveController", "no controller instance reports itself active"
        if self.rolling:
            return False, "RollingRestart", self.rolling
        if self.under_replicated:
            return False, "UnderReplicated", f"{self.under_replicated} partitions are under-replicated"
        return True, "ClusterReady", f"{self.brokers_ready} brokers ready"

    def phase(self) -> str:
        ready, reason, _ = self.verdict()
        if ready:
            return "Ready"
        return "Rolling" if reason == "RollingRestart" else "NotReady"

    def status_fields(self) -> dict[str, Any]:
        """The OdradekCluster's status fields this health fills in (besides the conditions)."""
        return {"readyBrokers": self.brokers_ready, "desiredBrokers": self.brokers_desired,
                "brokers": f"{self.brokers_ready}/{self.brokers_desired}",
                "activeController": self.active_controller, "underReplicatedPartitions": self.under_replicated,
                "phase": self.phase()}
