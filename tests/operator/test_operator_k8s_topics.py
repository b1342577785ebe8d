"""OdradekTopic against a real kube-apiserver and a real Odradek dev cluster.

The dev cluster (ZooKeeper, controller, broker as local processes: conftest's ``dev_cluster``,
shared with the RBAC module) stands in for the pods no kubelet runs here: its OdradekCluster points the operator
at the controller through the ``odradek.dev/controller-url`` annotation."""

from __future__ import annotations

import time

import pytest

from odradek.cluster import control_plane
from odradek.cluster.control_plane_http import call_blocking
from odradek.dev.waiting import wait_until
from tests.support.k8s import condition, ready_check

# The first test to use the API server may pay the one-time cold build of the Kubernetes
# binaries (~18 min measured on 2 cores; see docs/kubernetes.md) inside its setup.
pytestmark = [pytest.mark.k8s, pytest.mark.timeout(3000)]

READY_BUDGET_S = 2.0


@pytest.fixture
def odc(k8s, operator, namespace, dev_cluster):
    """An OdradekCluster ``dev`` whose controller is the dev cluster's."""
    st = dev_cluster.status()
    k8s.apply_cluster(namespace, "dev", {"brokers": {"replicas": 1}, "controller": {"replicas": 1},
                                         "zookeeper": {"external": {"connect": st["zookeeper"]}}},
                      {"odradek.dev/controller-url": st["controller_url"]})
    return st["controller_url"]


def controller_topic(url: str, name: str) -> dict | None:
    topic = call_blocking(url, control_plane.cluster(), timeout=5).metadata.topic(name)
    return None if topic is None else topic.to_json()


def ready(k8s, ns, name, generation=None):
    return ready_check(lambda: k8s.topic(ns, name), generation)


def test_topic_create_alter_increase_delete(k8s, namespace, odc, dev_cluster):
    ns, url = namespace, odc
    t0 = time.monotonic()
    k8s.apply_topic(ns, "orders", {"cluster": "dev", "partitions": 3, "replicas": 1,
                                   "config": {"retention.ms": "3600000"}})
    created_at = wait_until(lambda: controller_topic(url, "orders") and time.monotonic(), 30, "the topic in the controller")
    t = wait_until(ready(k8s, ns, "orders"), 30, "the topic to be Ready", 0.02)
    ready_at = time.monotonic()
    print(f"\ntopic Ready {ready_at - created_at:.2f} s after the controller accepted it "
          f"({ready_at - t0:.2f} s after kubectl apply)")
    assert ready_at - created_at <= READY_BUDGET_S
    topic = controller_topic(url, "orders")
    assert len(topic["partitions"]) == 3 and topic["configs"] == {"retention.ms": "3600000"}
    assert t["status"]["topicId"] == topic["topic_id"]
    assert (t["status"]["partitions"], t["status"]["replicas"], t["status"]["cluster"]) == (3, 1, "dev")

    # partitions increase, configs change
    cr = k8s.apply_topic(ns, "orders", {"cluster": "dev", "partitions": 5, "replicas": 1,
                                        "config": {"retention.ms": "60000", "cleanup.policy": "delete"}})
    wait_until(ready(k8s, ns, "orders", cr["metadata"]["generation"]), 30, "the altered topic")
    topic = controller_topic(url, "orders")
    assert len(topic["partitions"]) == 5
    assert topic["configs"] == {"retention.ms": "60000", "cleanup.policy": "delete"}

    # drift made behind the operator's back is reverted
    call_blocking(url, control_plane.alter_configs(
        "orders", control_plane.AlterConfigs({"retention.ms": "5", "segment.bytes": "1048576"})), timeout=5)
    wait_until(lambda: controller_topic(url, "orders")["configs"] == {"retention.ms": "60000", "cleanup.policy": "delete"},
               30, "the drift to be reverted")

    # delete
    k8s.delete(k8s.cr_path(ns, "odradektopics", "orders"))
    wait_until(lambda: k8s.topic(ns, "orders") is None, 30, "the OdradekTopic to go (finalizer)")
    assert controller_topic(url, "orders") is None


def test_invalid_topic_specs_get_a_clear_status(k8s, namespace, odc):
    ns, url = namespace, odc
    k8s.apply_topic(ns, "shrinking", {"cluster": "dev", "partitions": 4})
    wait_until(ready(k8s, ns, "shrinking"), 30, "the topic to be Ready")

    def failed(name):
        def check():
            t = k8s.topic(ns, name)
            return t if (t.get("status") or {}).get("phase") == "Failed" else None
        return check

    k8s.apply_topic(ns, "shrinking", {"cluster": "dev", "partitions": 2})
    t = wait_until(failed("shrinking"), 30, "the decrease to be refused")
    c = condition(t, "Ready")
    assert (c["status"], c["reason"]) == ("False", "InvalidSpec")
    assert "partitions cannot decrease: the topic has 4, the spec asks for 2" in c["message"]
    assert len(controller_topic(url, "shrinking")["partitions"]) == 4

    # a replication factor above the live brokers: the controller refuses the proposal
    k8s.apply_topic(ns, "shrinking", {"cluster": "dev", "partitions": 4, "replicas": 3})
    t = wait_until(lambda: (x := k8s.topic(ns, "shrinking")) and (condition(x, "Ready") or {}).get(
        "observedGeneration") == 3 and x, 30, "the RF change to be refused")
    assert condition(t, "Ready")["reason"] == "INVALID_REPLICATION_FACTOR", condition(t, "Ready")
    assert t["status"]["phase"] == "Failed"
    assert len(controller_topic(url, "shrinking")["partitions"][0]["replicas"]) == 1

    k8s.apply_topic(ns, "badconfig", {"cluster": "dev", "config": {"retention": "1"}})
    t = wait_until(failed("badconfig"), 30, "the bad config to be refused")
    assert "Unknown topic config name: retention" in condition(t, "Ready")["message"]
    assert controller_topic(url, "badconfig") is None

    # the controller's own refusals are reported too (RF above the live brokers)
    k8s.apply_topic(ns, "toowide", {"cluster": "dev", "partitions": 1, "replicas": 3})
    t = wait_until(failed("toowide"), 30, "the controller's refusal")
    c = condition(t, "Ready")
    assert c["reason"] == "INVALID_REPLICATION_FACTOR" and "larger than available brokers" in c["message"], c


