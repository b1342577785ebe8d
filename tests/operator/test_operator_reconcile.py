"""An OdradekCluster's reconcile (``reconcile.apply_cluster``) against an in-memory API server:
what is applied is exactly what ``cluster_plan`` plans, secured (certificates, probes, ZooKeeper
digest), and a second reconcile applies the same manifests again."""

from __future__ import annotations

import copy
import datetime
import json
import logging
import re

from odradek.operator import builders, certs, cluster_plan, principals, reconcile, revisions
from odradek.operator.settings import OperatorSettings
from odradek.operator.validation import parse_cluster

NS = "ns"
LOG = logging.getLogger("test")
SETTINGS = OperatorSettings.from_env({})


class FakeKube:
    """Objects by (kind, name); NodePort Services get their node ports on creation, as the API
    server allocates them."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict] = {}
        self.applied: list[dict] = []
        self.next_port = 31000

    def get(self, api_version, kind, namespace, name):
        found = self.objects.get((kind, name))
        return copy.deepcopy(found) if found is not None else None

    def list(self, api_version, kind, namespace, label_selector=""):
        return []

    def apply(self, manifest):
        obj = copy.deepcopy(manifest)
        live = self.objects.get((obj["kind"], obj["metadata"]["name"]))
        if obj["kind"] == "Service" and obj["spec"].get("type") == "NodePort":
            for i, port in enumerate(obj["spec"]["ports"]):
                port["nodePort"] = live["spec"]["ports"][i]["nodePort"] if live else self._port()
        self.objects[(obj["kind"], obj["metadata"]["name"])] = obj
        self.applied.append(copy.deepcopy(manifest))
        return copy.deepcopy(obj)

    def _port(self) -> int:
        self.next_port += 1
        return self.next_port

    def delete(self, api_version, kind, namespace, name):
        return self.objects.pop((kind, name), None) is not None

    def merge_patch(self, api_version, kind, namespace, name, patch):
        raise AssertionError("no PVC to grow here")


def body(spec: dict) -> dict:
    return {"metadata": {"name": "c", "namespace": NS, "generation": 1}, "spec": spec}


def applied(kube: FakeKube, kind: str, name: str) -> dict:
    return next(o for o in reversed(kube.applied) if (o["kind"], o["metadata"]["name"]) == (kind, name))


def reconcile_once(kube: FakeKube, spec: dict) -> reconcile.ClusterOutcome:
    kube.applied.clear()
    return reconcile.apply_cluster(kube, body(spec), lambda objs: None, LOG, SETTINGS)


def test_the_applied_children_are_the_secured_plan():
    kube = FakeKube()
    outcome = reconcile_once(kube, {"gateway": {"replicas": 1}})
    spec = parse_cluster({"gateway": {"replicas": 1}})
    # what the Secrets applied now hold (a plan over them keeps every certificate)
    versions = certs.plan_certificates("c", NS, spec, certs.read_existing(kube, "c", NS), 3).versions
    broker_pod = applied(kube, "StatefulSet", "c-brokers")["spec"]["template"]
    # the readiness probes that reach the cluster present the pod's own certificate
    probe = broker_pod["spec"]["containers"][0]["readinessProbe"]["exec"]["command"]
    assert probe[:3] == ["odradek", "operator", "probe"] and "/etc/odradek/certs/broker/{hostname}.pem" in probe
    controller = applied(kube, "Deployment", "c-controller")["spec"]["template"]
    assert controller["spec"]["containers"][0]["readinessProbe"]["exec"]["command"][:3] == [
        "odradek", "operator", "probe"]
    assert controller["spec"]["containers"][0]["command"][:2] == ["sh", "-c"]
    assert {v["name"] for v in broker_pod["spec"]["volumes"]} >= {"cluster-ca", "broker-certs", "zookeeper-digest"}
    gateway = applied(kube, "Deployment", "c-gateway")["spec"]["template"]
    assert "--kafka-ssl-ca-location" in gateway["spec"]["containers"][0]["args"]
    # the certificate versions the pods carry are those of the Secrets applied with them
    assert controller["metadata"]["annotations"][certs.CERTS_ANNOTATION] == versions["controller"]
    assert gateway["metadata"]["annotations"][certs.CERTS_ANNOTATION] == versions["gateway"]
    assert broker_pod["metadata"]["annotations"][builders.CONFIG_HASH_ANNOTATION] == builders.config_hash("c", NS, spec)
    own = json.loads(broker_pod["metadata"]["annotations"][revisions.BROKER_HASHES_ANNOTATION])
    assert own == {str(i): revisions.broker_hash(i, {}, versions[certs.broker_version_key(i)]) for i in range(3)}
    assert kube.get("v1", "Secret", NS, principals.zookeeper_secret_name("c")) is not None
    assert outcome.applied[:3] == ["ConfigMap/c-config", "ConfigMap/c-zookeeper-config", "Service/c-zookeeper-headless"]
    assert outcome.status["desiredBrokers"] == 3 and outcome.status["gatewayAddress"]


def test_a_second_reconcile_applies_exactly_the_plan_again():
    kube, raw = FakeKube(), {"brokers": {"replicas": 2}}
    reconcile_once(kube, raw)
    first = {(o["kind"], o["metadata"]["name"]): o for o in kube.applied}
    outcome = reconcile_once(kube, raw)
    again = {(o["kind"], o["metadata"]["name"]): o for o in kube.applied}
    assert again == first   # certificates, the digest and every manifest are kept
    assert outcome.waiting is None   # no pods to roll here
    # what was applied is what the pure plan says for what was observed
    spec = parse_cluster(raw)
    observed, _ = reconcile.observe_cluster(kube, body(raw), spec, SETTINGS, LOG)
    prerequisites = cluster_plan.plan_prerequisites("c", NS, spec, observed)
    plan = cluster_plan.plan_children("c", NS, spec, observed, prerequisites.certificates.versions, {})
    assert [again[(c["kind"], c["metadata"]["name"])] for c in plan.children] == list(plan.children)


def test_node_ports_allocated_at_creation_reach_the_brokers_in_the_same_reconcile():
    kube = FakeKube()
    reconcile_once(kube, {"brokers": {"replicas": 2},
                          "listeners": [{"name": "ext", "port": 9095, "type": "nodeport"}]})
    table = applied(kube, "ConfigMap", "c-config")["data"]["advertised-listeners.json"]
    node_ports = [kube.objects[("Service", f"c-brokers-{i}-ext")]["spec"]["ports"][0]["nodePort"] for i in (0, 1)]
    assert all(f"EXT://{{host_ip}}:{port}" in table for port in node_ports), table


class PodsKube(FakeKube):
    """FakeKube with pods, made by ``run``: a workload's pods Ready on its template as applied
    (its controller and the kubelet done at once); deleted broker pods are remembered."""

    def __init__(self) -> None:
        super().__init__()
        self.pods: dict[str, dict] = {}
        self.deleted: list[str] = []

    def run(self, kind: str, name: str, ready_for: float = 3600) -> None:
        workload = self.objects[(kind, name)]
        template = workload["spec"]["template"]["metadata"]
        since = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=ready_for)
        for i in range(workload["spec"]["replicas"]):
            labels = {**template["labels"], builders.POD_INDEX_LABEL: str(i)}
            ready = {"type": "Ready", "status": "True", "lastTransitionTime": since.strftime("%Y-%m-%dT%H:%M:%SZ")}
            self.pods[f"{name}-{i}"] = {
                "metadata": {"name": f"{name}-{i}", "labels": labels, "annotations": dict(template["annotations"])},
                "status": {"phase": "Running", "conditions": [ready]}}

    def list(self, api_version, kind, namespace, label_selector=""):
        wanted = dict(pair.split("=", 1) for pair in label_selector.split(",") if pair)
        return [copy.deepcopy(p) for p in self.pods.values() if kind == "Pod"
                and wanted.items() <= p["metadata"]["labels"].items()]

    def delete(self, api_version, kind, namespace, name):
        if kind == "Pod":
            self.deleted.append(name)
            return self.pods.pop(name, None) is not None
        return super().delete(api_version, kind, namespace, name)


def paused(kube: FakeKube) -> list[str]:
    return sorted(name for (kind, name), o in kube.objects.items() if kind == "Deployment" and o["spec"].get("paused"))


def test_a_certificate_renewal_rolls_zookeeper_then_the_controller_then_the_brokers():
    """The renewal changes ZooKeeper's, the controller's and every broker's pod template in one
    reconcile. CI's e2e run restarted a broker as soon as the controller answered again, within
    the brokers' session timeout of ZooKeeper's restart, and a second broker went down. No
    broker restarts now until ZooKeeper's pod runs the new template and has been Ready for that
    timeout, and no controller pod of the old template is left; then the brokers' own checks
    (here: no controller to ask) decide."""
    kube, e2e = PodsKube(), {"zookeeper": {"managed": {"replicas": 1}}, "controller": {"replicas": 1},
                             "gateway": {"replicas": 1}}
    reconcile_once(kube, {**e2e, "clusterCa": {"validityDays": 365, "renewalDays": 30}})
    for kind, name in (("StatefulSet", "c-zookeeper"), ("Deployment", "c-controller"), ("StatefulSet", "c-brokers")):
        kube.run(kind, name)
    assert not paused(kube), "a new cluster starts everything at once"
    renewal = {**e2e, "clusterCa": {"validityDays": 800, "renewalDays": 799}}   # every certificate due
    assert reconcile_once(kube, renewal).waiting == \
        "waiting for ZooKeeper to roll first: c-zookeeper-0 on its previous template"
    assert paused(kube) == ["c-controller", "c-gateway"], "their new templates wait for ZooKeeper's roll"
    kube.run("StatefulSet", "c-zookeeper", ready_for=5)
    assert re.match(r"waiting for ZooKeeper to settle: c-zookeeper-0 Ready for \d+ of 22 s",
                    reconcile_once(kube, renewal).waiting)
    assert paused(kube) == ["c-controller", "c-gateway"]
    kube.run("StatefulSet", "c-zookeeper", ready_for=23)
    assert reconcile_once(kube, renewal).waiting == \
        "waiting for the controller to roll first: c-controller-0 on its previous template"
    assert not paused(kube), "resumed once ZooKeeper has settled"
    kube.run("Deployment", "c-controller")
    assert "cannot ask the controller" in reconcile_once(kube, renewal).waiting
    assert kube.deleted == []


def test_a_zookeeper_only_roll_holds_the_controller_and_is_looked_at_again_until_it_settles():
    """Nothing else rolls, so only the hold keeps the cluster reconciled (``waiting``) until the
    controller's Deployment is resumed."""
    kube, e2e = PodsKube(), {"zookeeper": {"managed": {"replicas": 1}}, "controller": {"replicas": 1}}
    reconcile_once(kube, e2e)
    for kind, name in (("StatefulSet", "c-zookeeper"), ("Deployment", "c-controller"), ("StatefulSet", "c-brokers")):
        kube.run(kind, name)
    assert reconcile_once(kube, e2e).waiting is None and not paused(kube)
    kube.pods["c-zookeeper-0"]["metadata"]["annotations"][builders.CONFIG_HASH_ANNOTATION] = "a previous zoo.cfg"
    assert reconcile_once(kube, e2e).waiting == ("waiting for ZooKeeper to roll first: c-zookeeper-0 on its "
                                                 "previous template (holding c-controller)")
    assert paused(kube) == ["c-controller"]
    kube.run("StatefulSet", "c-zookeeper", ready_for=23)
    assert reconcile_once(kube, e2e).waiting is None and not paused(kube)
