"""Pure decisions about the brokers' StatefulSet: rolling restarts and scale-down.

The brokers' StatefulSet uses ``updateStrategy: OnDelete``; a changed pod template only
reaches a pod when that pod is deleted and recreated. ``plan_roll`` picks at most one pod to
delete per step, and only when every broker is ready and the controller reports no
under-replicated partition, so a restart never takes a partition below its in-sync replicas
(each roll step waits for the restarted broker to rejoin every ISR before the next). A pod
marked for a manual roll (``manual.MANUAL_ROLL``: the annotation, or an eviction the webhook
turned into one) is pending like an outdated one, and a restart also waits while it would
take a partition below its min.insync.replicas (``at_risk``, from ``manual.below_min_isr``).

What the brokers need rolls first, as Strimzi rolls ZooKeeper before Kafka: no broker restarts
while a pod of ZooKeeper or of the controller still runs an older template (a renewed
certificate, a new image), nor until a managed ZooKeeper has been Ready for the brokers'
session timeout (``dependency_rolling``). A ZooKeeper server restores its clients' sessions at
start and expires those not back within the timeout: a broker whose session its restart cost
(kazoo still waiting on a connection attempt made while it was down) registers again and
drops out of every ISR, which the controller and the broker's readiness show only then. A
broker restarted before that was a second broker down (CI's e2e renewal).

``scale_down_blockers`` tells which brokers to be removed still hold replicas.
Each decision returns a value with a one-line ``reason`` for the log and the status.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from odradek.config import BROKER_CONFIGS
from odradek.operator import revisions
from odradek.operator.builders import CONFIG_HASH_ANNOTATION, POD_INDEX_LABEL
from odradek.operator.revisions import Revision

MANUAL_ROLL = "odradek.dev/manual-rolling-update"   # Strimzi's strimzi.io/manual-rolling-update
SESSION_TIMEOUT = "zookeeper.session.timeout.ms"


@dataclass(frozen=True)
class PodView:
    """What the plan needs from one broker pod."""

    name: str
    ordinal: int
    config_hash: str | None
    ready: bool
    deleting: bool = False
    manual: bool = False      # marked for a manual roll (manual.MANUAL_ROLL)
    own_hash: str | None = None   # its own entry of revisions.BROKER_HASHES_ANNOTATION

    @classmethod
    def from_pod(cls, pod: Mapping[str, Any]) -> "PodView":
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        ordinal = labels.get(POD_INDEX_LABEL)
        if ordinal is None:  # before the pod-index label existed: the name's suffix
            ordinal = meta["name"].rsplit("-", 1)[-1]
        annotations = meta.get("annotations") or {}
        return cls(meta["name"], int(ordinal), annotations.get(CONFIG_HASH_ANNOTATION),
                   cls.is_ready(pod), bool(meta.get("deletionTimestamp")), annotations.get(MANUAL_ROLL) == "true",
                   revisions.own_hash(annotations, int(ordinal)))

    @staticmethod
    def is_ready(pod: Mapping[str, Any]) -> bool:
        conditions = (pod.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    def current(self, desired: Revision) -> bool:
        """Runs what it should (``revisions``: the shared hash and its own) and is not marked."""
        return desired.current(self.ordinal, self.config_hash, self.own_hash) and not self.manual


@dataclass(frozen=True)
class RollStep:
    action: str          # "done" | "wait" | "restart"
    reason: str
    pod: str | None = None
    pending: tuple[str, ...] = ()   # pods still on an old configuration

    @property
    def done(self) -> bool:
        return self.action == "done"


def plan_roll(pods: Iterable[PodView], desired: str | Revision, replicas: int,
              under_replicated: int | None, at_risk: Mapping[int, Sequence[str]] | None = None,
              dependencies: str | None = None) -> RollStep:
    """The next step of a rolling restart towards ``desired`` (``revisions.Revision``, or a
    config hash shared by all) and of manual rolls. A broker restarts only when its own
    revision is not the desired one (adding or removing another restarts nobody).

    Highest ordinal first (the order a StatefulSet rolls in). ``under_replicated`` is the
    controller's count, None when it could not be asked (then nothing is restarted);
    ``at_risk``: broker id -> partitions its restart would take below min.insync.replicas;
    ``dependencies``: what ZooKeeper's or the controller's own roll still does
    (``dependency_rolling``), None when they are done."""
    want = desired if isinstance(desired, Revision) else Revision(desired)
    pods = sorted(pods, key=lambda p: p.ordinal)
    outdated = tuple(p.name for p in reversed(pods) if not p.current(want))
    if not outdated:
        return RollStep("done", "every broker runs the current configuration")
    if dependencies:
        return RollStep("wait", dependencies, pending=outdated)
    if any(p.deleting for p in pods):
        return RollStep("wait", "a broker pod is terminating", pending=outdated)
    if len(pods) < replicas:
        return RollStep("wait", f"{len(pods)} of {replicas} broker pods exist", pending=outdated)
    not_ready = [p.name for p in pods if not p.ready]
    if not_ready:
        return RollStep("wait", f"waiting for broker pods to be ready: {', '.join(not_ready)}", pending=outdated)
    if under_replicated is None:
        return RollStep("wait", "cannot ask the controller for under-replicated partitions", pending=outdated)
    if under_replicated > 0:
        return RollStep("wait", f"{under_replicated} partitions are under-replicated", pending=outdated)
    first = next(p for p in pods if p.name == outdated[0])
    risk = (at_risk or {}).get(first.ordinal)
    if risk:
        return RollStep("wait", f"restarting {first.name} would take {len(risk)} partitions below "
                                f"min.insync.replicas ({', '.join(risk[:3])}{', ...' if len(risk) > 3 else ''})",
                        pending=outdated)
    why = "to roll by hand" if first.manual else "on an old configuration"
    return RollStep("restart", f"restarting {outdated[0]} ({len(outdated)} {why})", pod=outdated[0], pending=outdated)


def dependency_rolling(component: str, template: Mapping[str, Any], replicas: int,
                       pods: Iterable[Mapping[str, Any]], need_ready: bool, settle_s: float = 0.0,
                       now: datetime.datetime | None = None) -> str | None:
    """What ``component``'s own roll (a StatefulSet's or Deployment's, by its strategy) still
    does, for the brokers' roll to wait on; None when it is done. ``template``: the pod template
    just applied, ``pods``: the component's pods as listed. Not done while a pod carries other
    values of the template's annotations (the hashes the operator puts there), terminating
    ones included; with ``need_ready`` (ZooKeeper, which nothing else asks) also while fewer
    than ``replicas`` pods are Ready, or one turned Ready less than ``settle_s`` before ``now``.
    Compared on the pods, not on the workload's status, which trails the apply."""
    pods = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    old = outdated(template, pods)
    if old:
        return f"waiting for {component} to roll first: {', '.join(old)} on its previous template"
    if not need_ready:
        return None
    ready = [p for p in pods if not p["metadata"].get("deletionTimestamp") and PodView.is_ready(p)]
    if len(ready) < replicas:
        return f"waiting for {component} to roll first: {len(ready)}/{replicas} pods of its new template ready"
    now = now or datetime.datetime.now(datetime.timezone.utc)
    ages = {p["metadata"]["name"]: (now - since).total_seconds() for p in ready if (since := _ready_since(p))}
    recent = sorted(name for name, age in ages.items() if age < settle_s)
    if recent:
        return (f"waiting for {component} to settle: {', '.join(recent)} Ready for {min(ages[n] for n in recent):.0f} "
                f"of {settle_s:.0f} s (the brokers' sessions it restored expire meanwhile if not back)")
    return None


