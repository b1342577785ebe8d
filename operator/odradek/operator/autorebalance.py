"""An OdradekCluster's ``spec.autoRebalance`` (Strimzi's ``cruiseControl.autoRebalance``):
rebalancing on scale through OdradekRebalances the operator creates and deletes.

- ``add-brokers``: on a scale-up the new broker ids are recorded in ``status.autoRebalance``;
  once their pods are ready an OdradekRebalance ``<cluster>-auto-rebalancing-add-brokers``
  (mode add-brokers, auto-approved) moves their share onto them; deleted once Ready.
- ``remove-brokers``: a scale-down the brokers to remove still hold replicas of is not refused
  (``rolling.plan_scale`` still holds the StatefulSet at its size): an OdradekRebalance
  ``<cluster>-auto-rebalancing-remove-brokers`` drains them; once they hold nothing the plan
  lets the StatefulSet shrink, so the brokers are drained first and removed after, never the
  other way round.

A rebalance that ends NotReady or Stopped is left for the user to see (and to refresh); its
message is the cluster's. The decision (``plan_auto``) is pure; ``sync`` reads and writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from odradek.operator import builders, rebalance, rolling
from odradek.operator.kube import Kube
from odradek.operator.spec import ClusterSpec
from odradek.operator.status import now

IDLE, SCALE_UP, SCALE_DOWN = "Idle", "RebalanceOnScaleUp", "RebalanceOnScaleDown"
ADD, REMOVE = "add-brokers", "remove-brokers"
API = "odradek.dev/v1alpha1"


def rebalance_name(cluster: str, mode: str) -> str:
    return f"{cluster}-auto-rebalancing-{mode}"


@dataclass(frozen=True)
class Existing:
    """An auto-rebalance OdradekRebalance as found."""
    name: str
    state: str | None
    brokers: tuple[int, ...]
    message: str = ""


@dataclass(frozen=True)
class AutoStep:
    state: str
    reason: str = ""                    # what it waits for, None when idle
    create: tuple[str, tuple[int, ...]] | None = None   # (mode, brokers) of the rebalance to create
    delete: tuple[str, ...] = ()
    pending: tuple[int, ...] = ()       # new brokers an add-brokers rebalance is owed to
    brokers: tuple[int, ...] = ()       # the brokers the current mode works on
    holds_scale_down: bool = False      # the refused scale-down waits for the drain (no warning)

    @property
    def waiting(self) -> str | None:
        return self.reason if self.state != IDLE else None


def plan_auto(modes: set[str], pending: tuple[int, ...], current: int | None, desired: int, ready: set[int],
              scale_allowed: bool, existing: Mapping[str, Existing]) -> AutoStep:
    """The next step of ``spec.autoRebalance``: ``modes`` its modes, ``pending`` the new brokers
    still owed a rebalance, ``current``/``desired`` the StatefulSet's replicas and the spec's,
    ``ready`` the ready broker ordinals, ``scale_allowed`` whether ``rolling.plan_scale`` lets a
    scale-down happen now, ``existing`` the auto rebalances by mode."""
    done = tuple(e.name for e in existing.values() if e.state == rebalance.READY)
    if current is not None and desired < current and REMOVE in modes:
        return _scale_down(tuple(range(desired, current)), scale_allowed, existing)
    pending = tuple(sorted({b for b in pending if b < desired} |
                           (set(range(current, desired)) if current is not None and ADD in modes else set())))
    if not pending or ADD not in modes:
        return AutoStep(IDLE, "", delete=done)
    not_ready = [b for b in pending if b not in ready]
    if not_ready:
        return AutoStep(SCALE_UP, f"waiting for brokers {_ids(not_ready)} to be ready before moving replicas "
                                  "onto them", pending=pending, brokers=pending)
    return _follow(ADD, pending, existing, SCALE_UP, f"moving replicas onto brokers {_ids(pending)}")


def _scale_down(brokers: tuple[int, ...], scale_allowed: bool, existing: Mapping[str, Existing]) -> AutoStep:
    if scale_allowed:   # they hold nothing: the StatefulSet shrinks in this pass
        return AutoStep(IDLE, "", delete=tuple(e.name for e in existing.values()))
    step = _follow(REMOVE, brokers, existing, SCALE_DOWN, f"draining brokers {_ids(brokers)} before removing them")
    if step.state == IDLE:   # Ready, yet replicas are back on them (a topic created meanwhile): again
        return AutoStep(SCALE_DOWN, "the brokers to remove hold replicas again: a new drain", delete=step.delete,
                        brokers=brokers, holds_scale_down=True)
    return AutoStep(step.state, step.reason, step.create, step.delete, brokers=brokers, holds_scale_down=True)


def _follow(mode: str, brokers: tuple[int, ...], existing: Mapping[str, Existing], state: str, doing: str) -> AutoStep:
    """Create the ``mode`` rebalance for ``brokers``, or follow the one there."""
    pending = brokers if mode == ADD else ()
    found = existing.get(mode)
    if found is None:
        return AutoStep(state, doing, create=(mode, brokers), pending=pending, brokers=brokers)
    if found.brokers != brokers:   # from an earlier scaling: replaced (created on the next pass)
        return AutoStep(state, doing, delete=(found.name,), pending=pending, brokers=brokers)
    if found.state == rebalance.READY:
        return AutoStep(IDLE, "", delete=(found.name,))
    if found.state in (rebalance.NOT_READY, rebalance.STOPPED):
        why = (f"OdradekRebalance {found.name} is {found.state}: {found.message} (annotate it "
               f"{rebalance.ANNOTATION}=refresh to try again)")
        if mode == ADD:   # the new brokers serve anyway: nothing waits for it
            return AutoStep(IDLE, why)
        return AutoStep(state, why, pending=pending, brokers=brokers)
    return AutoStep(state, f"{doing} ({found.name}: {found.state or rebalance.NEW})", pending=pending, brokers=brokers)


def _ids(ids: Any) -> str:
    return ", ".join(str(i) for i in ids)


def step_status(step: AutoStep, old: Mapping[str, Any] | None, name: str | None) -> dict:
    """``status.autoRebalance``."""
    old = old or {}
    modes = [{"mode": ADD if step.state == SCALE_UP else REMOVE, "brokers": list(step.brokers)}] \
        if step.state != IDLE else ([{"mode": ADD, "brokers": list(step.pending)}] if step.pending else None)
    return {"state": step.state, "rebalance": name if step.state != IDLE else None,
            "message": step.reason or None, "modes": modes,
            "lastTransitionTime": old.get("lastTransitionTime") if old.get("state") == step.state else now()}


# -- with I/O -------------------------------------------------------------------------------

@dataclass(frozen=True)
class AutoOutcome:
    status: dict | None                 # status.autoRebalance (None: off)
    waiting: str | None = None          # retry the cluster's reconcile
    holds_scale_down: bool = False


def _existing(kube: Kube, namespace: str, name: str) -> Existing | None:
    body = kube.get(API, "OdradekRebalance", namespace, name)
    if body is None:
        return None
    status = body.get("status") or {}
    state = status.get("state")
    cond = next((c for c in status.get("conditions") or [] if c.get("type") == state), {})
    return Existing(name, state, tuple((body.get("spec") or {}).get("brokers") or ()), cond.get("message", ""))


def _ready_ordinals(kube: Kube, name: str, namespace: str) -> set[int]:
    selector = ",".join(f"{k}={v}" for k, v in sorted(builders.selector(name, "broker").items()))
    pods = (rolling.PodView.from_pod(p) for p in kube.list("v1", "Pod", namespace, selector))
    return {p.ordinal for p in pods if p.ready and not p.deleting}


def build_rebalance(cluster: str, namespace: str, mode: str, brokers: tuple[int, ...],
                    template: Mapping[str, Any] | None) -> dict:
    """The auto-approved OdradekRebalance of ``mode``; the template's throttle and concurrency."""
    spec: dict[str, Any] = {"mode": mode, "brokers": list(brokers)}
    for key in ("replicationThrottle", "concurrentPartitionMovementsPerBroker"):
        if (template or {}).get("spec", {}).get(key) is not None:
            spec[key] = template["spec"][key]
    return {"apiVersion": API, "kind": "OdradekRebalance",
            "metadata": {"name": rebalance_name(cluster, mode), "namespace": namespace,
                         "labels": {builders.CLUSTER_LABEL: cluster},
                         "annotations": {rebalance.AUTO_APPROVAL: "true"}},
            "spec": spec}


