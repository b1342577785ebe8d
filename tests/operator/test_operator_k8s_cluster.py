"""OdradekCluster against a real kube-apiserver, with the operator running as a process.

No kubelet: pods never run, so the cluster stays NotReady; what is checked is every child
object, its spec, owner references, status conditions, pause, and garbage collection
(with kube-controller-manager)."""

from __future__ import annotations

import base64
import re
import time
import urllib.request

import pytest

from odradek.cluster import control_plane
from odradek.dev.waiting import wait_until
from odradek.operator import builders
from tests.operator.plans import children as planned, probe_paths
from tests.support.k8s import condition

# The first test to use the API server may pay the one-time cold build of the Kubernetes
# binaries (~18 min measured on 2 cores; see docs/kubernetes.md) inside its setup.
pytestmark = [pytest.mark.k8s, pytest.mark.timeout(3000)]

SPEC = {"brokers": {"replicas": 3, "storage": {"size": "1Gi"}, "config": {"retention.ms": "60000"}},
        "controller": {"replicas": 2}, "zookeeper": {"managed": {"replicas": 3}}}

CHILDREN = [("ConfigMap", "{c}-config"), ("ConfigMap", "{c}-zookeeper-config"),
            ("Service", "{c}-zookeeper-headless"), ("Service", "{c}-zookeeper"),
            ("StatefulSet", "{c}-zookeeper"), ("Service", "{c}-controller"), ("Deployment", "{c}-controller"),
            ("Service", "{c}-brokers"), ("Service", "{c}-bootstrap"), ("PodDisruptionBudget", "{c}-brokers"),
            ("StatefulSet", "{c}-brokers")]


def wait_children(k8s, ns, cluster, children=CHILDREN, timeout=30):
    def all_there():
        found = {(kind, n.format(c=cluster)): k8s.child(ns, kind, n.format(c=cluster)) for kind, n in children}
        return found if all(found.values()) else None
    return wait_until(all_there, timeout, f"the children of {ns}/{cluster}", 0.2)


