"""The pure decisions of OdradekRebalance (``rebalance``) and ``spec.autoRebalance``
(``autorebalance``): specs, the state transitions, the status built from the controller's answers,
the scale-up and scale-down steps."""

from __future__ import annotations

import copy

import pytest

from odradek.operator import autorebalance as auto
from odradek.operator import rebalance as rb
from odradek.operator.spec import SpecError
from odradek.operator.validation import parse_cluster


def test_spec_defaults_and_refusals():
    assert rb.parse_rebalance({}) == rb.RebalanceSpec("full", (), None, 5)
    assert rb.parse_rebalance({"mode": "remove-brokers", "brokers": [4, 3, 4], "replicationThrottle": 10,
                               "concurrentPartitionMovementsPerBroker": 2}) == rb.RebalanceSpec(
        "remove-brokers", (3, 4), 10, 2)
    for bad, words in (({"mode": "add-brokers"}, "needs the ids"), ({"brokers": [1]}, "only the add-brokers"),
                       ({"mode": "shuffle"}, "not one of"), ({"mode": "add-brokers", "brokers": [-1]}, "broker ids"),
                       ({"replicationThrottle": 0}, "positive"), ({"concurrentPartitionMovementsPerBroker": 0}, "positive")):
        with pytest.raises(SpecError, match=words):
            rb.parse_rebalance(bad)


@pytest.mark.parametrize("state, note, auto_, changed, action, consumed, then_execute", [
    (None, None, False, False, "propose", False, False),
    (None, "approve", False, False, "propose", True, True),
    (None, None, True, False, "propose", False, True),
    ("ProposalReady", None, False, False, "none", False, False),
    ("ProposalReady", "approve", False, False, "execute", True, False),
    ("ProposalReady", None, True, False, "execute", False, False),
    ("ProposalReady", "refresh", False, False, "propose", True, False),
    ("ProposalReady", "stop", False, False, "none", False, False),      # left alone
    ("ProposalReady", None, False, True, "propose", False, False),      # a changed spec
    ("Rebalancing", None, False, True, "poll", False, False),           # not while it runs
    ("Rebalancing", "stop", False, False, "stop", True, False),
    ("Rebalancing", "approve", False, False, "poll", False, False),
    ("Stopped", "approve", False, False, "none", False, False),         # refresh first, as Strimzi
    ("Stopped", "refresh", True, False, "propose", True, True),
    ("Ready", "refresh", False, False, "propose", True, False),
    ("NotReady", None, False, False, "none", False, False),
    ("NotReady", "refresh", False, False, "propose", True, False),
])
def test_decide(state, note, auto_, changed, action, consumed, then_execute):
    step = rb.decide(state, note, auto_, changed)
    assert (step.action, step.consumed, step.then_execute) == (action, consumed, then_execute), step.reason


def test_after_execution():
    base = {"id": "p1", "moves_total": 4, "moves_done": 4, "moves_in_progress": 0}
    assert rb.after_execution({**base, "state": "completed"}, "p1")[0] == rb.READY
    assert rb.after_execution({**base, "state": "executing", "moves_done": 1}, "p1")[:2] == (rb.REBALANCING,
                                                                                            "Rebalancing")
    assert rb.after_execution({**base, "state": "stopping"}, "p1")[:2] == (rb.REBALANCING, "Stopping")
    assert rb.after_execution({**base, "state": "stopped", "moves_done": 2}, "p1") == (
        rb.STOPPED, "RebalanceStopped", "stopped after 2 of 4 moves")
    assert rb.after_execution({**base, "state": "failed", "error": "broker 3 died"}, "p1") == (
        rb.NOT_READY, "RebalanceFailed", "broker 3 died")
    assert rb.after_execution({**base, "id": None, "state": "idle"}, "p1")[1] == "RebalanceLost"
    assert "another rebalance (p2)" in rb.after_execution({**base, "id": "p2", "state": "executing"}, "p1")[2]


def test_proposal_and_progress_status():
    proposal = {"id": "ab", "mode": "add-brokers", "bytes_to_move": 30,
                "moves": [{"topic": "t", "partition": 0, "before": [0], "after": [3], "bytes": 30}],
                "brokers": [{"id": 3, "before": {"replicas": 0, "leaders": 0, "bytes": 0},
                             "after": {"replicas": 1, "leaders": 1, "bytes": 30}}], "notes": ["rack goal met"]}
    assert rb.proposal_status(proposal) == {
        "id": "ab", "mode": "add-brokers", "moves": 1, "bytesToMove": 30, "notes": ["rack goal met"],
        "brokers": [{"id": 3, "before": {"replicas": 0, "leaders": 0, "bytes": 0},
                     "after": {"replicas": 1, "leaders": 1, "bytes": 30}}]}
    progress = rb.progress_status({"state": "executing", "moves_total": 2, "moves_done": 1, "moves_in_progress": 1,
                                   "bytes_total": 9, "bytes_moved": 4, "throttle_bytes_per_s": 100})
    assert progress == {"state": "executing", "movesTotal": 2, "movesDone": 1, "movesInProgress": 1,
                        "bytesTotal": 9, "bytesMoved": 4, "throttleBytesPerSecond": 100}


