"""Conditions and the cluster readiness verdict (pure)."""

from __future__ import annotations

from odradek.operator.reconcile import rolled_out
from odradek.operator.status import ClusterHealth, gateway_users_pending, is_paused, readiness, set_condition


def test_conditions_keep_transition_time_until_status_changes():
    c1 = set_condition([], "Ready", False, "Waiting", "x", 1)
    t = c1[0]["lastTransitionTime"]
    c1[0]["lastTransitionTime"] = "2000-01-01T00:00:00Z"
    c2 = set_condition(c1, "Ready", False, "Waiting", "y", 2)
    assert c2[0]["lastTransitionTime"] == "2000-01-01T00:00:00Z" and c2[0]["message"] == "y"
    c3 = set_condition(c2, "Ready", True, "Ok", "", 2)
    assert c3[0]["lastTransitionTime"] != "2000-01-01T00:00:00Z" and t
    assert set_condition(c3, "Ready", None) == []


def test_readiness_pairs_ready_and_not_ready():
    conds = readiness([], False, "ChildrenNotReady", "brokers 0/3 ready", 1)
    assert [(c["type"], c["status"]) for c in conds] == [("Ready", "False"), ("NotReady", "True")]
    conds = readiness(conds, True, "ClusterReady", "", 1)
    assert [(c["type"], c["status"]) for c in conds] == [("Ready", "True")]


def test_pause_annotation():
    assert is_paused({"annotations": {"odradek.dev/pause-reconciliation": "true"}})
    assert not is_paused({"annotations": {"odradek.dev/pause-reconciliation": "false"}})
    assert not is_paused({})


def health(**kw):
    base = dict(brokers_desired=3, brokers_ready=3, controllers_available=1, zookeeper_desired=3,
                zookeeper_ready=3, gateway_desired=0, gateway_available=0, active_controller="c-0",
                under_replicated=0)
    return ClusterHealth(**{**base, **kw})


def test_verdicts():
    assert health().verdict()[0] and health().phase() == "Ready"
    assert health(brokers_ready=1).verdict() == (False, "ChildrenNotReady", "brokers 1/3 ready")
    assert health(zookeeper_desired=0, zookeeper_ready=0).verdict()[0]   # external ZooKeeper
    assert health(gateway_desired=1).verdict()[2] == "no gateway available"
    assert health(active_controller=None).verdict()[1] == "NoActiveController"
    assert health(under_replicated=2).verdict()[1] == "UnderReplicated"
    assert health(rolling="restarting c-brokers-2").phase() == "Rolling"


def test_a_gateway_user_being_taken_in_holds_ready_a_permanent_refusal_does_not():
    served = dict(gateway_desired=1, gateway_available=1)
    assert health(**served).verdict()[0]
    assert health(**served, gateway_pending=True).verdict() == (
        False, "ChildrenNotReady", "gateway users not taken in yet (condition GatewayUsersRefused)")
    assert health(**served, gateway_rolled_out=False).verdict()[2] == "gateway rolling out its new spec"
    pending = set_condition([], "GatewayUsersRefused", True, "GatewayUserNotReady", "gwr is not Ready yet")
    refused = set_condition([], "GatewayUsersRefused", True, "GatewayUserRefused", "ghost does not exist")
    assert gateway_users_pending(pending) and not gateway_users_pending(refused)
    assert not gateway_users_pending(set_condition(pending, "GatewayUsersRefused", None))
    assert not gateway_users_pending(None)


def test_rolled_out_as_kubectl_rollout_status_judges():
    def dep(generation, **status):
        return {"metadata": {"generation": generation}, "status": status}
    assert rolled_out(dep(2, observedGeneration=2, replicas=1, updatedReplicas=1))
    assert not rolled_out(dep(3, observedGeneration=2, replicas=1, updatedReplicas=1))   # not observed yet
    assert not rolled_out(dep(2, observedGeneration=2, replicas=2, updatedReplicas=1))   # an old pod left
    assert not rolled_out(None)


def test_status_fields():
    assert health(brokers_ready=1, under_replicated=None).status_fields() == {
        "readyBrokers": 1, "desiredBrokers": 3, "brokers": "1/3", "activeController": "c-0",
        "underReplicatedPartitions": None, "phase": "NotReady"}