def outdated(template: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """The running ``pods`` that carry other values of ``template``'s annotations (the operator's
    hashes)."""
    pods = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]   # run no more
    want = (template.get("metadata") or {}).get("annotations") or {}

    def current(pod: Mapping[str, Any]) -> bool:
        have = pod["metadata"].get("annotations") or {}
        return all(have.get(k) == v for k, v in want.items())
    return sorted(p["metadata"]["name"] for p in pods if not current(p))


def _ready_since(pod: Mapping[str, Any]) -> datetime.datetime | None:
    """When the pod turned Ready (the kubelet sets the condition's lastTransitionTime)."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready" and c.get("lastTransitionTime"):
            return datetime.datetime.fromisoformat(c["lastTransitionTime"].replace("Z", "+00:00"))
    return None


def zookeeper_settle_s(broker_config: Mapping[str, str], tick_ms: int) -> float:
    """How long the brokers' roll waits after ZooKeeper turned Ready: the brokers' session
    timeout, after which a session not back has expired (on ZooKeeper's next tick), and a
    tick more for the controller to act on it."""
    timeout_ms = BROKER_CONFIGS[SESSION_TIMEOUT].parse(str(broker_config[SESSION_TIMEOUT])) \
        if SESSION_TIMEOUT in broker_config else BROKER_CONFIGS[SESSION_TIMEOUT].typed_default
    return (timeout_ms + 2 * tick_ms) / 1000


@dataclass(frozen=True)
class ScaleDecision:
    replicas: int        # what the StatefulSet should have now
    allowed: bool
    reason: str


def scale_down_blockers(cluster_metadata: Mapping[str, Any], keep: int) -> dict[int, list[str]]:
    """Brokers with id >= ``keep`` (the ordinals to remove) -> partitions they hold a replica of."""
    held: dict[int, list[str]] = {}
    for topic in cluster_metadata.get("topics") or []:
        for p in topic.get("partitions") or []:
            for broker in p.get("replicas") or []:
                if broker >= keep:
                    held.setdefault(broker, []).append(f"{topic['name']}-{p['partition']}")
    return held


def plan_scale(current: int | None, desired: int, cluster_metadata: Mapping[str, Any] | None) -> ScaleDecision:
    """Scale-up always; scale-down only when the brokers to remove hold no replica."""
    if current is None or desired >= current:
        return ScaleDecision(desired, True, f"{desired} brokers")
    if cluster_metadata is None:
        return ScaleDecision(current, False, f"scale-down from {current} to {desired} brokers waits: "
                                             "the controller cannot be asked which partitions they hold")
    blockers = scale_down_blockers(cluster_metadata, desired)
    if blockers:
        detail = "; ".join(f"broker {b}: {len(ps)} ({', '.join(ps[:3])}{', ...' if len(ps) > 3 else ''})"
                           for b, ps in sorted(blockers.items()))
        return ScaleDecision(current, False, f"scale-down from {current} to {desired} brokers refused: "
                                             f"the brokers to remove still hold partition replicas ({detail}); "
                                             "reassign them first")
    return ScaleDecision(desired, True, f"scaling down from {current} to {desired} brokers")
