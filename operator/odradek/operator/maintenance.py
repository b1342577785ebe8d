"""Maintenance mode from an annotation (docs/kubernetes.md, "Maintenance mode"; Redpanda's
``rpk cluster maintenance``): ``odradek.dev/maintenance: "1,2"`` on the OdradekCluster puts
those brokers in maintenance through the controller's ``{PREFIX}/brokers/{id}/maintenance``
routes (their leaderships move away, they keep running and replicating); taking an id out of
the annotation, or removing it, ends that broker's maintenance.

On the cluster, not on a pod: a pod's annotation goes with the pod, and maintenance usually
precedes restarting that very pod. The operator ends only the maintenance it started (the ids
it enabled are kept in ``operator.odradek.dev/maintenance``, an annotation kopf leaves out of
its diffs), so ``odradek maintenance enable`` by hand is never undone by it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from odradek.operator import admin
from odradek.operator.spec import Brokers

ANNOTATION = "odradek.dev/maintenance"
ENABLED = "operator.odradek.dev/maintenance"    # the ids the operator put in maintenance


@dataclass(frozen=True)
class MaintenancePlan:
    enable: tuple[int, ...]
    disable: tuple[int, ...]
    refused: str | None = None      # the annotation names no broker of the cluster


def _ids(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def plan(annotations: Mapping[str, str], brokers: int) -> MaintenancePlan:
    """What to enable and disable: the annotation's ids vs. those the operator enabled before."""
    wanted, bad = set(), []
    for part in _ids(annotations.get(ANNOTATION)):
        if part.isdigit() and int(part) < brokers:
            wanted.add(int(part))
        else:
            bad.append(part)
    before = {int(p) for p in _ids(annotations.get(ENABLED)) if p.isdigit()}
    refused = (f"{ANNOTATION}: {', '.join(bad)} is not a broker id of this cluster (0..{brokers - 1})"
               if bad else None)
    return MaintenancePlan(tuple(sorted(wanted - before)), tuple(sorted(before - wanted)), refused)


@dataclass(frozen=True)
class MaintenanceOutcome:
    enabled: str | None             # the new value of ``ENABLED`` (None: nothing was to do)
    problem: str | None = None      # to report
    retry: bool = False             # the controller failed: look again later


def sync(client: admin.ControllerClient, annotations: Mapping[str, str], brokers: int) -> MaintenanceOutcome:
    """Apply ``plan`` through the controller."""
    todo = plan(annotations, brokers)
    done = {int(p) for p in _ids(annotations.get(ENABLED)) if p.isdigit()}
    try:
        for broker in todo.enable:
            client.enable_maintenance(broker)
            done.add(broker)
        for broker in todo.disable:
            client.disable_maintenance(broker)
            done.discard(broker)
    except (admin.Unreachable, admin.AdminError) as e:
        return MaintenanceOutcome(",".join(map(str, sorted(done))), f"maintenance mode: {e}", True)
    return MaintenanceOutcome(",".join(map(str, sorted(done))), todo.refused)


def apply(body: Mapping[str, Any], client: Callable[[], admin.ControllerClient]) -> MaintenanceOutcome:
    """``sync`` for an OdradekCluster, when there is anything to do (the annotation set, or
    maintenance the operator started still on)."""
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    if not (_ids(annotations.get(ANNOTATION)) or _ids(annotations.get(ENABLED))):
        return MaintenanceOutcome(None)
    brokers = int(((body.get("spec") or {}).get("brokers") or {}).get("replicas", Brokers.replicas))
    return sync(client(), annotations, brokers)
