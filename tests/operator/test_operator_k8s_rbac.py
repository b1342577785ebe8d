"""The operator under the chart's RBAC, and rack awareness under the brokers' RBAC.

On a control plane of its own (so the session's admin operator, which watches every
namespace, does not reconcile the same objects): ``helm install`` the chart with
``rbac.brokerRack=true``, get a token for its ServiceAccount through the TokenRequest API, run
``odradek operator`` (a real ``kopf run``) with only that token, and let it reconcile a
rack-aware OdradekCluster and a topic against a real Odradek dev cluster (conftest's
``dev_cluster``, shared with the topics module). Then the brokers'
init container command (``odradek operator rack``) reads a Node's label with a token of the
brokers' ServiceAccount, which may read Nodes and nothing else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from odradek.dev.waiting import wait_until
from odradek.operator.settings import TRUSTED_CONTROLLER_URLS_ENV
from tests.operator.conftest import DEV_CONTROLLERS
from tests.operator.test_operator_helm import run
from tests.operator.test_operator_k8s_topics import controller_topic
from tests.support.k8s import K8s, condition, control_plane_module, need

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(3000)]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "odradek"
ZONE = "topology.kubernetes.io/zone"
RELEASE, NS = "odk", "odradek-system"
RACK_ROLE = f"{RELEASE}-odradek-broker-rack"


@pytest.fixture(scope="module")
def plane(k8s_bins, tmp_path_factory):
    cp = control_plane_module.ControlPlane(tmp_path_factory.mktemp("k8s-rbac"), need(k8s_bins, "kube-apiserver"))
    cp.start()
    yield cp
    cp.stop()


@pytest.fixture(scope="module")
def admin(plane) -> K8s:
    return K8s(plane.kubeconfig)


def token_kubeconfig(admin: K8s, plane, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig authenticating as ``namespace/account`` with a TokenRequest token."""
    answer = admin.call("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
                        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                         "spec": {"expirationSeconds": 3600}})
    config = json.loads(plane.kubeconfig.read_text())
    config["users"] = [{"name": "admin", "user": {"token": answer["status"]["token"]}}]
    path.write_text(json.dumps(config))
    return path


@pytest.fixture(scope="module")
def chart_installed(plane, admin, k8s_bins):
    helm = need(k8s_bins, "helm")
    admin.core.create_namespace({"metadata": {"name": NS}})
    run(helm, "install", RELEASE, CHART, "--namespace", NS, "--set", "rbac.brokerRack=true", "--wait=false",
        env=plane.env())
    for plural in ("odradekclusters", "odradektopics", "odradekusers", "odradekrebalances", "odradekconnects",
                   "odradekconnectors", "odradekmirrormaker2s"):
        wait_until(lambda: any(c["type"] == "Established" and c["status"] == "True" for c in
                               (admin.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.odradek.dev")
                                or {}).get("status", {}).get("conditions", [])), 60, f"CRD {plural} established")
    rendered = run(helm, "get", "manifest", RELEASE, "--namespace", NS, env=plane.env()).stdout
    return [d for d in yaml.safe_load_all(rendered) if d]


