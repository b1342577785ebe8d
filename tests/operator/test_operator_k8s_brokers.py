"""Rolling restarts, scale-down refusal and PVC growth against a real kube-apiserver.

No kubelet: the test plays the kubelet's part (it marks pods Ready) and, when
kube-controller-manager is not there, the StatefulSet controller's (it creates missing pods
from the StatefulSet's template). A fake controller (``fake_controller``) reports
under-replicated partitions and replica placement."""

from __future__ import annotations

import copy
import json
import time

import pytest

from odradek.dev.waiting import wait_until
from odradek.operator import builders, revisions
from tests.support.k8s import condition

# The first test to use the API server may pay the one-time cold build of the Kubernetes
# binaries (~18 min measured on 2 cores; see docs/kubernetes.md) inside its setup.
pytestmark = [pytest.mark.k8s, pytest.mark.timeout(3000)]

ANNOTATION = "odradek.dev/controller-url"


def spec(**brokers):
    return {"brokers": {"replicas": 3, "storage": {"type": "ephemeral"}, **brokers},
            "controller": {"replicas": 1}, "zookeeper": {"external": {"connect": "zk:2181"}}}


def pods_path(ns, name=None):
    return f"/api/v1/namespaces/{ns}/pods" + (f"/{name}" if name else "")


def ensure_pods(k8s, ns, sts_name):
    """Create the StatefulSet's missing pods from its current template (the StatefulSet
    controller's job; a 409 means it did it)."""
    sts = k8s.child(ns, "StatefulSet", sts_name)
    for i in range(sts["spec"]["replicas"]):
        name = f"{sts_name}-{i}"
        if k8s.get(pods_path(ns, name)) is not None:
            continue
        tpl = copy.deepcopy(sts["spec"]["template"])
        meta = tpl["metadata"]
        meta["name"] = name
        meta.setdefault("labels", {})[builders.POD_INDEX_LABEL] = str(i)
        meta["labels"]["statefulset.kubernetes.io/pod-name"] = name
        try:
            k8s.call("POST", pods_path(ns), {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tpl["spec"]})
        except k8s.ApiException as e:
            if e.status != 409:
                raise


def pods(k8s, ns, cluster):
    sel = f"app.kubernetes.io/instance={cluster},app.kubernetes.io/component=broker"
    items = k8s.call("GET", pods_path(ns), query=[("labelSelector", sel)])["items"]
    return {p["metadata"]["name"]: p for p in items if not p["metadata"].get("deletionTimestamp")}