def sync(kube: Kube, body: Mapping[str, Any], spec: ClusterSpec, current: int | None, scale_allowed: bool,
         adopt: Callable[[list[dict]], None]) -> AutoOutcome:
    """One step of ``spec.autoRebalance`` for the cluster ``body`` (``current``: its brokers'
    StatefulSet replicas before this reconcile)."""
    old = (body.get("status") or {}).get("autoRebalance")
    if not spec.auto_rebalance:
        return AutoOutcome(None)
    name, namespace = body["metadata"]["name"], body["metadata"]["namespace"]
    modes = {a.mode: a for a in spec.auto_rebalance}
    existing = {m: e for m in (ADD, REMOVE) if (e := _existing(kube, namespace, rebalance_name(name, m)))}
    pending = tuple(next((m.get("brokers") or [] for m in (old or {}).get("modes") or [] if m.get("mode") == ADD), ()))
    step = plan_auto(set(modes), pending, current, spec.brokers.replicas, _ready_ordinals(kube, name, namespace),
                     scale_allowed, existing)
    for stale in step.delete:
        kube.delete(API, "OdradekRebalance", namespace, stale)
    reason = step.reason
    if step.create is not None:
        mode, brokers = step.create
        template_name = modes[mode].template
        template = kube.get(API, "OdradekRebalance", namespace, template_name) if template_name else None
        if template_name and template is None:
            reason = f"autoRebalance {mode}: the template OdradekRebalance {template_name} does not exist"
        else:
            manifest = build_rebalance(name, namespace, mode, brokers, template)
            adopt([manifest])
            kube.apply(manifest)
    step = AutoStep(step.state, reason, step.create, step.delete, step.pending, step.brokers, step.holds_scale_down)
    mode = REMOVE if step.state == SCALE_DOWN else ADD
    return AutoOutcome(step_status(step, old, rebalance_name(name, mode)), step.waiting, step.holds_scale_down)
