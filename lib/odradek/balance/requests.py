"""A control-plane ``ProposalRequest`` (mode, brokers, replication factors) planned over a
``ClusterModel`` and answered as a ``ProposalView`` (the contract's JSON): shared by the
controller's ``rebalancer`` and ``odradek rebalance --bootstrap-server`` (in-process), so both
plan the same way. Errors are the contract's ``KafkaError`` codes. Pure: no I/O.
"""

from __future__ import annotations

from typing import Iterable

from odradek.cluster import control_plane_rebalance as cpr
from odradek.errors import ErrorCode, KafkaError

from .model import BrokerLoad, ClusterModel, Move, Partition, Proposal
from .planner import PlanError, change_replication_factor, plan


def plan_request(model: ClusterModel, req: cpr.ProposalRequest, live: Iterable[int]) -> Proposal:
    """The mode's plan (none for ``full`` with replication factors alone), then each factor's
    change over the result; one proposal from the model's assignment to the last one's."""
    unknown = set(req.brokers) - set(live)
    if unknown:
        raise KafkaError(ErrorCode.broker_not_available, f"brokers {sorted(unknown)} are not registered")
    topics = {p.topic for p in model.partitions}
    for topic, factor in sorted(req.replication_factors.items()):
        if topic not in topics:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic {topic!r} does not exist")
        if not 1 <= factor <= len(model.brokers):
            raise KafkaError(ErrorCode.invalid_replication_factor,
                             f"replication factor {factor} of {topic} must be between 1 and the "
                             f"{len(model.brokers)} live brokers")
    try:
        steps = [] if req.mode == "full" and req.replication_factors and not req.brokers else \
            [plan(model, req.mode, req.brokers)]
        removed = set(req.brokers) if req.mode == "remove-brokers" else set()
        for topic, factor in sorted(req.replication_factors.items()):
            steps.append(change_replication_factor(_after(model, steps, removed), topic, factor))
    except PlanError as e:
        raise KafkaError(ErrorCode.invalid_request, str(e)) from None
    return _combined(model, req.mode, steps)


def _after(model: ClusterModel, steps: Iterable[Proposal], removed: set[int] = frozenset()) -> ClusterModel:
    """``model`` once ``steps`` are done, without the ``removed`` brokers (drained by the first)."""
    assign = {p.key: p.replicas for p in model.partitions}
    for step in steps:
        assign.update({(m.topic, m.partition): m.after for m in step.moves})
    partitions = tuple(Partition(p.topic, p.partition, assign[p.key], p.leader, p.size, p.bytes_in_rate)
                       for p in model.partitions)
    return ClusterModel(tuple(b for b in model.brokers if b.id not in removed), partitions)


def _combined(model: ClusterModel, mode: str, steps: list[Proposal]) -> Proposal:
    if len(steps) == 1:
        return steps[0]
    final = {p.key: p.replicas for p in _after(model, steps).partitions}
    moves = tuple(Move(p.topic, p.partition, p.replicas, final[p.key], p.size)
                  for p in model.partitions if final[p.key] != p.replicas)
    notes = tuple(n for s in steps for n in s.notes)
    return Proposal(mode, moves, steps[0].before, steps[-1].after, notes)


def proposal_view(proposal: Proposal) -> cpr.ProposalView:
    moves = tuple(cpr.MoveView(m.topic, m.partition, m.before, m.after, m.bytes_to_move) for m in proposal.moves)
    ids = sorted(set(proposal.before) | set(proposal.after))
    brokers = tuple(cpr.BrokerLoads(b, _load(proposal.before.get(b, BrokerLoad())),
                                    _load(proposal.after.get(b, BrokerLoad()))) for b in ids)
    return cpr.ProposalView(cpr.proposal_id(moves), proposal.mode, moves, proposal.bytes_to_move, brokers,
                            proposal.notes)


def _load(x: BrokerLoad) -> cpr.Load:
    return cpr.Load(x.replicas, x.leaders, x.bytes)
