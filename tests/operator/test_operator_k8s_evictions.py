"""Day-2 safety against a real kube-apiserver: evictions of broker pods through the operator's
webhook (``evictions``) become safe rolls, manual rolls by annotation (``manual``), the
brokers' PodDisruptionBudget (``brokers.pdb``).

As in test_operator_k8s_brokers, the test plays the kubelet (pods Ready) and, without
kube-controller-manager, the StatefulSet controller; the fake controller reports the ISRs."""

from __future__ import annotations

import pytest

from odradek.dev.waiting import wait_until
from odradek.operator import rolling
from tests.operator.test_operator_k8s_brokers import ANNOTATION, ensure_pods, mark_ready, pods, pods_path, spec

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(3000)]

ORDERS_IN_SYNC = [{"name": "orders", "topic_id": "x", "configs": {"min.insync.replicas": "2"},
                   "partitions": [{"partition": 0, "replicas": [0, 1, 2], "leader": 0, "leader_epoch": 0,
                                   "isr": [0, 1, 2]}]}]


def running_cluster(k8s, ns, c, fake_controller, **brokers):
    k8s.apply_cluster(ns, c, spec(**brokers), {ANNOTATION: fake_controller.url})
    wait_until(lambda: k8s.child(ns, "StatefulSet", f"{c}-brokers"), 30, "the brokers' StatefulSet")
    ensure_pods(k8s, ns, f"{c}-brokers")
    wait_until(lambda: len(pods(k8s, ns, c)) == 3, 30, "3 broker pods")
    for name in pods(k8s, ns, c):
        mark_ready(k8s, ns, name)
    return uids(k8s, ns, c)


def uids(k8s, ns, c):
    return {n: p["metadata"]["uid"] for n, p in pods(k8s, ns, c).items()}


def evict(k8s, ns, name):
    """POST the pod's eviction subresource (what kubectl drain does); the API's error."""
    with pytest.raises(k8s.ApiException) as refused:
        k8s.call("POST", pods_path(ns, name) + "/eviction",
                 {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}})
    return refused.value


def marked(k8s, ns, name):
    return (k8s.get(pods_path(ns, name)) or {}).get("metadata", {}).get("annotations", {}).get(rolling.MANUAL_ROLL)


def roll(k8s, ns, c, before, expected):
    """Play the kubelet and the StatefulSet controller while the operator restarts ``expected``
    (in that order), one at a time; the pods keep no manual-roll mark."""
    order = []
    while len(order) < len(expected):
        def restarted():
            ensure_pods(k8s, ns, f"{c}-brokers")
            now = uids(k8s, ns, c)
            return [n for n in now if n in before and now[n] != before[n] and n not in order]
        fresh = wait_until(restarted, 60, f"the operator to restart {expected[len(order)]} (done: {order})")
        assert len(fresh) == 1, f"restarted more than one broker at a time: {fresh}"
        order.append(fresh[0])
        assert marked(k8s, ns, fresh[0]) is None
        mark_ready(k8s, ns, fresh[0])
    assert order == expected
    return uids(k8s, ns, c)


