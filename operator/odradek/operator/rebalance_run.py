"""An OdradekRebalance's passes with I/O, and its kopf handlers (registered by
``handlers.register`` through ``register``).

One pass (``run_pass``) reads the resource, lets ``rebalance.decide`` pick the transition and
makes the one controller call it needs: a proposal (its moves kept in a ConfigMap of the
rebalance's name, owned by it, as Strimzi keeps its broker loads: a status stays small), an
execution of those moves, a poll of the execution, or a stop. The resource names its
OdradekCluster by ``spec.cluster`` or the label ``odradek.dev/cluster``.

Failures: an invalid spec and the controller's refusals (4xx) make the state ``NotReady``
with the reason and message; an unreachable controller, a missing cluster or another rebalance
still executing (REASSIGNMENT_IN_PROGRESS) are retried (``kopf.TemporaryError``), the
annotation kept until it is acted on. A timer polls while ``Rebalancing``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

import kopf

from odradek.operator import admin, kube, rebalance, reconcile
from odradek.operator.builders import CLUSTER_LABEL
from odradek.operator.settings import OperatorSettings
from odradek.operator.spec import SpecError
from odradek.operator.status import now

REBALANCE = ("odradek.dev", "v1alpha1", "odradekrebalances")
MOVES_KEY, PROPOSAL_KEY = "moves.json", "proposal-id"


@dataclass
class Pass:
    """What one pass found: the state with its condition's reason and message, the other status
    fields, and whether the annotation was acted on."""

    state: str
    reason: str
    message: str
    fields: dict[str, Any] = field(default_factory=dict)
    consumed: bool = False


def moves_configmap(name: str, namespace: str, cluster: str, proposal: dict) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": {CLUSTER_LABEL: cluster}},
            "data": {PROPOSAL_KEY: proposal["id"], MOVES_KEY: json.dumps(proposal.get("moves") or [])}}


def run_pass(k: kube.Kube, body: dict, settings: OperatorSettings, adopt: Callable[[list[dict]], None]) -> Pass | None:
    """One transition of the rebalance ``body``; None when nothing changes."""
    meta, status = body["metadata"], body.get("status") or {}
    name, namespace, generation = meta["name"], meta["namespace"], meta.get("generation")
    spec = rebalance.parse_rebalance(body.get("spec") or {})
    cluster = reconcile.topic_cluster(k, namespace, meta, body.get("spec") or {})
    step = rebalance.decide(status.get("state"), rebalance.annotation(meta), rebalance.auto_approved(meta),
                            status.get("observedGeneration") not in (None, generation))
    if step.action == "none":
        return None
    client = reconcile.controller_client(k, cluster, settings)
    cluster_name = cluster["metadata"]["name"]
    if step.action == "propose":
        proposal = client.propose_rebalance(spec.mode, spec.brokers)
        configmap = moves_configmap(name, namespace, cluster_name, proposal)
        adopt([configmap])
        k.apply(configmap)
        summary = rebalance.proposal_status(proposal)
        out = Pass(rebalance.PROPOSAL_READY, "ProposalReady",
                   f"{summary['moves']} moves, {summary['bytesToMove']} bytes to move",
                   {"proposal": summary, "progress": None, "observedGeneration": generation,
                    "cluster": cluster_name}, step.consumed)
        if not step.then_execute:
            return out
        status = {**status, "proposal": summary}
    if step.action in ("propose", "execute"):
        return _execute(k, client, name, namespace, spec, status, step.consumed, generation, cluster_name)
    answer = client.stop_rebalance() if step.action == "stop" else client.rebalance_status()
    return _progress(answer, (status.get("proposal") or {}).get("id"), step.consumed)


def _progress(answer: dict, proposal_id: str | None, consumed: bool, **fields: Any) -> Pass:
    state, reason, message = rebalance.after_execution(answer, proposal_id)
    return Pass(state, reason, message, {"progress": rebalance.progress_status(answer), **fields}, consumed)


def _execute(k: kube.Kube, client: admin.ControllerClient, name: str, namespace: str, spec: rebalance.RebalanceSpec,
             status: dict, consumed: bool, generation: int | None, cluster: str) -> Pass:
    """Execute the moves of ``status.proposal`` (read back from the rebalance's ConfigMap)."""
    proposal = status.get("proposal") or {}
    common = {"proposal": proposal, "observedGeneration": generation, "cluster": cluster}
    configmap = k.get("v1", "ConfigMap", namespace, name)
    data = (configmap or {}).get("data") or {}
    if data.get(PROPOSAL_KEY) != proposal.get("id"):
        return Pass(rebalance.NOT_READY, "ProposalMissing", f"the moves of proposal {proposal.get('id')} are not in "
                    f"ConfigMap {name}: annotate {rebalance.ANNOTATION}=refresh", common, consumed)
    moves = json.loads(data.get(MOVES_KEY) or "[]")
    if not moves:
        return Pass(rebalance.READY, "NothingToMove", "the proposal moves nothing", common, consumed)
    try:
        answer = client.execute_rebalance(proposal["id"], moves, spec.throttle, spec.concurrency)
    except admin.AdminError as e:
        if e.code == admin.REASSIGNMENT_IN_PROGRESS:   # retried; the approval stands
            raise reconcile.Waiting(f"{e.name}: {e.message}") from None
        raise
    return _progress(answer, proposal["id"], consumed, **common)


# -- kopf -----------------------------------------------------------------------------------

def _write(patch: kopf.Patch, old: dict, generation: int | None, out: Pass) -> None:
    patch.status.update(out.fields)
    patch.status["state"] = out.state
    patch.status["conditions"] = rebalance.state_conditions(old.get("conditions"), out.state, out.reason,
                                                            out.message, generation, now())


def _consume(meta: kopf.Meta, out: Pass) -> None:
    """The annotation acted on is removed, unless the user replaced it meanwhile (the timer and
    the update handler may both hold a body read before it changed: a stale pass removing a new
    ``refresh`` would lose it)."""
    note = rebalance.annotation(meta)
    if out.consumed and note is not None:
        kube.shared().remove_annotation_if(f"{REBALANCE[0]}/{REBALANCE[1]}", "OdradekRebalance",
                                           meta["namespace"], meta["name"], rebalance.ANNOTATION, note)


def reconcile_rebalance(body: kopf.Body, meta: kopf.Meta, status: kopf.Status, patch: kopf.Patch, logger: Any,
                        operator_settings: OperatorSettings, **_: Any) -> None:
    if rebalance.is_template(meta):
        return
    old, generation = dict(status), meta.get("generation")
    try:
        out = run_pass(kube.shared(), dict(body), operator_settings, lambda objs: kopf.adopt(objs, owner=body))
    except SpecError as e:
        _write(patch, old, generation, Pass(rebalance.NOT_READY, e.reason, str(e), {"observedGeneration": generation}))
        raise kopf.PermanentError(str(e)) from None
    except admin.AdminError as e:
        if not e.permanent:
            raise kopf.TemporaryError(str(e), delay=operator_settings.retry_delay) from None
        failed = Pass(rebalance.NOT_READY, e.name, e.message, {"observedGeneration": generation}, consumed=True)
        _write(patch, old, generation, failed)
        _consume(meta, failed)
        return
    except (reconcile.ClusterMissing, reconcile.Waiting, admin.Unreachable) as e:
        raise kopf.TemporaryError(str(e), delay=operator_settings.retry_delay) from None
    if out is None:
        return
    logger.info("rebalance %s: %s", out.state, out.message)
    _write(patch, old, generation, out)
    _consume(meta, out)


def _rebalancing(status: kopf.Status, **_: Any) -> bool:
    return status.get("state") == rebalance.REBALANCING


def register(registry: kopf.OperatorRegistry, settings: OperatorSettings, bind: Callable[[str, Any], Any]) -> None:
    """The OdradekRebalance's handlers: create/update/resume act on the spec and annotations;
    a timer polls the execution while it runs."""
    handler = bind("OdradekRebalance", reconcile_rebalance)
    for event in (kopf.on.update, kopf.on.create, kopf.on.resume):
        event(*REBALANCE, backoff=settings.retry_delay, registry=registry)(handler)
    kopf.on.timer(*REBALANCE, interval=settings.status_interval, initial_delay=settings.status_interval,
                  when=_rebalancing, registry=registry)(handler)