@pytest.fixture(scope="module")
def chart_operator(plane, admin, chart_installed, tmp_path_factory):
    """``odradek operator`` as the chart's Deployment runs it: the chart's ServiceAccount token,
    the chart's environment."""
    logdir = tmp_path_factory.mktemp("chart-operator")
    kubeconfig = token_kubeconfig(admin, plane, NS, f"{RELEASE}-odradek", logdir / "kubeconfig")
    deployment = next(d for d in chart_installed if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    chart_env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    chart_env.update(POD_NAME="chart-operator-0", POD_NAMESPACE=NS)   # the downward API's
    args = container["args"]
    election = args[args.index("--leader-elect"):]   # the Lease, under the chart's Role
    env = {**os.environ, **chart_env, "KUBECONFIG": str(kubeconfig), "ODRADEK_OPERATOR_STATUS_INTERVAL": "1",
           "ODRADEK_OPERATOR_DRIFT_INTERVAL": "2", "ODRADEK_OPERATOR_RETRY_DELAY": "1",
           TRUSTED_CONTROLLER_URLS_ENV: DEV_CONTROLLERS}
    env.pop("ODRADEK_OPERATOR_CONTROLLER_URL", None)
    log = logdir / "operator.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "odradek.cli", *args[:2], *election], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=ROOT)
    try:
        wait_until(lambda: proc.poll() is not None or "'configure' succeeded" in log.read_text(),
                   60, "the operator to start", 0.2)
        assert proc.poll() is None, f"the operator exited {proc.returncode}:\n{log.read_text()[-3000:]}"
        yield log
    finally:
        control_plane_module.terminate(proc, 15)


def test_chart_rbac_has_no_wildcards_and_grants_nodes_only_to_the_rack_role(chart_installed):
    roles = {d["metadata"]["name"]: d for d in chart_installed if d["kind"] == "ClusterRole"}
    assert set(roles) == {f"{RELEASE}-odradek", RACK_ROLE}
    for role in roles.values():
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] + rule["resources"] + rule.get("apiGroups", []), rule
    assert roles[RACK_ROLE]["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    operator_rules = roles[f"{RELEASE}-odradek"]["rules"]
    assert not [r for r in operator_rules if "nodes" in r["resources"]]
    bind = next(r for r in operator_rules if r["verbs"] == ["bind"])
    assert bind["resourceNames"] == [RACK_ROLE]


def test_operator_with_the_chart_token_reconciles_a_rack_aware_cluster_and_a_topic(
        plane, admin, chart_operator, dev_cluster, tmp_path):
    ns = "apps"
    admin.core.create_namespace({"metadata": {"name": ns}})
    st = dev_cluster.status()
    admin.apply_cluster(ns, "dev", {"brokers": {"replicas": 1}, "controller": {"replicas": 1},
                                    "zookeeper": {"external": {"connect": st["zookeeper"]}},
                                    "rack": {"topologyKey": ZONE}},
                        {"odradek.dev/controller-url": st["controller_url"]})
    binding_path = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/odradek-rack-apps-dev"
    wait_until(lambda: admin.get(binding_path), 60, "the rack ClusterRoleBinding")
    sts = admin.child(ns, "StatefulSet", "dev-brokers")
    assert sts["spec"]["template"]["spec"]["initContainers"][0]["args"][:2] == ["operator", "rack"]
    assert admin.get(f"/api/v1/namespaces/{ns}/serviceaccounts/dev-brokers") is not None
    assert admin.get(binding_path)["roleRef"]["name"] == RACK_ROLE
    # it leads under the chart's leader-election Role: its Lease, in the release's namespace
    lease = admin.get(f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{RELEASE}-odradek")
    assert lease["spec"]["holderIdentity"].startswith("chart-operator-0_"), lease

    admin.apply_topic(ns, "orders", {"cluster": "dev", "partitions": 3, "replicas": 1})
    wait_until(lambda: (condition(admin.topic(ns, "orders"), "Ready") or {}).get("status") == "True",
               60, "topic orders Ready")
    assert len(controller_topic(st["controller_url"], "orders")["partitions"]) == 3

    rack_file = check_rack_init_command(plane, admin, ns, tmp_path)
    check_broker_reports_the_rack(dev_cluster, rack_file, tmp_path)

    admin.delete(admin.cr_path(ns, "odradektopics", "orders"))
    wait_until(lambda: controller_topic(st["controller_url"], "orders") is None, 60, "topic deleted in the cluster")
    admin.delete(admin.cr_path(ns, "odradekclusters", "dev"))
    wait_until(lambda: admin.get(binding_path) is None, 60, "the rack binding deleted with the cluster")
    # generous: on a loaded machine kopf may retry the deletion handler (backoff) a few times
    wait_until(lambda: admin.cluster(ns, "dev") is None, 180, "the cluster's finalizer released")
    log = chart_operator.read_text()
    assert "Forbidden" not in log, log[-3000:]  # kopf and the client log a 403 as Forbidden


def check_rack_init_command(plane, admin: K8s, ns: str, tmp_path: Path) -> None:
    """``odradek operator rack`` as the init container runs it, with the brokers' token."""
    admin.call("POST", "/api/v1/nodes", {"metadata": {"name": "node-a", "labels": {ZONE: "zone-1"}}})
    admin.call("POST", "/api/v1/nodes", {"metadata": {"name": "node-b"}})
    env = {"KUBECONFIG": str(token_kubeconfig(admin, plane, ns, "dev-brokers", tmp_path / "brokers.kubeconfig"))}
    out = tmp_path / "rack"
    run(sys.executable, "-m", "odradek.cli", "operator", "rack", "--node", "node-a", "--topology-key", ZONE,
        "--output", out, env=env)
    assert out.read_text() == "zone-1"
    missing = run(sys.executable, "-m", "odradek.cli", "operator", "rack", "--node", "node-b", "--topology-key", ZONE,
                  "--output", tmp_path / "rack-b", env=env, check=False)
    assert missing.returncode == 1 and f"node 'node-b' has no label '{ZONE}'" in missing.stderr
    # that token reads Nodes by name and nothing else
    from kubernetes import config

    from odradek.operator.kube import Kube
    brokers = Kube(config.new_client_from_config(env["KUBECONFIG"]))
    for method, path in (("GET", "/api/v1/nodes"), ("GET", f"/api/v1/namespaces/{ns}/secrets"),
                         ("GET", f"/api/v1/namespaces/{ns}/pods")):
        with pytest.raises(brokers.ApiException) as e:
            brokers.request(method, path)
        assert e.value.status == 403
    return out


def check_broker_reports_the_rack(dev_cluster, rack_file: Path, tmp_path: Path) -> None:
    """A real broker started with ``--rack-file`` joins the dev cluster; DescribeCluster (a real
    Kafka client) shows its rack."""
    st = dev_cluster.status()
    log = open(tmp_path / "broker-7.log", "ab")
    broker = subprocess.Popen([sys.executable, "-m", "odradek.cli", "broker", "--id", "7", "--data-dir",
                               str(tmp_path / "broker-7"), "--zookeeper", st["zookeeper"], "--listen",
                               "127.0.0.1:0", "--rack-file", str(rack_file)],
                              stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT)
    log.close()
    try:
        admin = dev_cluster.admin()

        def rack_of_7():
            assert broker.poll() is None, (tmp_path / "broker-7.log").read_text()[-2000:]
            nodes = admin.describe_cluster(request_timeout=10).result().nodes
            return next((n.rack for n in nodes if n.id == 7), None)
        assert wait_until(rack_of_7, 60, "broker 7 in DescribeCluster with its rack") == "zone-1"
    finally:
        control_plane_module.terminate(broker, 15)
    # the cluster is shared (conftest's dev_cluster): gone from it before the next module places replicas
    wait_until(lambda: 7 not in {n.id for n in admin.describe_cluster(request_timeout=10).result().nodes},
               60, "broker 7 gone from the shared dev cluster")