def mark_ready(k8s, ns, name):
    k8s.call("PATCH", pods_path(ns, name) + "/status",
             {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
             "application/merge-patch+json")


def revision(annotations):
    """The hashes a pod (or the pod template) carries: the shared one and every broker's own
    (``revisions``); a pod created from the current template carries the template's."""
    return f"{annotations.get(builders.CONFIG_HASH_ANNOTATION)} {annotations.get(revisions.BROKER_HASHES_ANNOTATION)}"


def hashes(k8s, ns, cluster):
    return {n: revision(p["metadata"].get("annotations", {})) for n, p in pods(k8s, ns, cluster).items()}


def template_hash(k8s, ns, cluster):
    """The hashes of the brokers' pod template (settings; each broker's certificate)."""
    sts = k8s.child(ns, "StatefulSet", f"{cluster}-brokers")
    return revision(sts["spec"]["template"]["metadata"]["annotations"])


def brokers_up(k8s, ns, c) -> set[str]:
    """Wait for the brokers' StatefulSet, create its 3 pods and mark them Ready; their config hashes."""
    wait_until(lambda: k8s.child(ns, "StatefulSet", f"{c}-brokers"), 60, "the brokers' StatefulSet")
    ensure_pods(k8s, ns, f"{c}-brokers")
    wait_until(lambda: len(pods(k8s, ns, c)) == 3, 30, "3 broker pods")
    for name in pods(k8s, ns, c):
        mark_ready(k8s, ns, name)
    return set(hashes(k8s, ns, c).values())


def test_config_change_rolls_brokers_one_at_a_time(k8s, operator, namespace, fake_controller):
    ns, c = namespace, "roll"
    k8s.apply_cluster(ns, c, spec(config={"retention.ms": "1000"}), {ANNOTATION: fake_controller.url})
    old = brokers_up(k8s, ns, c)
    assert len(old) == 1

    fake_controller.under_replicated = 2
    k8s.apply_cluster(ns, c, spec(config={"retention.ms": "2000"}), {ANNOTATION: fake_controller.url})
    new = wait_until(lambda: (h := template_hash(k8s, ns, c)) not in old and h, 30, "the new pod template")
    # (the status timer reports NotReady between the handler's retries here: no pod has a
    # kubelet, so the controller Deployment is never available)
    wait_until(lambda: (x := k8s.cluster(ns, c)) and "under-replicated" in (x["status"].get("rolling") or "")
               and x["status"]["phase"] == "Rolling", 30, "the roll to wait for in-sync replicas")
    time.sleep(2)
    assert set(hashes(k8s, ns, c).values()) == old, "a broker restarted while partitions were under-replicated"

    fake_controller.under_replicated = 0
    assert_rolls_one_at_a_time(k8s, ns, c, new)


def assert_rolls_one_at_a_time(k8s, ns, c, new):
    """Play the kubelet through a roll of 3 brokers to the template hash ``new``: the operator
    must restart them highest ordinal first, one at a time, each after the previous is ready."""
    order = []
    deadline = time.monotonic() + 90
    while len(order) < 3:
        assert time.monotonic() < deadline, f"rolled {order}; status: {k8s.cluster(ns, c)['status']}"
        ensure_pods(k8s, ns, f"{c}-brokers")
        current = hashes(k8s, ns, c)
        fresh = [n for n, h in current.items() if h == new and n not in order]
        for name in fresh:
            order.append(name)
            # the operator waits for the restarted broker to be ready before the next one
            # (after the last restart the roll is over; readiness is then the cluster's)
            if len(order) < 3:
                wait_until(lambda: f"ready: {name}" in (k8s.cluster(ns, c)["status"].get("rolling") or ""), 20,
                           f"the roll to wait for {name} to be ready")
            time.sleep(1)
            still_old = [n for n, h in hashes(k8s, ns, c).items() if h != new]
            assert len(still_old) == 3 - len(order), f"restarted more than one broker at a time: {still_old}"
            mark_ready(k8s, ns, name)
        time.sleep(0.2)
    assert order == [f"{c}-brokers-2", f"{c}-brokers-1", f"{c}-brokers-0"]
    wait_until(lambda: not k8s.cluster(ns, c)["status"].get("rolling"), 30, "the roll to finish")


def test_scale_down_refused_while_brokers_hold_replicas(k8s, operator, namespace, fake_controller):
    ns, c = namespace, "shrink"
    k8s.apply_cluster(ns, c, spec(), {ANNOTATION: fake_controller.url})
    wait_until(lambda: k8s.child(ns, "StatefulSet", f"{c}-brokers"), 30, "the brokers' StatefulSet")
    fake_controller.topics = [{"name": "orders", "topic_id": "x", "configs": {},
                               "partitions": [{"partition": 0, "replicas": [0, 2], "leader": 0, "leader_epoch": 0,
                                               "isr": [0, 2]}]}]
    k8s.apply_cluster(ns, c, spec(replicas=2), {ANNOTATION: fake_controller.url})
    cr = wait_until(lambda: (x := k8s.cluster(ns, c)) and condition(x, "Warning") and x, 30, "a Warning condition")
    warning = condition(cr, "Warning")
    assert warning["reason"] == "ScaleDownRefused"
    assert "broker 2" in warning["message"] and "orders-0" in warning["message"], warning
    time.sleep(2)
    assert k8s.child(ns, "StatefulSet", f"{c}-brokers")["spec"]["replicas"] == 3

    fake_controller.topics[0]["partitions"][0]["replicas"] = [0, 1]
    wait_until(lambda: k8s.child(ns, "StatefulSet", f"{c}-brokers")["spec"]["replicas"] == 2, 30,
               "the scale-down once broker 2 holds nothing")
    wait_until(lambda: condition(k8s.cluster(ns, c), "Warning") is None, 30, "the Warning to clear")


def test_pvc_size_increase_is_applied(k8s, operator, namespace, fake_controller):
    ns, c = namespace, "grow"
    k8s.apply("/apis/storage.k8s.io/v1/storageclasses/odradek-expandable",
              {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "odradek-expandable"},
               "provisioner": "example.com/none", "allowVolumeExpansion": True})
    storage = {"type": "persistent-claim", "size": "1Gi", "class": "odradek-expandable"}
    k8s.apply_cluster(ns, c, {**spec(), "brokers": {"replicas": 2, "storage": storage}}, {ANNOTATION: fake_controller.url})
    wait_until(lambda: k8s.child(ns, "StatefulSet", f"{c}-brokers"), 30, "the brokers' StatefulSet")
    for name in builders.pvc_names(c, 2):
        try:
            k8s.call("POST", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "odradek-expandable",
                         "resources": {"requests": {"storage": "1Gi"}}}})
        except k8s.ApiException as e:
            if e.status != 409:   # kube-controller-manager's StatefulSet controller made it
                raise
        # only bound claims can grow: play the volume binder
        k8s.call("PATCH", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}/status",
                 {"status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}},
                 "application/merge-patch+json")
    k8s.apply_cluster(ns, c, {**spec(), "brokers": {"replicas": 2, "storage": {**storage, "size": "3Gi"}}},
                      {ANNOTATION: fake_controller.url})
    for name in builders.pvc_names(c, 2):
        wait_until(lambda: k8s.child(ns, "PersistentVolumeClaim", name)["spec"]["resources"]["requests"]["storage"] == "3Gi",
                   30, f"{name} to grow to 3Gi")
    # the StatefulSet's claim template is immutable: it keeps the size it was created with
    sts = k8s.child(ns, "StatefulSet", f"{c}-brokers")
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "1Gi"
    # shrinking is refused with a reason
    k8s.apply_cluster(ns, c, {**spec(), "brokers": {"replicas": 2, "storage": {**storage, "size": "2Gi"}}},
                      {ANNOTATION: fake_controller.url})
    cr = wait_until(lambda: (x := k8s.cluster(ns, c)) and x["status"].get("phase") == "Failed" and x, 30, "Failed")
    assert "cannot shrink volumes from 3Gi to 2Gi" in condition(cr, "Ready")["message"]


