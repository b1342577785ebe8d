"""OdradekRebalance against a real kube-apiserver, its controller the fake one (``fake_controller``:
its rebalance routes are ``tests/support/fake_rebalance``'s planner and a stepped executor):
proposal → approve → Ready; stop; refresh; invalid specs and the controller's refusals; an
OdradekCluster's ``spec.autoRebalance`` on scale-up and scale-down (drained before it shrinks)."""

from __future__ import annotations

import pytest

from odradek.dev.waiting import wait_until
from tests.operator.test_operator_k8s_brokers import ensure_pods, mark_ready, pods
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


def auto_state(k8s, ns, c, state):
    def check():
        auto = (k8s.cluster(ns, c).get("status") or {}).get("autoRebalance") or {}
        return auto if auto.get("state") == state else None
    return wait_until(check, 60, f"autoRebalance {state}")


def play_kubelet(k8s, ns, c):
    """Create the brokers' missing pods and mark them ready (no kubelet here)."""
    ensure_pods(k8s, ns, f"{c}-brokers")
    for name, pod in pods(k8s, ns, c).items():
        if (condition(pod, "Ready") or {}).get("status") != "True":
            mark_ready(k8s, ns, name)
    return True


def uids(k8s, ns, c) -> dict[str, str]:
    return {name: pod["metadata"]["uid"] for name, pod in pods(k8s, ns, c).items()}


def handled(cr):
    """The cluster's spec handled: no roll, auto-rebalance idle, no handler retrying."""
    status, annotations = cr.get("status") or {}, cr["metadata"].get("annotations") or {}
    return (not status.get("rolling") and (status.get("autoRebalance") or {}).get("state") == "Idle"
            and not any(k.startswith("operator.odradek.dev/reconcile_cluster") for k in annotations))


def test_auto_rebalance_on_scale_up_then_drain_before_shrink(k8s, namespace, cluster):
    ns, fake, c = namespace, cluster, "c"
    apply_rebalance(k8s, ns, "slow", {"replicationThrottle": 5_000_000, "concurrentPartitionMovementsPerBroker": 2},
                    annotations={"odradek.dev/rebalance-template": "true"})
    auto = [{"mode": "add-brokers", "template": {"name": "slow"}}, {"mode": "remove-brokers"}]
    annotations = {"odradek.dev/controller-url": fake.url}
    k8s.apply_cluster(ns, c, {**CLUSTER_SPEC, "autoRebalance": auto}, annotations)
    wait_until(lambda: k8s.child(ns, "StatefulSet", f"{c}-brokers"), 30, "the brokers' StatefulSet")
    ensure_pods(k8s, ns, f"{c}-brokers")
    for name in pods(k8s, ns, c):
        mark_ready(k8s, ns, name)
    before = uids(k8s, ns, c)

    # scale-up: the new broker gets its share once it is ready
    k8s.apply_cluster(ns, c, {**CLUSTER_SPEC, "brokers": {**CLUSTER_SPEC["brokers"], "replicas": 4},
                              "autoRebalance": auto}, annotations)
    status = auto_state(k8s, ns, c, "RebalanceOnScaleUp")
    assert status["modes"] == [{"mode": "add-brokers", "brokers": [3]}] and "ready" in status["message"]
    assert rebalance(k8s, ns, "c-auto-rebalancing-add-brokers") is None, "rebalanced before the broker was ready"
    fake.rebalancer.brokers = [0, 1, 2, 3]
    # play the kubelet until the rebalance is over and the handler is done with the change
    wait_until(lambda: play_kubelet(k8s, ns, c) and handled(k8s.cluster(ns, c)), 90, "the scale-up handled")
    assert replicas_on(fake, 3) == 3
    # a broker restarts for its own configuration only (revisions.py): broker 3 restarted none of 0-2
    assert {n: u for n, u in uids(k8s, ns, c).items() if n in before} == before
    (execution,) = fake.rebalancer.executions
    assert fake.rebalancer.proposals[-1]["mode"] == "add-brokers" and fake.rebalancer.proposals[-1]["brokers"] == [3]
    assert (execution["throttle_bytes_per_s"], execution["concurrency"]) == (5_000_000, 2)   # the template's
    wait_until(lambda: rebalance(k8s, ns, "c-auto-rebalancing-add-brokers") is None, 30, "the done rebalance deleted")
    assert "state" not in (rebalance(k8s, ns, "slow").get("status") or {}), "a template was executed"

    # scale-down: broker 3 is drained first, the StatefulSet shrinks after
    fake.rebalancer.hold = True
    k8s.apply_cluster(ns, c, {**CLUSTER_SPEC, "autoRebalance": auto}, annotations)
    in_state(k8s, ns, "c-auto-rebalancing-remove-brokers", "Rebalancing")
    status = auto_state(k8s, ns, c, "RebalanceOnScaleDown")
    assert status["modes"] == [{"mode": "remove-brokers", "brokers": [3]}]
    assert k8s.child(ns, "StatefulSet", f"{c}-brokers")["spec"]["replicas"] == 4, "shrunk before the drain"
    assert condition(k8s.cluster(ns, c), "Warning") is None
    fake.rebalancer.hold = False
    wait_until(lambda: k8s.child(ns, "StatefulSet", f"{c}-brokers")["spec"]["replicas"] == 3, 60,
               "the scale-down once broker 3 is drained")
    assert replicas_on(fake, 3) == 0
    auto_state(k8s, ns, c, "Idle")
    assert {n: u for n, u in uids(k8s, ns, c).items() if n in before} == before, "the scale-down restarted a broker"
    wait_until(lambda: rebalance(k8s, ns, "c-auto-rebalancing-remove-brokers") is None, 30, "the drain deleted")


def test_replication_factor_change_up_and_down(k8s, namespace, cluster):
    ns, fake = namespace, cluster
    path = k8s.cr_path(ns, "odradektopics", "orders")

    def apply(rf):
        return k8s.apply(path, {"apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekTopic",
                                "metadata": {"name": "orders", "namespace": ns,
                                             "annotations": {"odradek.dev/adopt": "true"}},
                                "spec": {"cluster": "c", "partitions": 6, "replicas": rf}})

    def rf_in_status(rf):
        return wait_until(lambda: (t := k8s.topic(ns, "orders")) and (t.get("status") or {}).get("replicas") == rf
                          and "replicasChange" not in t["status"] and t, 60, f"replication factor {rf} in status")

    fake.rebalancer.hold = True
    apply(3)
    change = wait_until(lambda: ((k8s.topic(ns, "orders").get("status") or {}).get("replicasChange") or {}).get(
        "state") == "ongoing" and k8s.topic(ns, "orders")["status"]["replicasChange"], 30, "the change ongoing")
    assert change["targetReplicas"] == 3 and change["movesTotal"] == 6
    assert fake.rebalancer.proposals[-1]["replication_factors"] == {"orders": 3}
    fake.rebalancer.hold = False
    rf_in_status(3)
    assert all(len(p["replicas"]) == 3 for p in fake.topics[0]["partitions"])

    apply(2)
    rf_in_status(2)
    assert all(len(p["replicas"]) == 2 for p in fake.topics[0]["partitions"])
    # more replicas than brokers: the controller's refusal fails the topic with its message
    apply(4)
    t = wait_until(lambda: (x := k8s.topic(ns, "orders")) and x["status"].get("phase") == "Failed" and x, 30, "Failed")
    assert condition(t, "Ready")["reason"] == "INVALID_REPLICATION_FACTOR"
