"""OdradekMirrorMaker2 against the real kube-apiserver, with the operator running as a process
(the shared ``operator`` fixture).

No kubelet: MirrorMaker never runs here, so the resource stays NotReady; what is checked is
every object it makes on a secured cluster (owner references, the mm2.properties of a migration,
the Deployment, the target user and its ACLs), its status, and that a spec the operator cannot
take fails for good. MirrorMaker itself runs in tests/compat/test_mirror_maker.py, on the
migration file of docs/migration.md, which tests/operator/test_operator_mirrormaker2.py finds
key by key in what the operator writes (one MirrorMaker run in CI, not two)."""

from __future__ import annotations

import pytest

from odradek.dev.waiting import wait_until
from tests.operator.test_operator_k8s_connect import CLUSTER
from tests.operator.test_operator_mirrormaker2 import java_properties
from tests.support.k8s import condition

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(600)]

API = "/apis/odradek.dev/v1alpha1"


def apply_mirror_maker(k8s, namespace: str, name: str, spec: dict) -> dict:
    return k8s.apply(k8s.cr_path(namespace, "odradekmirrormaker2s", name), {
        "apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekMirrorMaker2",
        "metadata": {"name": name, "namespace": namespace, "labels": {"odradek.dev/cluster": "c"}}, "spec": spec})


def test_mirror_maker_on_a_secured_cluster_gets_its_config_deployment_and_least_privileged_user(
        k8s, operator, namespace):
    k8s.apply_cluster(namespace, "c", CLUSTER)
    cr = apply_mirror_maker(k8s, namespace, "m", {
        "source": {"alias": "kafka", "bootstrapServers": "kafka-0.example:9092", "secretName": "kafka-creds",
                   "config": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"},
                   "secretConfig": {"sasl.jaas.config": "jaas"}},
        "targetAlias": "odradek", "topicsPattern": "orders.*", "groupsPattern": "orders-.*",
        "replicationPolicy": "identity", "checkpoints": {"syncGroupOffsets": True}})
    owned = {kind: wait_until(lambda kind=kind, path=path: k8s.get(path.format(ns=namespace)), 60, kind, 0.2)
             for kind, path in (
                 ("Deployment", "/apis/apps/v1/namespaces/{ns}/deployments/m-mirrormaker2"),
                 ("ConfigMap", "/api/v1/namespaces/{ns}/configmaps/m-mirrormaker2-config"),
                 ("OdradekUser", API + "/namespaces/{ns}/odradekusers/m-mirrormaker2"))}
    for kind, obj in owned.items():
        assert [(r["kind"], r["name"], r["uid"], r.get("controller")) for r in obj["metadata"]["ownerReferences"]] \
            == [("OdradekMirrorMaker2", "m", cr["metadata"]["uid"], True)], kind
    props = java_properties(owned["ConfigMap"]["data"]["mm2.properties"])
    assert props["odradek.bootstrap.servers"] == f"c-bootstrap.{namespace}.svc:9092"
    assert props["odradek.security.protocol"] == "SASL_SSL" and props["kafka->odradek.topics"] == "orders.*"
    assert props["replication.policy.class"] == "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
    assert props["sync.group.offsets.enabled"] == "true"
    assert props["kafka.sasl.jaas.config"] == "${dir:/etc/odradek/mm2/source:jaas}"
    pod = owned["Deployment"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["command"][-1].endswith("--clusters odradek")
    assert {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v} == {
        "c-cluster-ca-cert", "m-mirrormaker2", "kafka-creds"}
    user = owned["OdradekUser"]["spec"]
    assert user["cluster"] == "c" and user["authentication"] == {"type": "scram-sha-512"}
    acls = {(a["resource"]["type"], a["resource"]["name"], a["resource"].get("patternType", "literal"))
            for a in user["authorization"]["acls"]}
    assert {("topic", "orders", "prefix"), ("group", "orders-", "prefix"), ("group", "kafka-mm2", "literal"),
            ("topic", "kafka.checkpoints.internal", "literal")} <= acls
    assert not any(name == "*" for _, name, _ in acls)

    def reported():
        st = (k8s.get(k8s.cr_path(namespace, "odradekmirrormaker2s", "m")) or {}).get("status") or {}
        return st if condition({"status": st}, "Ready") and st.get("readyReplicas") is not None else None
    status = wait_until(reported, 60, "the OdradekMirrorMaker2's status", 0.2)
    ready = condition({"status": status}, "Ready")
    assert ready["status"] == "False" and ready["reason"] == "ChildrenNotReady"
    assert ready["message"].startswith("MirrorMaker 0/1 ready") and "OdradekUser m-mirrormaker2 not Ready" in ready["message"]
    assert (status["flow"], status["user"], status["replicationPolicy"]) == ("kafka->odradek", "m-mirrormaker2",
                                                                           "identity")
    assert status["sourceBootstrapServers"] == "kafka-0.example:9092"

    # an operator-owned key in spec.config: Failed with the reason, nothing re-applied
    path = k8s.cr_path(namespace, "odradekmirrormaker2s", "m")
    k8s.merge(path, {"spec": {"config": {"sync.topic.acls.enabled": True}}})
    failed = wait_until(lambda: (c := condition(k8s.get(path), "Ready")) and c["reason"] == "InvalidSpec" and c,
                        60, "the refusal", 0.2)
    assert "sync.topic.acls.enabled" in failed["message"] and k8s.get(path)["status"]["phase"] == "Failed"