def test_evictions_become_safe_rolls(k8s, operator, namespace, fake_controller):
    ns, c = namespace, "drain"
    before = running_cluster(k8s, ns, c, fake_controller)
    # broker 2 is out of the ISR: restarting 0 would take orders-0 below min.insync.replicas 2
    fake_controller.topics = [{**ORDERS_IN_SYNC[0], "partitions": [{**ORDERS_IN_SYNC[0]["partitions"][0],
                                                                     "isr": [0, 1]}]}]
    fake_controller.under_replicated = 1
    refused = evict(k8s, ns, f"{c}-brokers-0")
    assert refused.status == 429 and "Odradek operator" in refused.body, refused.body
    assert marked(k8s, ns, f"{c}-brokers-0") == "true"
    wait_until(lambda: "under-replicated" in (k8s.cluster(ns, c)["status"].get("rolling") or ""), 30,
               "the roll of the evicted broker to wait for the ISR")
    assert uids(k8s, ns, c) == before, "a broker restarted while a partition was short of its ISR"

    fake_controller.topics, fake_controller.under_replicated = ORDERS_IN_SYNC, 0
    before = roll(k8s, ns, c, before, [f"{c}-brokers-0"])
    wait_until(lambda: not k8s.cluster(ns, c)["status"].get("rolling"), 30, "the roll to finish")

    # all in sync: the eviction is still denied, and becomes the operator's restart at once
    refused = evict(k8s, ns, f"{c}-brokers-1")
    assert refused.status == 429 and "Odradek operator" in refused.body, refused.body
    roll(k8s, ns, c, before, [f"{c}-brokers-1"])
    # a pod of no Odradek cluster passes untouched (no kubelet: it goes at once)
    k8s.call("POST", pods_path(ns), {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
                                     "spec": {"containers": [{"name": "web", "image": "nginx"}]}})
    k8s.call("POST", pods_path(ns, "web") + "/eviction",
             {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web", "namespace": ns}})


def test_manual_rolling_update_annotation_on_the_cluster_and_on_a_pod(k8s, operator, namespace, fake_controller):
    ns, c = namespace, "manual"
    before = running_cluster(k8s, ns, c, fake_controller)
    fake_controller.topics = ORDERS_IN_SYNC
    k8s.merge(pods_path(ns, f"{c}-brokers-1"), {"metadata": {"annotations": {rolling.MANUAL_ROLL: "true"}}})
    before = roll(k8s, ns, c, before, [f"{c}-brokers-1"])
    wait_until(lambda: not k8s.cluster(ns, c)["status"].get("rolling"), 30, "the roll to finish")

    k8s.merge(k8s.cr_path(ns, "odradekclusters", c), {"metadata": {"annotations": {rolling.MANUAL_ROLL: "true"}}})
    roll(k8s, ns, c, before, [f"{c}-brokers-2", f"{c}-brokers-1", f"{c}-brokers-0"])
    assert rolling.MANUAL_ROLL not in (k8s.cluster(ns, c)["metadata"].get("annotations") or {})
    wait_until(lambda: not k8s.cluster(ns, c)["status"].get("rolling"), 30, "the roll to finish")


def test_pdb_configured_and_off(k8s, operator, namespace, fake_controller):
    ns, c = namespace, "budget"
    k8s.apply_cluster(ns, c, spec(pdb={"maxUnavailable": 0}), {ANNOTATION: fake_controller.url})
    wait_until(lambda: (k8s.child(ns, "PodDisruptionBudget", f"{c}-brokers") or {}).get("spec", {})
               .get("maxUnavailable") == 0, 30, "a PodDisruptionBudget with maxUnavailable 0")
    k8s.apply_cluster(ns, c, spec(pdb={"enabled": False}), {ANNOTATION: fake_controller.url})
    wait_until(lambda: k8s.child(ns, "PodDisruptionBudget", f"{c}-brokers") is None, 30, "the budget to go")


def test_maintenance_mode_from_the_cluster_annotation(k8s, operator, namespace, fake_controller):
    from odradek.operator import maintenance
    ns, c = namespace, "maint"
    k8s.apply_cluster(ns, c, spec(), {ANNOTATION: fake_controller.url})
    wait_until(lambda: k8s.child(ns, "StatefulSet", f"{c}-brokers"), 30, "the brokers' StatefulSet")
    fake_controller.maintenance.add(0)          # by hand (odradek maintenance enable 0): left alone
    path = k8s.cr_path(ns, "odradekclusters", c)
    k8s.merge(path, {"metadata": {"annotations": {maintenance.ANNOTATION: "1,2"}}})
    wait_until(lambda: fake_controller.maintenance == {0, 1, 2}, 30, "brokers 1 and 2 in maintenance")
    k8s.merge(path, {"metadata": {"annotations": {maintenance.ANNOTATION: "2"}}})
    wait_until(lambda: fake_controller.maintenance == {0, 2}, 30, "broker 1 out of maintenance")
    k8s.merge(path, {"metadata": {"annotations": {maintenance.ANNOTATION: None}}})
    wait_until(lambda: fake_controller.maintenance == {0}, 30, "broker 2 out of maintenance")