def handled(k8s, ns, c, poke: str) -> bool:
    """Whether the operator's reconcile of the cluster with annotation poke=``poke`` finished
    (kopf stores the configuration it handled only once the handler succeeded: no roll pending)."""
    notes = k8s.cluster(ns, c)["metadata"].get("annotations") or {}
    last = json.loads(notes.get("operator.odradek.dev/last-handled-configuration") or "{}")
    return ((last.get("metadata") or {}).get("annotations") or {}).get(POKE) == poke


POKE = "test.odradek.dev/poke"   # an annotation change runs the operator's update handler


def test_scale_up_restarts_no_broker_and_an_own_address_restarts_only_its_broker(k8s, operator, namespace,
                                                                                  fake_controller):
    """Strimzi's per-pod configuration: broker 3 added (its certificate, its load balancer's
    Service, its line of the advertised table) restarts none of brokers 0-2; broker 1's load
    balancer getting its address after broker 1 started restarts broker 1 alone."""
    ns, c = namespace, "perpod"
    lb = {"listeners": [{"name": "lb", "port": 9095, "type": "loadbalancer", "tls": True}]}

    def apply(replicas, poke):
        k8s.apply_cluster(ns, c, {**spec(replicas=replicas), **lb}, {ANNOTATION: fake_controller.url, POKE: poke})

    def uids():
        return {n: p["metadata"]["uid"] for n, p in pods(k8s, ns, c).items()}
    apply(3, "1")
    brokers_up(k8s, ns, c)
    wait_until(lambda: handled(k8s, ns, c, "1"), 60, "the first reconcile to finish")
    before = uids()

    apply(4, "2")
    wait_until(lambda: k8s.child(ns, "StatefulSet", f"{c}-brokers")["spec"]["replicas"] == 4, 30, "4 replicas")
    ensure_pods(k8s, ns, f"{c}-brokers")
    mark_ready(k8s, ns, f"{c}-brokers-3")
    apply(4, "3")   # a reconcile that sees broker 3 Ready: the one that would roll the others
    wait_until(lambda: handled(k8s, ns, c, "3"), 60, "the reconcile after broker 3 is Ready")
    after = uids()
    assert {n: after[n] for n in before} == before, "scaling up restarted an existing broker"

    # play the cloud's load-balancer controller: broker 1's Service gets its address now
    k8s.call("PATCH", f"/api/v1/namespaces/{ns}/services/{c}-brokers-1-lb/status",
             {"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.11"}]}}}, "application/merge-patch+json")
    apply(4, "4")
    wait_until(lambda: uids().get(f"{c}-brokers-1") != after[f"{c}-brokers-1"], 60, "broker 1 to restart")
    ensure_pods(k8s, ns, f"{c}-brokers")
    mark_ready(k8s, ns, f"{c}-brokers-1")
    wait_until(lambda: handled(k8s, ns, c, "4"), 60, "the roll of broker 1 to finish")
    final = uids()
    assert final[f"{c}-brokers-1"] != after[f"{c}-brokers-1"]
    assert {n: u for n, u in final.items() if n != f"{c}-brokers-1"} == {
        n: u for n, u in after.items() if n != f"{c}-brokers-1"}, "a broker restarted for another's address"
    table = json.loads(k8s.child(ns, "ConfigMap", f"{c}-config")["data"]["advertised-listeners.json"])
    assert table["1"].endswith("LB://203.0.113.11:9095")