def test_topic_whose_cluster_is_gone_releases_its_finalizer(k8s, operator, namespace):
    ns = namespace
    k8s.apply_topic(ns, "orphan", {"cluster": "ghost", "partitions": 1})
    t = wait_until(lambda: (x := k8s.topic(ns, "orphan")) and condition(x, "NotReady") and x, 30, "NotReady")
    assert "OdradekCluster" in condition(t, "NotReady")["message"] and "ghost" in condition(t, "NotReady")["message"]
    assert "odradek.dev/finalizer" in t["metadata"].get("finalizers", [])
    k8s.delete(k8s.cr_path(ns, "odradektopics", "orphan"))
    wait_until(lambda: k8s.topic(ns, "orphan") is None, 15, "deletion without the cluster")


def test_topic_in_a_terminating_namespace_releases_its_finalizer(k8s, operator, namespace):
    """The cluster CR still exists but its controller is unreachable (its pods went with the
    namespace): deletion must not wait for it. kube-controller-manager here runs no namespace
    controller, so the namespace stays Terminating and the test deletes the topic itself."""
    ns = namespace
    k8s.apply_cluster(ns, "doomed", {"zookeeper": {"external": {"connect": "zk:2181"}}},
                      {"odradek.dev/controller-url": "http://127.0.0.1:9"})
    k8s.apply_topic(ns, "left", {"cluster": "doomed", "partitions": 1})
    wait_until(lambda: "odradek.dev/finalizer" in (k8s.topic(ns, "left")["metadata"].get("finalizers") or []),
               30, "the finalizer")
    k8s.delete(f"/api/v1/namespaces/{ns}")
    wait_until(lambda: k8s.get(f"/api/v1/namespaces/{ns}")["status"].get("phase") == "Terminating", 30, "Terminating")
    k8s.delete(k8s.cr_path(ns, "odradektopics", "left"))
    wait_until(lambda: k8s.topic(ns, "left") is None, 15, "deletion without waiting for the controller")


# -- issue 30: an OdradekTopic manages only its own topics ------------------------------------

def failed_with(k8s, ns, name, reason):
    def check():
        c = condition(k8s.topic(ns, name), "Ready")
        return c if c and c["status"] == "False" and c["reason"] == reason else None
    return check


def apply_annotated_topic(k8s, ns, name, spec, annotations):
    return k8s.apply(k8s.cr_path(ns, "odradektopics", name), {
        "apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekTopic",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations}, "spec": spec})


def test_a_topic_cr_naming_an_internal_topic_is_refused(k8s, namespace, odc):
    ns, url = namespace, odc
    before = controller_topic(url, "__consumer_offsets")
    k8s.apply_topic(ns, "offsets", {"cluster": "dev", "topicName": "__consumer_offsets",
                                    "config": {"retention.ms": "1"}})
    c = wait_until(failed_with(k8s, ns, "offsets", "InternalTopic"), 30, "the internal topic refused")
    assert "'__consumer_offsets' is internal" in c["message"], c
    k8s.delete(k8s.cr_path(ns, "odradektopics", "offsets"))
    wait_until(lambda: k8s.topic(ns, "offsets") is None, 30, "the OdradekTopic to go")
    assert controller_topic(url, "__consumer_offsets") == before


def test_an_existing_topic_is_adopted_only_with_the_annotation(k8s, namespace, odc):
    ns, url = namespace, odc
    call_blocking(url, control_plane.create_topic(control_plane.CreateTopic(
        "legacy", 2, 1, configs={"retention.ms": "1000"})), 10)
    theirs = controller_topic(url, "legacy")
    k8s.apply_topic(ns, "legacy", {"cluster": "dev", "partitions": 2, "config": {"retention.ms": "5000"}})
    c = wait_until(failed_with(k8s, ns, "legacy", "TopicNotOwned"), 30, "the takeover refused")
    assert 'odradek.dev/adopt: "true"' in c["message"], c
    assert controller_topic(url, "legacy") == theirs   # neither altered...
    k8s.delete(k8s.cr_path(ns, "odradektopics", "legacy"))
    wait_until(lambda: k8s.topic(ns, "legacy") is None, 30, "the OdradekTopic to go")
    assert controller_topic(url, "legacy") == theirs   # ...nor deleted

    apply_annotated_topic(k8s, ns, "legacy", {"cluster": "dev", "partitions": 2, "config": {"retention.ms": "5000"}},
                          {"odradek.dev/adopt": "true"})
    t = wait_until(ready(k8s, ns, "legacy"), 30, "the adopted topic")
    assert t["status"]["topicId"] == theirs["topic_id"]
    assert controller_topic(url, "legacy")["configs"] == {"retention.ms": "5000"}
    k8s.delete(k8s.cr_path(ns, "odradektopics", "legacy"))   # adopted: deleted with its OdradekTopic
    wait_until(lambda: k8s.topic(ns, "legacy") is None, 30, "the adopted OdradekTopic to go")
    assert controller_topic(url, "legacy") is None
