"""Pure decisions about the brokers' StatefulSet: rolling restarts and scale-down.

The brokers' StatefulSet uses ``updateStrategy: OnDelete``; a changed pod template only
reaches a pod when that pod is deleted and recreated. ``plan_roll`` picks at most one pod to
delete per step, and only when every broker is ready and the controller reports no
under-replicated partition, so a restart never takes a partition below its in-sync replicas
(each roll step waits for the restarted broker to rejoin every ISR before the next). A pod
marked for a manual roll (``manual.MANUAL_ROLL``: the annotation, or an eviction the webhook
turned into one) is pending like an outdated one, and a restart also waits while it would
take a partition below its min.insync.replicas (``at_risk``, from ``manual.below_min_isr``).

``scale_down_blockers`` tells which brokers to be removed still hold replicas.
Each decision returns a value with a one-line ``reason`` for the log and the status.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from odradek.operator import revisions
from odradek.operator.builders import CONFIG_HASH_ANNOTATION, POD_INDEX_LABEL
from odradek.operator.revisions import Revision

MANUAL_ROLL = "odradek.dev/manual-rolling-update"   # Strimzi's strimzi.io/manual-rolling-update


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
        conditions = (pod.get("status") or {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        annotations = meta.get("annotations") or {}
        return cls(meta["name"], int(ordinal), annotations.get(CONFIG_HASH_ANNOTATION),
                   ready, bool(meta.get("deletionTimestamp")), annotations.get(MANUAL_ROLL) == "true",
                   revisions.own_hash(annotations, int(ordinal)))

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
              under_replicated: int | None, at_risk: Mapping[int, Sequence[str]] | None = None) -> RollStep:
    """The next step of a rolling restart towards ``desired`` (``revisions.Revision``, or a
    config hash shared by all) and of manual rolls. A broker restarts only when its own
    revision is not the desired one (adding or removing another restarts nobody).

    Highest ordinal first (the order a StatefulSet rolls in). ``under_replicated`` is the
    controller's count, None when it could not be asked (then nothing is restarted);
    ``at_risk``: broker id -> partitions its restart would take below min.insync.replicas."""
    want = desired if isinstance(desired, Revision) else Revision(desired)
    pods = sorted(pods, key=lambda p: p.ordinal)
    outdated = tuple(p.name for p in reversed(pods) if not p.current(want))
    if not outdated:
        return RollStep("done", "every broker runs the current configuration")
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