def test_one_state_condition():
    conds = rb.state_conditions([{"type": "ReconciliationPaused", "status": "True"}], rb.PROPOSAL_READY, "r", "m",
                                1, "T0")
    conds = rb.state_conditions(conds, rb.REBALANCING, "r", "m", 1, "T1")
    assert [c["type"] for c in conds] == ["Rebalancing", "ReconciliationPaused"]
    assert rb.state_conditions(conds, rb.REBALANCING, "r", "m2", 1, "T2")[0]["lastTransitionTime"] == "T1"


def test_cluster_auto_rebalance_spec():
    spec = parse_cluster({"autoRebalance": [{"mode": "add-brokers", "template": {"name": "t"}}, {"mode": "remove-brokers"}]})
    assert [(a.mode, a.template) for a in spec.auto_rebalance] == [("add-brokers", "t"), ("remove-brokers", None)]
    assert parse_cluster({}).auto_rebalance == ()
    with pytest.raises(SpecError, match="at most once"):
        parse_cluster({"autoRebalance": [{"mode": "add-brokers"}, {"mode": "add-brokers"}]})


BOTH = {auto.ADD, auto.REMOVE}


def existing(mode, state, brokers, message=""):
    return {mode: auto.Existing(f"c-auto-rebalancing-{mode}", state, tuple(brokers), message)}


def test_scale_up_waits_for_the_new_brokers_then_rebalances_once():
    step = auto.plan_auto(BOTH, (), 3, 5, {0, 1, 2, 3}, True, {})
    assert step.state == auto.SCALE_UP and step.pending == (3, 4) and "brokers 4 to be ready" in step.reason
    assert step.create is None
    step = auto.plan_auto(BOTH, (3, 4), 5, 5, {0, 1, 2, 3, 4}, True, {})
    assert step.create == (auto.ADD, (3, 4)) and step.waiting
    step = auto.plan_auto(BOTH, (3, 4), 5, 5, {0, 1, 2, 3, 4}, True, existing(auto.ADD, "Rebalancing", (3, 4)))
    assert step.state == auto.SCALE_UP and step.create is None and not step.delete
    step = auto.plan_auto(BOTH, (3, 4), 5, 5, {0, 1, 2, 3, 4}, True, existing(auto.ADD, "Ready", (3, 4)))
    assert step.state == auto.IDLE and step.delete == ("c-auto-rebalancing-add-brokers",) and not step.pending
    # one that failed is left to see; the cluster does not wait for it
    step = auto.plan_auto(BOTH, (3, 4), 5, 5, {0, 1, 2, 3, 4}, True, existing(auto.ADD, "NotReady", (3, 4), "boom"))
    assert step.state == auto.IDLE and not step.delete and "boom" in step.reason and step.waiting is None
    # one from an earlier scaling is replaced
    step = auto.plan_auto(BOTH, (), 3, 4, {0, 1, 2, 3}, True, existing(auto.ADD, "NotReady", (3, 4)))
    assert step.delete == ("c-auto-rebalancing-add-brokers",) and step.create is None and step.pending == (3,)


def test_scale_up_without_the_mode_or_scaled_back():
    assert auto.plan_auto({auto.REMOVE}, (), 3, 4, {0, 1, 2, 3}, True, {}).state == auto.IDLE
    assert auto.plan_auto(BOTH, (3,), 3, 3, {0, 1, 2}, True, {}).state == auto.IDLE