def test_cluster_children_specs_owner_references_and_status(k8s, operator, namespace):
    cr = k8s.apply_cluster(namespace, "prod", SPEC)
    children = wait_children(k8s, namespace, "prod")
    for (kind, name), obj in children.items():
        refs = obj["metadata"].get("ownerReferences") or []
        assert [(r["kind"], r["name"], r["uid"], r.get("controller")) for r in refs] == \
            [("OdradekCluster", "prod", cr["metadata"]["uid"], True)], f"{kind}/{name}"
    expected = {(c["kind"], c["metadata"]["name"]): c for c in planned("prod", namespace, cr["spec"])}
    assert set(expected) == set(children)
    for key in (("StatefulSet", "prod-brokers"), ("Deployment", "prod-controller")):   # the planned, secured probes
        probe = children[key]["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
        planned_probe = expected[key]["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
        assert {k: probe[k] for k in planned_probe} == planned_probe   # the server adds successThreshold: 1
    # plaintext listeners, mutual-TLS control plane: ready once in every ISR (status: an older image)
    assert probe_paths(children[("StatefulSet", "prod-brokers")]["spec"]["template"]["spec"]["containers"][0]) == \
        [control_plane.READY.path(), control_plane.STATUS.path()]
    brokers = children[("StatefulSet", "prod-brokers")]
    assert brokers["spec"]["replicas"] == 3
    assert brokers["spec"]["serviceName"] == "prod-brokers"
    assert brokers["spec"]["updateStrategy"]["type"] == "OnDelete"
    assert brokers["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "1Gi"
    args = brokers["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--advertised") + 1] == "$(POD_NAME).prod-brokers.$(POD_NAMESPACE).svc:9092"
    assert "retention.ms=60000" in args
    assert children[("Deployment", "prod-controller")]["spec"]["replicas"] == 2
    assert children[("StatefulSet", "prod-zookeeper")]["spec"]["replicas"] == 3
    zoo_cfg = children[("ConfigMap", "prod-zookeeper-config")]["data"]["zoo.cfg"].splitlines()   # TLS only
    assert "secureClientPort=2181" in zoo_cfg and "ssl.clientAuth=need" in zoo_cfg and "sslQuorum=true" in zoo_cfg
    assert not [line for line in zoo_cfg if line.startswith("clientPort=")]
    assert children[("PodDisruptionBudget", "prod-brokers")]["spec"]["maxUnavailable"] == 1
    assert children[("ConfigMap", "prod-config")]["data"]["zookeeper.connect"] == f"prod-zookeeper.{namespace}.svc:2181"
    assert k8s.child(namespace, "Deployment", "prod-gateway") is None  # no gateway asked for

    def reported():
        st = (k8s.cluster(namespace, "prod") or {}).get("status") or {}
        return st if st.get("brokers") and condition({"status": st}, "Ready") else None
    status = wait_until(reported, 30, "the cluster's status", 0.2)
    assert status["bootstrapServers"] == f"prod-bootstrap.{namespace}.svc:9092"
    assert status["desiredBrokers"] == 3 and status["brokers"].endswith("/3")
    ready = condition({"status": status}, "Ready")
    assert ready["status"] == "False" and ready["reason"] == "ChildrenNotReady", ready
    assert condition({"status": status}, "NotReady")["status"] == "True"
    assert status["phase"] == "NotReady"
    # the operator's own /metrics counted this cluster's reconcile (odradek.operator.metrics)
    scrape = urllib.request.urlopen(operator.metrics_url, timeout=10).read().decode()
    assert re.search(r'^odradek_operator_reconcile_total\{handler="reconcile_cluster",kind="OdradekCluster",'
                     r'outcome="(success|retry)"\} [1-9]', scrape, re.M), scrape
    assert 'odradek_operator_reconcile_duration_seconds_count{handler="reconcile_cluster",kind="OdradekCluster"}' in scrape


def test_spec_change_reaches_existing_children(k8s, operator, namespace):
    k8s.apply_cluster(namespace, "c", SPEC)
    wait_children(k8s, namespace, "c")
    k8s.apply_cluster(namespace, "c", {**SPEC, "controller": {"replicas": 3}, "gateway": {"replicas": 1}})
    wait_until(lambda: k8s.child(namespace, "Deployment", "c-controller")["spec"]["replicas"] == 3, 30,
               "the controller Deployment to scale to 3")
    gw = wait_until(lambda: k8s.child(namespace, "Deployment", "c-gateway"), 30, "the gateway Deployment")
    assert gw["spec"]["replicas"] == 1
    assert k8s.child(namespace, "Service", "c-gateway")["spec"]["type"] == "ClusterIP"


def test_external_zookeeper_makes_no_ensemble(k8s, operator, namespace):
    k8s.apply_cluster(namespace, "ext", {"zookeeper": {"external": {"connect": "zk-0.zk:2181"}}})
    children = [c for c in CHILDREN if "zookeeper" not in c[1]]
    found = wait_children(k8s, namespace, "ext", children)
    assert found[("ConfigMap", "ext-config")]["data"]["zookeeper.connect"] == "zk-0.zk:2181"
    assert k8s.child(namespace, "StatefulSet", "ext-zookeeper") is None


def test_invalid_spec_gets_a_clear_status(k8s, operator, namespace):
    k8s.apply_cluster(namespace, "bad", {"brokers": {"config": {"retention.ms": "soon", "log.bogus": "1"}}})

    def failed():
        cr = k8s.cluster(namespace, "bad")
        return cr if (cr.get("status") or {}).get("phase") == "Failed" else None
    cr = wait_until(failed, 30, "status phase Failed")
    ready = condition(cr, "Ready")
    assert ready["status"] == "False" and ready["reason"] == "InvalidSpec"
    assert "brokers.config" in ready["message"], ready
    assert k8s.child(namespace, "StatefulSet", "bad-brokers") is None
    # fixing the spec recovers
    k8s.apply_cluster(namespace, "bad", {"brokers": {"config": {"retention.ms": "1000"}}})
    wait_until(lambda: k8s.child(namespace, "StatefulSet", "bad-brokers"), 30, "the brokers after the fix")


def test_schema_rejects_out_of_range_values(k8s, operator, namespace):
    with pytest.raises(k8s.ApiException) as e:
        k8s.apply_cluster(namespace, "zero", {"brokers": {"replicas": 0}})
    assert e.value.status == 422 and "spec.brokers.replicas" in e.value.body


def test_pause_annotation_stops_reconciliation(k8s, operator, namespace):
    k8s.apply_cluster(namespace, "p", SPEC)
    wait_children(k8s, namespace, "p")
    pause = {"odradek.dev/pause-reconciliation": "true"}
    k8s.apply_cluster(namespace, "p", {**SPEC, "controller": {"replicas": 4}}, annotations=pause)
    cr = wait_until(lambda: (c := k8s.cluster(namespace, "p")) and condition(c, "ReconciliationPaused") and c,
                    30, "the ReconciliationPaused condition")
    assert condition(cr, "ReconciliationPaused")["status"] == "True"
    assert cr["status"]["phase"] == "Paused"
    time.sleep(3)
    assert k8s.child(namespace, "Deployment", "p-controller")["spec"]["replicas"] == 2
    k8s.apply_cluster(namespace, "p", {**SPEC, "controller": {"replicas": 4}}, annotations={})
    wait_until(lambda: k8s.child(namespace, "Deployment", "p-controller")["spec"]["replicas"] == 4, 30,
               "the paused change to apply after unpausing")
    wait_until(lambda: condition(k8s.cluster(namespace, "p"), "ReconciliationPaused") is None, 30,
               "the ReconciliationPaused condition to go")


def test_deleting_the_cluster_garbage_collects_children(k8s, operator, namespace, k8s_bins):
    from tests.support.k8s import need
    need(k8s_bins, "kube-controller-manager")  # the garbage collector lives there
    k8s.apply_cluster(namespace, "gone", SPEC)
    wait_children(k8s, namespace, "gone")
    k8s.delete(k8s.cr_path(namespace, "odradekclusters", "gone"))
    wait_until(lambda: all(k8s.child(namespace, kind, n.format(c="gone")) is None for kind, n in CHILDREN), 60,
               "garbage collection of every child")


def test_kubectl_explain_and_printer_columns(k8s, operator, namespace, k8s_bins, control_plane):
    import os
    import subprocess

    from tests.support.k8s import need
    kubectl = need(k8s_bins, "kubectl")
    env = {**os.environ, **control_plane.env()}

    def run(*args):
        return subprocess.run([str(kubectl), *args], capture_output=True, text=True, check=True, env=env,
                              timeout=60).stdout
    explained = " ".join(run("explain", "odradekcluster.spec.brokers.storage").split())
    assert "persistent-claim (a PVC per broker" in explained and "deleteClaim" in explained
    assert "It can only increase." in " ".join(run("explain", "odt.spec.partitions").split())
    k8s.apply_cluster(namespace, "cols", SPEC)
    # the status timer's fields (the first reconcile may still be writing phase Reconciling)
    wait_until(lambda: (st := (k8s.cluster(namespace, "cols") or {}).get("status") or {}).get("brokers")
               and st.get("bootstrapServers") and st.get("phase") == "NotReady", 30, "status")
    header, row = run("get", "odc", "-n", namespace).splitlines()[:2]
    assert header.split() == ["NAME", "PHASE", "BROKERS", "READY", "BOOTSTRAP", "AGE"]
    assert row.split()[:4] == ["cols", "NotReady", "0/3", "False"]
    assert row.split()[4] == f"cols-bootstrap.{namespace}.svc:9092"


def test_tiered_storage_store_keys_and_credentials_file(k8s, operator, namespace):
    """spec.tieredStorage: nothing is applied until the credentials Secret exists (the status says
    which), then the brokers get the store's keys and <c>-tiered-storage mounted, a rotated key
    changes their hash; a bad spec is refused with the field and why, by the schema or the operator."""
    tiered = {"bucket": "odradek-tiered", "endpoint": "http://s3.storage.svc:8080", "credentialsSecret": {"name": "s3"}}
    spec = {"zookeeper": {"external": {"connect": "zk:2181"}}, "tieredStorage": tiered}
    k8s.apply_cluster(namespace, "tier", spec)

    def failed(reason):
        return lambda: (cr := k8s.cluster(namespace, "tier")) and (c := condition(cr, "Ready")) \
            and c["reason"] == reason and c
    ready = wait_until(failed("TieredStorageCredentialsMissing"), 30, "the missing Secret reported")
    assert ready["message"] == "tieredStorage.credentialsSecret: Secret s3 does not exist", ready
    assert k8s.child(namespace, "StatefulSet", "tier-brokers") is None
    k8s.apply(f"/api/v1/namespaces/{namespace}/secrets/s3", {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "s3"}, "stringData": {"AWS_ACCESS_KEY_ID": "odradek", "AWS_SECRET_ACCESS_KEY": "k3y"}})
    sts = wait_until(lambda: k8s.child(namespace, "StatefulSet", "tier-brokers"), 30, "the brokers once it exists")
    pod = sts["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    for setting in ("remote.log.storage.system.enable=true", "rsm.config.storage.s3.bucket.name=odradek-tiered",
                    "rsm.config.storage.s3.endpoint.url=http://s3.storage.svc:8080",
                    "rsm.config.storage.aws.credentials.file=/etc/odradek/tiered-storage/credentials"):
        assert args[args.index(setting) - 1] == "--config", setting
    assert {"name": "tiered-storage", "mountPath": "/etc/odradek/tiered-storage", "readOnly": True} in \
        pod["containers"][0]["volumeMounts"]
    assert next(v for v in pod["volumes"] if v["name"] == "tiered-storage")["secret"]["secretName"] == "tier-tiered-storage"
    secret = k8s.child(namespace, "Secret", "tier-tiered-storage")
    assert [r["kind"] for r in secret["metadata"]["ownerReferences"]] == ["OdradekCluster"]
    assert base64.b64decode(secret["data"]["credentials"]).decode() == \
        "[default]\naws_access_key_id = odradek\naws_secret_access_key = k3y\n"
    # a key rotated in the user's Secret (not watched: the status timer notices) rolls the brokers
    before = sts["spec"]["template"]["metadata"]["annotations"][builders.CONFIG_HASH_ANNOTATION]
    k8s.merge(f"/api/v1/namespaces/{namespace}/secrets/s3", {"stringData": {"AWS_SECRET_ACCESS_KEY": "n3w"}})
    wait_until(lambda: k8s.child(namespace, "StatefulSet", "tier-brokers")["spec"]["template"]["metadata"][
        "annotations"][builders.CONFIG_HASH_ANNOTATION] != before, 30, "the brokers' hash to follow the new key")
    assert base64.b64decode(k8s.child(namespace, "Secret", "tier-tiered-storage")["data"]["credentials"]).decode(
        ).endswith("aws_secret_access_key = n3w\n")
    k8s.apply_cluster(namespace, "tier", {**spec, "tieredStorage": {**tiered, "endpoint": "https://id:key@s3.example"}})
    ready = wait_until(failed("InvalidSpec"), 30, "the bad endpoint refused")
    assert ready["message"].startswith("tieredStorage.endpoint: no credentials in the URL"), ready
    with pytest.raises(k8s.ApiException) as e:   # the schema: a bucket is required
        k8s.apply_cluster(namespace, "tier", {**spec, "tieredStorage": {"endpoint": "http://s3:8080"}})
    assert e.value.status == 422 and "spec.tieredStorage.bucket" in e.value.body
