"""Pure decisions of an OdradekRebalance (Strimzi's KafkaRebalance, on the controller's
rebalance routes: docs/control-plane.md "Rebalance", docs/kubernetes.md "OdradekRebalance").

Owns: the spec (``parse_rebalance``: ``mode`` full | add-brokers | remove-brokers, ``brokers``,
``replicationThrottle``, ``concurrentPartitionMovementsPerBroker``), the states and the one
transition each (state, annotation) pair makes (``decide``), and the status fields built from
the controller's answers (``proposal_status``, ``progress_status``, ``after_execution``).

States, as Strimzi's (each is also the one state condition, ``status: "True"``):
``New`` → ``ProposalReady`` (a proposal in ``status.proposal``) → ``odradek.dev/rebalance:
approve`` (or ``odradek.dev/rebalance-auto-approval: "true"``) → ``Rebalancing`` (progress in
``status.progress``) → ``Ready``; ``stop`` while rebalancing → ``Stopped``; ``refresh`` asks
for a new proposal from ``ProposalReady``, ``Ready``, ``Stopped`` or ``NotReady``; a changed
spec does too. ``NotReady``: the controller refused (its message in the condition). An
annotation that was acted on is removed; one that does not apply in a state is left alone.
No I/O here: ``rebalance_run`` does the calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from odradek.cluster.control_plane_rebalance import DEFAULT_CONCURRENCY, MODES
from odradek.operator.spec import SpecError

ANNOTATION = "odradek.dev/rebalance"
AUTO_APPROVAL = "odradek.dev/rebalance-auto-approval"
TEMPLATE = "odradek.dev/rebalance-template"
APPROVE, STOP, REFRESH = "approve", "stop", "refresh"

NEW, PROPOSAL_READY, REBALANCING = "New", "ProposalReady", "Rebalancing"
READY, STOPPED, NOT_READY = "Ready", "Stopped", "NotReady"
STATES = (NEW, PROPOSAL_READY, REBALANCING, READY, STOPPED, NOT_READY)


@dataclass(frozen=True)
class RebalanceSpec:
    mode: str = "full"
    brokers: tuple[int, ...] = ()
    throttle: int | None = None                 # ``replicationThrottle``, bytes/s; None: unthrottled
    concurrency: int = DEFAULT_CONCURRENCY      # ``concurrentPartitionMovementsPerBroker``


def parse_rebalance(spec: Mapping[str, Any]) -> RebalanceSpec:
    mode = spec.get("mode", "full")
    if mode not in MODES:
        raise SpecError(f"mode: {mode!r} is not one of {', '.join(MODES)}")
    brokers = spec.get("brokers") or []
    if not all(isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in brokers):
        raise SpecError(f"brokers: {brokers!r} is not a list of broker ids")
    if mode == "full" and brokers:
        raise SpecError("brokers: only the add-brokers and remove-brokers modes take brokers")
    if mode != "full" and not brokers:
        raise SpecError(f"brokers: the {mode} mode needs the ids of the brokers to {mode.split('-')[0]}")
    throttle = spec.get("replicationThrottle")
    if throttle is not None and (not isinstance(throttle, int) or throttle < 1):
        raise SpecError(f"replicationThrottle: {throttle!r} is not a positive number of bytes per second")
    concurrency = spec.get("concurrentPartitionMovementsPerBroker", DEFAULT_CONCURRENCY)
    if not isinstance(concurrency, int) or concurrency < 1:
        raise SpecError(f"concurrentPartitionMovementsPerBroker: {concurrency!r} is not a positive integer")
    return RebalanceSpec(mode, tuple(sorted(set(brokers))), throttle, concurrency)


def annotation(meta: Mapping[str, Any]) -> str | None:
    return (meta.get("annotations") or {}).get(ANNOTATION)


def auto_approved(meta: Mapping[str, Any]) -> bool:
    return str((meta.get("annotations") or {}).get(AUTO_APPROVAL, "")).lower() == "true"


def is_template(meta: Mapping[str, Any]) -> bool:
    """A template for ``spec.autoRebalance`` (never executed itself, as Strimzi's)."""
    return str((meta.get("annotations") or {}).get(TEMPLATE, "")).lower() == "true"


@dataclass(frozen=True)
class Step:
    action: str         # "propose" | "execute" | "poll" | "stop" | "none"
    reason: str
    consumed: bool = False      # the annotation was acted on: remove it
    then_execute: bool = False  # "propose": execute the new proposal at once (approved already)


def decide(state: str | None, note: str | None, auto: bool, spec_changed: bool) -> Step:
    """What one pass does: ``state`` the current one, ``note`` the rebalance annotation,
    ``auto`` auto-approval, ``spec_changed`` the generation differs from the one proposed for."""
    approve = auto or note == APPROVE
    if state in (None, "", NEW) or (spec_changed and state != REBALANCING):
        return Step("propose", "a proposal for the spec", consumed=note in (APPROVE, REFRESH), then_execute=approve)
    if state == REBALANCING:
        if note == STOP:
            return Step("stop", "stop asked", consumed=True)
        return Step("poll", "rebalancing")
    if note == REFRESH:
        return Step("propose", "refresh asked", consumed=True, then_execute=auto)
    if state == PROPOSAL_READY and approve:
        return Step("execute", "approved", consumed=note == APPROVE)
    if note:
        return Step("none", f"annotation {ANNOTATION}={note} does not apply in state {state}")
    return Step("none", f"state {state}")


def _load(side: Mapping[str, Any]) -> dict:
    """A broker's load in a proposal (absent counts: 0)."""
    return {key: side.get(key) or 0 for key in ("replicas", "leaders", "bytes")}


def proposal_status(proposal: Mapping[str, Any]) -> dict:
    """``status.proposal`` from the controller's ``Proposal`` (the moves themselves go to the
    rebalance's ConfigMap: a status stays small)."""
    return {"id": proposal["id"], "mode": proposal.get("mode"), "moves": len(proposal.get("moves") or []),
            "bytesToMove": proposal.get("bytes_to_move", 0),
            "brokers": [{"id": b["id"], "before": _load(b.get("before") or {}), "after": _load(b.get("after") or {})}
                        for b in proposal.get("brokers") or []],
            "notes": list(proposal.get("notes") or [])}


def progress_status(answer: Mapping[str, Any]) -> dict:
    """``status.progress`` from the controller's ``RebalanceStatus``."""
    return {"state": answer.get("state"), "movesTotal": answer.get("moves_total", 0),
            "movesDone": answer.get("moves_done", 0), "movesInProgress": answer.get("moves_in_progress", 0),
            "bytesTotal": answer.get("bytes_total", 0), "bytesMoved": answer.get("bytes_moved", 0),
            "throttleBytesPerSecond": answer.get("throttle_bytes_per_s")}


def after_execution(answer: Mapping[str, Any], proposal_id: str | None) -> tuple[str, str, str]:
    """(state, reason, message) of a rebalance whose execution the controller reports in
    ``answer`` (a ``RebalanceStatus``)."""
    if answer.get("id") != proposal_id:
        other = answer.get("id")
        why = ("the controller holds no rebalance (its state was cleared)" if other is None
               else f"the controller runs another rebalance ({other}) now")
        return NOT_READY, "RebalanceLost", why
    state = answer.get("state")
    done, total = answer.get("moves_done", 0), answer.get("moves_total", 0)
    if state == "completed":
        return READY, "RebalanceCompleted", f"{done} of {total} moves done"
    if state == "failed":
        return NOT_READY, "RebalanceFailed", answer.get("error") or "the controller reports the rebalance failed"
    if state == "stopped":
        return STOPPED, "RebalanceStopped", f"stopped after {done} of {total} moves"
    if state == "stopping":
        return REBALANCING, "Stopping", f"stopping: {answer.get('moves_in_progress', 0)} moves in flight finish"
    return REBALANCING, "Rebalancing", f"{done} of {total} moves done"


def state_conditions(conditions: Any, state: str, reason: str, message: str, generation: int | None,
                     now: str) -> list[dict]:
    """The one state condition (Strimzi's KafkaRebalance form), others kept (ReconciliationPaused)."""
    kept = [dict(c) for c in conditions or [] if c.get("type") not in STATES]
    old = next((c for c in conditions or [] if c.get("type") == state), None)
    cond = {"type": state, "status": "True", "reason": reason, "message": message,
            "lastTransitionTime": old.get("lastTransitionTime", now) if old else now}
    if generation is not None:
        cond["observedGeneration"] = generation
    return [cond, *kept]
