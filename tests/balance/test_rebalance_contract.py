"""The rebalance routes' contract (control_plane_rebalance, REBALANCE_API.md): bodies parsed and
refused as the controller answers them, JSON round trips, and the proposal a request plans
(modes, replication factors alone or after a mode, the contract's error codes)."""

from __future__ import annotations

import pytest

from odradek.balance import Broker, ClusterModel, Partition
from odradek.balance.requests import plan_request, proposal_view
from odradek.cluster import control_plane_rebalance as cpr
from odradek.errors import ErrorCode, KafkaError


@pytest.mark.parametrize("body", [{"mode": "half"}, {"mode": "add-brokers"}, {"mode": "full", "brokers": ["x"]},
                                  {"replication_factors": {"t": "3"}}])
def test_bad_proposal_requests(body):
    with pytest.raises(KafkaError) as e:
        cpr.ProposalRequest.from_json(body)
    assert e.value.code == ErrorCode.invalid_request


@pytest.mark.parametrize("body", [{"moves": [{"topic": "t", "partition": 0, "before": [1], "after": []}]},
                                  {"moves": [], "throttle_bytes_per_s": 0}, {"moves": [], "concurrency": 0},
                                  {"moves": [{"topic": "t", "partition": 0, "before": [1], "after": [2]}] * 2}])
def test_bad_execute_requests(body):
    with pytest.raises(KafkaError) as e:
        cpr.ExecuteRequest.from_json(body)
    assert e.value.code == ErrorCode.invalid_request


def test_round_trips_and_defaults():
    req = cpr.ExecuteRequest.from_json({"moves": [{"topic": "t", "partition": 0, "before": [1], "after": [2]}]})
    assert req.concurrency == 5 and req.throttle_bytes_per_s is None
    assert req.proposal_id == cpr.proposal_id(req.moves)   # none given: the digest of the moves
    assert cpr.ExecuteRequest.from_json(req.to_json()) == req
    status = cpr.RebalanceStatus("p", "executing", 3, 1, 2, 30, 10, 100, 5, None, None)
    assert cpr.RebalanceStatus.from_json(status.to_json()) == status and status.running
    assert cpr.RebalanceStatus().to_json()["state"] == "idle"


def _model() -> ClusterModel:
    return ClusterModel(tuple(Broker(i) for i in range(1, 6)),
                        tuple(Partition("t", p, tuple((p + i) % 3 + 1 for i in range(2)), (p % 3) + 1, 100)
                              for p in range(6)))


def test_replication_factor_alone_and_after_a_mode():
    alone = proposal_view(plan_request(_model(), cpr.ProposalRequest("full", (), {"t": 3}), range(1, 6)))
    assert all(len(m.after) == 3 for m in alone.moves) and len(alone.moves) == 6
    assert cpr.ProposalView.from_json(alone.to_json()) == alone
    both = plan_request(_model(), cpr.ProposalRequest("remove-brokers", (3,), {"t": 3}), range(1, 6))
    assert all(len(m.after) == 3 and 3 not in m.after for m in both.moves)


@pytest.mark.parametrize("req, code", [
    (cpr.ProposalRequest("add-brokers", (9,)), ErrorCode.broker_not_available),
    (cpr.ProposalRequest("full", (), {"t": 6}), ErrorCode.invalid_replication_factor),
    (cpr.ProposalRequest("full", (), {"t": 0}), ErrorCode.invalid_replication_factor),
    (cpr.ProposalRequest("full", (), {"u": 2}), ErrorCode.unknown_topic_or_partition)])
def test_proposal_errors(req, code):
    with pytest.raises(KafkaError) as e:
        plan_request(_model(), req, range(1, 6))
    assert e.value.code == code
