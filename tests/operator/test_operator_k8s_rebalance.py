"""OdradekRebalance against a real kube-apiserver, its controller the fake one (``fake_controller``:
its rebalance routes are ``tests/support/fake_rebalance``'s planner and a stepped executor):
proposal → approve → Ready; stop; refresh; invalid specs and the controller's refusals."""

from __future__ import annotations

import pytest

from odradek.dev.waiting import wait_until
from tests.support.k8s import condition

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(3000)]

ANNOTATION = "odradek.dev/rebalance"
CLUSTER_SPEC = {"brokers": {"replicas": 3, "storage": {"type": "ephemeral"}}, "controller": {"replicas": 1},
                "zookeeper": {"external": {"connect": "zk:2181"}}}


def topics(partitions=6, brokers=3, rf=2):
    return [{"name": "orders", "topic_id": "x", "configs": {},
             "partitions": [{"partition": i, "replicas": [(i + j) % brokers for j in range(rf)], "leader": i % brokers,
                             "leader_epoch": 0, "isr": [(i + j) % brokers for j in range(rf)]}
                            for i in range(partitions)]}]


def apply_rebalance(k8s, ns, name, spec, cluster="c", annotations=None):
    return k8s.apply(k8s.cr_path(ns, "odradekrebalances", name), {
        "apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekRebalance",
        "metadata": {"name": name, "namespace": ns, "labels": {"odradek.dev/cluster": cluster},
                     "annotations": annotations or {}}, "spec": spec})


def rebalance(k8s, ns, name):
    return k8s.get(k8s.cr_path(ns, "odradekrebalances", name))


def annotate(k8s, ns, name, value):
    k8s.merge(k8s.cr_path(ns, "odradekrebalances", name), {"metadata": {"annotations": {ANNOTATION: value}}})


def in_state(k8s, ns, name, state):
    def check():
        r = rebalance(k8s, ns, name)
        return r if r and (r.get("status") or {}).get("state") == state else None
    return wait_until(check, 30, f"OdradekRebalance {name} {state}")


def replicas_on(fake, broker):
    return sum(broker in p["replicas"] for t in fake.topics for p in t["partitions"])


@pytest.fixture
def cluster(k8s, operator, namespace, fake_controller):
    fake_controller.topics = topics()
    k8s.apply_cluster(namespace, "c", CLUSTER_SPEC, {"odradek.dev/controller-url": fake_controller.url})
    return fake_controller


def test_proposal_approve_ready(k8s, namespace, cluster):
    ns, fake = namespace, cluster
    fake.rebalancer.brokers = [0, 1, 2, 3]
    apply_rebalance(k8s, ns, "add", {"mode": "add-brokers", "brokers": [3], "replicationThrottle": 1_000_000})
    r = in_state(k8s, ns, "add", "ProposalReady")
    proposal = r["status"]["proposal"]
    assert proposal["moves"] == 3 and proposal["bytesToMove"] == 3000 and proposal["mode"] == "add-brokers"
    assert {b["id"]: (b["before"]["replicas"], b["after"]["replicas"]) for b in proposal["brokers"]}[3] == (0, 3)
    assert condition(r, "ProposalReady")["status"] == "True" and r["status"]["cluster"] == "c"
    assert k8s.child(ns, "ConfigMap", "add")["data"]["proposal-id"] == proposal["id"]
    assert fake.rebalancer.executions == [], "executed before approval"

    annotate(k8s, ns, "add", "approve")
    r = in_state(k8s, ns, "add", "Ready")
    assert condition(r, "Ready")["reason"] == "RebalanceCompleted"
    assert (r["status"]["progress"]["movesDone"], r["status"]["progress"]["movesTotal"]) == (3, 3)
    (execution,) = fake.rebalancer.executions
    assert execution["proposal_id"] == proposal["id"] and execution["throttle_bytes_per_s"] == 1_000_000
    assert execution["concurrency"] == 5 and replicas_on(fake, 3) == 3
    wait_until(lambda: ANNOTATION not in (rebalance(k8s, ns, "add")["metadata"].get("annotations") or {}), 30,
               "the approve annotation to be removed")


def test_stop_refresh_and_refusals(k8s, namespace, cluster):
    ns, fake = namespace, cluster
    fake.rebalancer.hold = True     # the execution makes no progress until released
    apply_rebalance(k8s, ns, "drain", {"mode": "remove-brokers", "brokers": [2]})
    first = in_state(k8s, ns, "drain", "ProposalReady")["status"]["proposal"]
    annotate(k8s, ns, "drain", "approve")
    r = in_state(k8s, ns, "drain", "Rebalancing")
    assert r["status"]["progress"]["movesTotal"] == first["moves"] > 0

    annotate(k8s, ns, "drain", "stop")
    r = in_state(k8s, ns, "drain", "Stopped")
    assert fake.rebalancer.state["state"] == "stopped" and replicas_on(fake, 2) > 0
    wait_until(lambda: ANNOTATION not in (rebalance(k8s, ns, "drain")["metadata"].get("annotations") or {}), 30,
               "the stop annotation to be removed")

    proposals = len(fake.rebalancer.proposals)
    annotate(k8s, ns, "drain", "refresh")
    wait_until(lambda: len(fake.rebalancer.proposals) > proposals, 30, "a new proposal asked for")
    in_state(k8s, ns, "drain", "ProposalReady")

    # an invalid spec and the controller's refusal: NotReady with the reason
    apply_rebalance(k8s, ns, "nobrokers", {"mode": "add-brokers"})
    r = in_state(k8s, ns, "nobrokers", "NotReady")
    assert condition(r, "NotReady")["reason"] == "InvalidSpec" and "brokers" in condition(r, "NotReady")["message"]
    apply_rebalance(k8s, ns, "unknown", {"mode": "remove-brokers", "brokers": [7]})
    r = in_state(k8s, ns, "unknown", "NotReady")
    assert condition(r, "NotReady")["reason"] == "BROKER_NOT_AVAILABLE"
    assert "no broker 7" in condition(r, "NotReady")["message"]
    # fixing the spec asks for a proposal again
    apply_rebalance(k8s, ns, "unknown", {"mode": "remove-brokers", "brokers": [1]})
    in_state(k8s, ns, "unknown", "ProposalReady")