def test_scale_down_drains_before_it_shrinks():
    step = auto.plan_auto(BOTH, (), 4, 3, {0, 1, 2, 3}, False, {})
    assert (step.state, step.create, step.holds_scale_down) == (auto.SCALE_DOWN, (auto.REMOVE, (3,)), True)
    step = auto.plan_auto(BOTH, (), 4, 3, {0, 1, 2, 3}, False, existing(auto.REMOVE, "Rebalancing", (3,)))
    assert step.state == auto.SCALE_DOWN and step.holds_scale_down and step.create is None
    step = auto.plan_auto(BOTH, (), 4, 3, {0, 1, 2, 3}, False, existing(auto.REMOVE, "Stopped", (3,), "stop"))
    assert step.holds_scale_down and "refresh" in step.reason
    # drained, yet replicas came back: a new drain
    step = auto.plan_auto(BOTH, (), 4, 3, {0, 1, 2, 3}, False, existing(auto.REMOVE, "Ready", (3,)))
    assert step.state == auto.SCALE_DOWN and step.delete and step.holds_scale_down
    # they hold nothing: the StatefulSet shrinks now, the rebalance goes
    step = auto.plan_auto(BOTH, (), 4, 3, {0, 1, 2, 3}, True, existing(auto.REMOVE, "Ready", (3,)))
    assert step.state == auto.IDLE and step.delete == ("c-auto-rebalancing-remove-brokers",)
    # without remove-brokers the refusal stands (rolling.plan_scale's warning)
    assert not auto.plan_auto({auto.ADD}, (), 4, 3, {0, 1, 2, 3}, False, {}).holds_scale_down


def test_auto_status_and_manifest():
    step = auto.plan_auto(BOTH, (), 4, 3, {0, 1, 2, 3}, False, {})
    status = auto.step_status(step, None, "c-auto-rebalancing-remove-brokers")
    assert status["modes"] == [{"mode": "remove-brokers", "brokers": [3]}] and status["state"] == auto.SCALE_DOWN
    assert auto.step_status(step, status, "x")["lastTransitionTime"] == status["lastTransitionTime"]
    manifest = auto.build_rebalance("c", "ns", auto.ADD, (3,), {"spec": {"replicationThrottle": 7, "mode": "full"}})
    assert manifest["spec"] == {"mode": "add-brokers", "brokers": [3], "replicationThrottle": 7}
    assert manifest["metadata"]["annotations"] == {rb.AUTO_APPROVAL: "true"}
    assert manifest["metadata"]["labels"] == {"odradek.dev/cluster": "c"}


@pytest.fixture
def fake():
    from tests.support.fake_peers import FakeController
    f = FakeController()
    f.topics = [{"name": "t", "topic_id": "x", "configs": {}, "partitions": [
        {"partition": i, "replicas": [i % 3], "leader": i % 3, "leader_epoch": 0, "isr": [i % 3]} for i in range(8)]}]
    yield f
    f.close()


def test_replication_factor_change_steps(fake):
    from odradek.operator import admin, replicas_change

    def step(want, old):
        return replicas_change.step(client, fake.topics[0], want, old)
    client = admin.ControllerClient([fake.url])
    assert step(None, None) is None and step(1, {"state": "ongoing"}) is None
    fake.rebalancer.hold = True
    change = step(2, None)
    assert (change["state"], change["targetReplicas"], change["movesTotal"]) == ("ongoing", 2, 8)
    again = step(2, change)   # polled, not proposed again
    assert again["proposalId"] == change["proposalId"] and len(fake.rebalancer.proposals) == 1
    # another target while it executes: pending until the executor is free
    assert step(3, change)["state"] == "pending"
    fake.rebalancer.hold = False
    client.rebalance_status()   # one batch of 5 moves: the factors are mixed
    before_last = copy.deepcopy(fake.topics[0])
    assert replicas_change.factors(before_last) == {1, 2}
    # the last batch is made by this pass's poll, after its metadata was read
    assert replicas_change.step(client, before_last, 2, change) is None
    assert replicas_change.factors(fake.topics[0]) == {2}
    assert len(fake.rebalancer.proposals) == 2, "proposed again once the change was done"
    with pytest.raises(admin.AdminError, match="INVALID_REPLICATION_FACTOR"):
        step(4, None)


def test_an_annotation_is_removed_only_while_it_still_says_what_the_pass_acted_on(monkeypatch):
    """A pass that read ``stop`` removes ``stop`` by a JSON patch's test, never a ``refresh`` the
    user set since (the timer and the update handler both hold bodies that may be stale)."""
    from odradek.operator import kube, rebalance_run

    calls = []

    class Shared:
        def remove_annotation_if(self, *args):
            calls.append(args)
            return False   # the test op failed: the user changed it meanwhile

    monkeypatch.setattr(kube, "shared", Shared)
    meta = {"name": "drain", "namespace": "ns", "annotations": {rb.ANNOTATION: rb.STOP}}
    rebalance_run._consume(meta, rebalance_run.Pass(rb.STOPPED, "Stopped", "", {}, consumed=True))
    rebalance_run._consume(meta, rebalance_run.Pass(rb.STOPPED, "Stopped", "", {}, consumed=False))
    assert calls == [("odradek.dev/v1alpha1", "OdradekRebalance", "ns", "drain", rb.ANNOTATION, rb.STOP)]
