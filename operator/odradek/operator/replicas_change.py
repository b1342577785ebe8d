"""Replication-factor changes of an OdradekTopic (Strimzi's KafkaTopic ``replicasChange``),
through the controller's rebalance routes: a proposal with ``replication_factors`` (new replicas
on the least loaded brokers, or replicas dropped), executed as any rebalance and polled on the
topic's next passes (its drift timer).

``status.replicasChange``: ``state`` pending (another rebalance executes; tried again on the
next pass) or ongoing (with the moves done and the proposal id), ``targetReplicas``,
``message``; absent once the topic has the replication factor its spec asks for. Refusals of
the controller (INVALID_REPLICATION_FACTOR: more replicas than live brokers) propagate as
``admin.AdminError`` and fail the topic with the controller's message.
"""

from __future__ import annotations

from typing import Any, Mapping

from odradek.operator import admin, rebalance, topics

PENDING, ONGOING = "pending", "ongoing"


def factors(metadata: Mapping[str, Any]) -> set[int]:
    """The replication factors of a ``TopicMetadata`` JSON's partitions (several while one moves)."""
    return {len(p["replicas"]) for p in metadata.get("partitions") or []}


def step(client: admin.ControllerClient, metadata: Mapping[str, Any], want: int | None,
         old: Mapping[str, Any] | None) -> dict | None:
    """One pass towards ``want`` replicas of every partition of the topic ``metadata`` (the
    controller's ``TopicMetadata`` JSON); the new ``status.replicasChange``, None when there
    is nothing to change."""
    have = factors(metadata)
    if want is None or have <= {want}:
        return None
    topic, current = metadata["name"], "/".join(str(f) for f in sorted(have))
    old = old or {}
    base = {"targetReplicas": want}
    note = ""
    if old.get("proposalId") and old.get("targetReplicas") == want:
        answer = client.rebalance_status()
        state, _, message = rebalance.after_execution(answer, old["proposalId"])
        if state == rebalance.REBALANCING:
            return {**base, "state": ONGOING, "proposalId": old["proposalId"], "message": message,
                    "movesDone": answer.get("moves_done", 0), "movesTotal": answer.get("moves_total", 0)}
        if state == rebalance.READY:   # the metadata read before this poll may predate the last move
            if factors(topics.find(client.cluster(), topic) or {}) <= {want}:
                return None
        else:   # stopped, failed or lost: proposed again below
            note = f"the previous attempt ended {state}: {message}; "
    proposal = client.propose_rebalance("full", (), {topic: want})
    moves = proposal.get("moves") or []
    if not moves:
        return None
    try:
        answer = client.execute_rebalance(proposal["id"], moves, None, rebalance.DEFAULT_CONCURRENCY)
    except admin.AdminError as e:
        if e.code != admin.REASSIGNMENT_IN_PROGRESS:
            raise
        return {**base, "state": PENDING, "message": f"{note}waiting for the rebalance executing now: {e.message}"}
    return {**base, "state": ONGOING, "proposalId": proposal["id"], "movesDone": answer.get("moves_done", 0),
            "movesTotal": len(moves), "message": f"{note}replication factor {current} -> {want}: "
                                                 f"{len(moves)} partitions move"}
