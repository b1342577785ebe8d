"""The Helm chart: lint, template, install into the test API server, least-privilege RBAC."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from odradek.operator.settings import OperatorSettings
from tests.support.k8s import need

# The first test to use the API server may pay the one-time cold build of the Kubernetes
# binaries (~18 min measured on 2 cores; see docs/kubernetes.md) inside its setup.
pytestmark = [pytest.mark.k8s, pytest.mark.timeout(3000)]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "odradek"
VALUES = {"cluster": {"enabled": True, "name": "main", "spec": {"brokers": {"replicas": 3}}},
          "topics": [{"name": "orders_v1", "partitions": 6, "replicas": 3, "config": {"retention.ms": 3600000, "min.cleanable.dirty.ratio": 0.25}}]}


@pytest.fixture(scope="module")
def helm(k8s_bins):
    return need(k8s_bins, "helm")


def run(*argv, env=None, check=True) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, argv))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def values_file(tmp_path):
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(VALUES))
    return path


def test_lint(helm, values_file):
    out = run(helm, "lint", "--strict", CHART, "-f", values_file)
    assert "0 chart(s) failed" in out.stdout


def test_template_renders_operator_rbac_cluster_and_topics(helm, values_file):
    out = run(helm, "template", "rel", CHART, "--namespace", "ops", "-f", values_file).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert kinds == [("ClusterRole", "rel-odradek"), ("ClusterRoleBinding", "rel-odradek"),
                     ("Deployment", "rel-odradek"), ("OdradekCluster", "main"), ("OdradekTopic", "orders-v1"),
                     ("Role", "rel-odradek-leader-election"), ("RoleBinding", "rel-odradek-leader-election"),
                     ("ServiceAccount", "rel-odradek")]
    dep = next(d for d in docs if d["kind"] == "Deployment")
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "ghcr.io/odradek/odradek:0.1.0"
    assert container["args"][:2] == ["operator", "--all-namespaces"]
    topic = next(d for d in docs if d["kind"] == "OdradekTopic")
    assert topic["spec"] == {"cluster": "main", "topicName": "orders_v1", "partitions": 6, "replicas": 3,
                             "config": {"retention.ms": "3600000", "min.cleanable.dirty.ratio": "0.25"}}
    cluster = next(d for d in docs if d["kind"] == "OdradekCluster")
    # secure by default: an internal SASL_SSL (SCRAM-SHA-512) listener and authorization on
    assert cluster["spec"] == {"image": "ghcr.io/odradek/odradek:0.1.0", "imagePullPolicy": "IfNotPresent",
                               "brokers": {"replicas": 3},
                               "listeners": [{"name": "tls", "port": 9092, "type": "internal", "tls": True,
                                              "authentication": {"type": "scram-sha-512"}}],
                               "authorization": {"type": "simple", "superUsers": []}}
    plain = [d for d in yaml.safe_load_all(run(helm, "template", "rel", CHART, "-f", values_file, "--set",
                                               "cluster.plain=true").stdout) if d]
    assert next(d for d in plain if d["kind"] == "OdradekCluster")["spec"] == {
        "image": "ghcr.io/odradek/odradek:0.1.0", "imagePullPolicy": "IfNotPresent", "brokers": {"replicas": 3}}
    # by default: no cluster, no topics
    defaults = [d for d in yaml.safe_load_all(run(helm, "template", "rel", CHART).stdout) if d]
    assert {d["kind"] for d in defaults} == {"ClusterRole", "ClusterRoleBinding", "Deployment", "ServiceAccount",
                                             "Role", "RoleBinding"}


def test_operator_replicas_elect_a_leader_and_spread_over_nodes(helm):
    def render(*extra):
        return [d for d in yaml.safe_load_all(run(helm, "template", "rel", CHART, "--namespace", "ops", *extra).stdout)
                if d]

    docs = render()
    dep = next(d for d in docs if d["kind"] == "Deployment")
    pod = dep["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert dep["spec"]["replicas"] == 2 and dep["spec"]["strategy"] == {"type": "RollingUpdate"}
    args = container["args"]
    assert args[args.index("--leader-elect"):] == ["--leader-elect", "--lease", "rel-odradek", "--lease-timings", "15/10/2"]
    assert {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"] if "valueFrom" in e} == {
        "POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    role = next(d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "rel-odradek-leader-election")
    assert role["metadata"]["namespace"] == "ops"
    assert [(r["verbs"], r.get("resourceNames")) for r in role["rules"]] == [(["create"], None),
                                                                            (["get", "update"], ["rel-odradek"])]
    # a user's affinity replaces the default; one replica without election is the old Recreate
    custom = render("--set-json", 'operator.affinity={"podAffinity":{}}')
    assert next(d for d in custom if d["kind"] == "Deployment")["spec"]["template"]["spec"]["affinity"] == {
        "podAffinity": {}}
    single = render("--set", "operator.replicas=1", "--set", "operator.leaderElection.enabled=false")
    dep = next(d for d in single if d["kind"] == "Deployment")
    assert dep["spec"]["strategy"] == {"type": "Recreate"} and "--leader-elect" not in dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not [d for d in single if d["kind"] == "Role"]
    proc = run(helm, "template", "rel", CHART, "--set", "operator.leaderElection.enabled=false", check=False)
    assert proc.returncode != 0 and "needs operator.leaderElection.enabled" in proc.stderr


def test_operator_intervals_reach_its_settings(helm):
    """operator.statusInterval/retryDelay/driftInterval become the operator's settings (the code's
    defaults unless set; e2e/values-e2e.yaml shortens them); 0 is refused."""
    def intervals(settings: OperatorSettings) -> tuple[float, float, float]:
        return settings.status_interval, settings.retry_delay, settings.drift_interval

    def rendered(*extra) -> tuple[float, float, float]:
        docs = yaml.safe_load_all(run(helm, "template", "rel", CHART, *extra).stdout)
        container = next(d for d in docs if d and d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]
        return intervals(OperatorSettings.from_env({e["name"]: e["value"] for e in container["env"] if "value" in e}))

    assert rendered() == intervals(OperatorSettings())
    assert rendered("--set", "operator.statusInterval=3", "--set-json", "operator.retryDelay=2.5",
                    "--set", "operator.driftInterval=30") == (3, 2.5, 30)
    assert run(helm, "template", "rel", CHART, "--set", "operator.retryDelay=0", check=False).returncode != 0


def test_values_schema_rejects_unknown_keys(helm):
    proc = run(helm, "template", "rel", CHART, "--set", "operator.bogus=1", check=False)
    assert proc.returncode != 0 and "bogus" in proc.stderr


def test_install_into_the_api_server(helm, k8s, control_plane, k8s_bins, namespace, values_file):
    env = control_plane.env()
    run(helm, "install", "odk", CHART, "--namespace", namespace, "-f", values_file, "--wait=false", env=env)
    try:
        assert k8s.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/odk-odradek") is not None
        assert k8s.cluster(namespace, "main") is not None
        assert k8s.topic(namespace, "orders-v1")["spec"]["topicName"] == "orders_v1"
        kubectl = need(k8s_bins, "kubectl")
        sa = f"system:serviceaccount:{namespace}:odk-odradek"
        allowed = [("patch", "statefulsets.apps"), ("create", "poddisruptionbudgets.policy"), ("delete", "pods"),
                   ("patch", "persistentvolumeclaims"), ("patch", "odradekclusters.odradek.dev/status"),
                   ("list", "endpointslices.discovery.k8s.io"), ("get", "namespaces"), ("get", "secrets"),
                   ("patch", "secrets"), ("patch", "odradekusers.odradek.dev/status"),
                   ("create", "odradektopics.odradek.dev"), ("patch", "odradekconnectors.odradek.dev/status"),
                   ("create", "leases.coordination.k8s.io"), ("update", "leases.coordination.k8s.io/odk-odradek")]
        denied = [("list", "secrets"), ("delete", "secrets"), ("update", "leases.coordination.k8s.io/other"), ("delete", "statefulsets.apps"), ("delete", "persistentvolumeclaims"),
                  ("create", "pods"), ("patch", "nodes")]
        for verb, resource in allowed + denied:
            proc = run(kubectl, "auth", "can-i", verb, resource, "--as", sa, "-n", namespace, env=env, check=False)
            expected = "yes" if (verb, resource) in allowed else "no"
            assert proc.stdout.strip() == expected, f"can-i {verb} {resource}: {proc.stdout.strip()} {proc.stderr}"
    finally:
        run(helm, "uninstall", "odk", "--namespace", namespace, env=env, check=False)


def test_image_pull_policy_reaches_operator_and_cluster_and_rack_rbac_is_opt_in(helm, values_file):
    """A locally built image imported into containerd: pullPolicy Never (default IfNotPresent)."""
    def render(*extra):
        out = run(helm, "template", "rel", CHART, "-f", values_file, *extra).stdout
        return [d for d in yaml.safe_load_all(out) if d]

    for docs, policy in ((render(), "IfNotPresent"),
                         (render("--set", "image.repository=odradek", "--set", "image.tag=dev",
                                 "--set", "image.pullPolicy=Never"), "Never")):
        dep = next(d for d in docs if d["kind"] == "Deployment")
        container = dep["spec"]["template"]["spec"]["containers"][0]
        cluster = next(d for d in docs if d["kind"] == "OdradekCluster")
        assert container["imagePullPolicy"] == cluster["spec"]["imagePullPolicy"] == policy
        assert container["image"] == cluster["spec"]["image"]
    assert container["image"] == "odradek:dev"
    # no node access by default; the operator is told so (rack-aware clusters get InvalidSpec)
    docs = render()
    assert not [r for d in docs if d["kind"] == "ClusterRole" for r in d["rules"] if "nodes" in r["resources"]]
    env = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "ODRADEK_OPERATOR_RACK_CLUSTERROLE", "value": ""} in env
    # rbac.nodeAddresses: the operator lists Nodes (TLS node ports' certificates), nothing more on them
    nodes = [r for d in render("--set", "rbac.nodeAddresses=true") if d["kind"] == "ClusterRole" for r in d["rules"]
             if "nodes" in r["resources"]]
    assert nodes == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]


def rbac(docs) -> dict[tuple[str, str | None], dict]:
    """(kind, namespace) -> the operator's own role or binding (not the brokers' rack role)."""
    kinds = ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
    return {(d["kind"], d["metadata"].get("namespace")): d for d in docs
            if d["kind"] in kinds and d["metadata"]["name"] == "rel-odradek"}


def test_watch_namespaces_gives_roles_in_them_and_no_cluster_role(helm):
    def render(*extra):
        out = run(helm, "template", "rel", CHART, "--namespace", "ops", "--set", "operator.watchNamespaces={apps,data}",
                  *extra).stdout
        return [d for d in yaml.safe_load_all(out) if d]

    docs = render()
    found = rbac(docs)
    assert set(found) == {(kind, ns) for kind in ("Role", "RoleBinding") for ns in ("apps", "data", "ops")}
    for ns in ("apps", "data"):
        rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): r["verbs"] for r in found[("Role", ns)]["rules"]}
        assert rules[(("",), ("secrets",))] == ["get", "create", "patch"]
        assert rules[(("networking.k8s.io",), ("networkpolicies",))] == ["get", "create", "patch", "delete"]
        assert found[("RoleBinding", ns)]["subjects"] == [{"kind": "ServiceAccount", "name": "rel-odradek",
                                                           "namespace": "ops"}]
    # its own namespace, unwatched: Events only; nothing cluster-scoped (no Namespaces, no CRDs)
    assert [r["resources"] for r in found[("Role", "ops")]["rules"]] == [["events"]]
    args = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:5] == ["operator", "--namespace", "apps", "--namespace", "data"]
    # glob patterns cannot be Roles: cluster-wide; rack awareness adds only its cluster-scoped bindings
    assert set(rbac(render("--set", "operator.watchNamespaces={apps-*}"))) == {("ClusterRole", None),
                                                                             ("ClusterRoleBinding", None)}
    rack = rbac(render("--set", "rbac.brokerRack=true"))
    assert [r["resources"] for r in rack[("ClusterRole", None)]["rules"]] == [["clusterrolebindings"], ["clusterroles"]]
    assert ["serviceaccounts"] in [r["resources"] for r in rack[("Role", "apps")]["rules"]]
    listed = rbac(render("--set", "rbac.nodeAddresses=true"))
    assert [r["resources"] for r in listed[("ClusterRole", None)]["rules"]] == [["nodes"]]
    assert listed[("ClusterRoleBinding", None)]["subjects"][0]["namespace"] == "ops"


def test_watch_namespaces_install_grants_nothing_outside_them(helm, k8s, control_plane, k8s_bins, namespace):
    """Installed into the API server: the operator's ServiceAccount may act in the namespace it
    watches, not in its own (Events only), not elsewhere, and reads nothing cluster-scoped."""
    env, kubectl = control_plane.env(), need(k8s_bins, "kubectl")
    watched = f"{namespace}-w"
    k8s.core.create_namespace({"metadata": {"name": watched}})
    run(helm, "install", "nsr", CHART, "--namespace", namespace, "--set", f"operator.watchNamespaces={{{watched}}}",
        "--wait=false", env=env)
    try:
        sa = f"system:serviceaccount:{namespace}:nsr-odradek"

        def can(verb, resource, ns=None):
            argv = ["auth", "can-i", verb, resource, "--as", sa] + (["-n", ns] if ns else [])
            return run(kubectl, *argv, env=env, check=False).stdout.strip()

        for verb, resource in (("patch", "statefulsets.apps"), ("get", "secrets"), ("create", "networkpolicies.networking.k8s.io"),
                               ("patch", "odradekclusters.odradek.dev/status"), ("delete", "pods")):
            assert can(verb, resource, watched) == "yes", (verb, resource)
            assert can(verb, resource, namespace) == "no", (verb, resource, "own namespace")
            assert can(verb, resource, "default") == "no", (verb, resource, "elsewhere")
        assert can("create", "events", namespace) == "yes"
        assert can("list", "secrets", watched) == "no"
        assert can("get", "namespaces") == can("list", "customresourcedefinitions.apiextensions.k8s.io") == "no"
    finally:
        run(helm, "uninstall", "nsr", "--namespace", namespace, env=env, check=False)


def test_eviction_webhook_is_opt_in_and_registered_with_the_operator(helm):
    docs = [d for d in yaml.safe_load_all(run(helm, "template", "rel", CHART, "--namespace", "ops", "--set",
                                              "webhook.enabled=true", "--set", "operator.watchNamespaces={a,b}").stdout)
            if d]
    config = next(d for d in docs if d["kind"] == "ValidatingWebhookConfiguration")
    (hook,) = config["webhooks"]
    assert hook["clientConfig"]["service"] == {"name": "rel-odradek-webhook", "namespace": "ops",
                                               "path": "/evictions", "port": 443}
    assert hook["rules"][0]["resources"] == ["pods/eviction"] and hook["failurePolicy"] == "Ignore"
    assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["a", "b"]
    env = {e["name"]: e.get("value") for e in next(d for d in docs if d["kind"] == "Deployment")
           ["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["ODRADEK_OPERATOR_WEBHOOK_CONFIGURATION"] == config["metadata"]["name"] == "rel-odradek-ops-evictions"
    assert env["ODRADEK_OPERATOR_WEBHOOK_HOSTS"].split(",")[0] == "rel-odradek-webhook.ops.svc"
    role = next(d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "rel-odradek-webhook")
    assert role["rules"] == [{"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingwebhookconfigurations"],
                              "verbs": ["get", "patch"], "resourceNames": ["rel-odradek-ops-evictions"]}]
    assert not [d for d in yaml.safe_load_all(run(helm, "template", "rel", CHART).stdout)
                if d and d["kind"] == "ValidatingWebhookConfiguration"]
