"""spec.listeners against a real kube-apiserver with the operator running: bad listener lists
are refused with the reason in status and nothing applied; a NodePort listener gets its
Services, node ports allocated by the API server, and brokers advertising them."""

from __future__ import annotations

import base64
import json

import pytest

from odradek.certs import alt_names
from odradek.cluster import control_plane
from odradek.dev.waiting import wait_until
from odradek.operator import listeners
from tests.operator.plans import probe_paths
from tests.support.k8s import condition

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(3000)]

BASE = {"brokers": {"replicas": 2, "storage": {"size": "1Gi"}}, "controller": {"replicas": 1},
        "zookeeper": {"managed": {"replicas": 1}}}
SCRAM = {"type": "scram-sha-512"}


@pytest.mark.parametrize("items, reason", [
    ([{"name": "ext", "port": 9094, "type": "route"}], "unknown listener type 'route'"),
    ([{"name": "a", "port": 9094}, {"name": "b", "port": 9094}], "port 9094 is used by both"),
    ([{"name": "a", "port": 9094}, {"name": "a", "port": 9095}], "duplicate listener name 'a'"),
    ([{"name": "a", "port": 9094, "authentication": {"type": "tls"}}], "authentication type tls needs a TLS listener"),
])
def test_bad_listeners_fail_with_the_reason_and_change_nothing(k8s, operator, namespace, items, reason):
    k8s.apply_cluster(namespace, "badl", {**BASE, "listeners": items})

    def failed():
        cr = k8s.cluster(namespace, "badl")
        return cr if (cr.get("status") or {}).get("phase") == "Failed" else None
    ready = condition(wait_until(failed, 30, "status phase Failed"), "Ready")
    assert ready["reason"] == "InvalidSpec" and reason in ready["message"], ready
    for kind, name in (("ConfigMap", "badl-config"), ("StatefulSet", "badl-brokers"), ("Service", "badl-a-bootstrap"),
                       ("Service", "badl-ext-bootstrap")):
        assert k8s.child(namespace, kind, name) is None, (kind, name)


def test_authorization_without_an_authenticating_listener_is_refused_and_nothing_applied(k8s, operator, namespace):
    """Every client would be User:ANONYMOUS, which was then made a super user: refused."""
    k8s.apply_cluster(namespace, "anon", {**BASE, "listeners": [{"name": "plain", "port": 9092},
                                                                 {"name": "tls", "port": 9094, "tls": True}],
                                          "authorization": {"type": "simple"}})
    cr = wait_until(lambda: (x := k8s.cluster(namespace, "anon")) and (x.get("status") or {}).get("phase") == "Failed"
                    and x, 30, "status phase Failed")
    ready = condition(cr, "Ready")
    assert ready["reason"] == "NoAuthenticatingListener" and "User:ANONYMOUS" in ready["message"], ready
    for kind, name in (("ConfigMap", "anon-config"), ("StatefulSet", "anon-brokers"), ("Secret", "anon-cluster-ca")):
        assert k8s.child(namespace, kind, name) is None, (kind, name)


def test_nodeport_listener_services_ports_and_status(k8s, operator, namespace):
    spec = {**BASE, "listeners": [{"name": "scram", "port": 9094, "authentication": SCRAM},
                                  {"name": "ext", "port": 9095, "type": "nodeport", "authentication": SCRAM}],
            "authorization": {"type": "simple", "superUsers": ["ops"]}}
    k8s.apply_cluster(namespace, "np", spec)
    names = ["np-ext-bootstrap", "np-brokers-0-ext", "np-brokers-1-ext"]
    services = wait_until(lambda: [k8s.child(namespace, "Service", n) for n in names]
                          if all(k8s.child(namespace, "Service", n) for n in names) else None, 30, "external Services")
    node_ports = [s["spec"]["ports"][0]["nodePort"] for s in services]
    assert all(30000 <= p <= 32767 for p in node_ports) and len(set(node_ports)) == 3
    config = wait_until(lambda: k8s.child(namespace, "ConfigMap", "np-config"), 30, "the ConfigMap")
    table = json.loads(config["data"][listeners.ADVERTISED_TABLE])
    assert table["1"].endswith(f"EXT://{{host_ip}}:{node_ports[2]}"), table
    sts = wait_until(lambda: k8s.child(namespace, "StatefulSet", "np-brokers"), 30, "the brokers")
    pod = sts["spec"]["template"]["spec"]
    assert pod["initContainers"][0]["args"][:2] == ["operator", "advertise"]
    args = pod["containers"][0]["args"]
    # SCRAM listeners: replication over mutual TLS, the brokers' and operator's certificates super
    # users (never the gateway's: it acts as mapped OdradekUsers)
    assert "super.users=User:CN=np-broker,O=odradek;User:CN=np-operator,O=odradek;User:ops" in args
    assert "listener.security.protocol.map=REPLICATION:SSL,SCRAM:SASL_PLAINTEXT,EXT:SASL_PLAINTEXT" in args
    # replication (9091) takes only clients with a cluster-CA certificate (Kafka's per-listener key)
    assert "listener.name.replication.ssl.client.auth=required" in args
    # TLS replication too: the same probe, ready once in every ISR (status: an older image)
    assert probe_paths(pod["containers"][0]) == [control_plane.READY.path(), control_plane.STATUS.path()]
    assert pod["containers"][0]["readinessProbe"]["exec"]["command"][:3] == ["odradek", "operator", "probe"]

    def listed():
        return (k8s.cluster(namespace, "np").get("status") or {}).get("listeners")
    status = wait_until(listed, 30, "status.listeners")
    assert status[0] == {"name": "scram", "type": "internal", "tls": False,
                         "bootstrapServers": f"np-bootstrap.{namespace}.svc:9094"}
    assert status[1]["name"] == "ext" and status[1]["type"] == "nodeport"


def test_a_secret_planted_under_a_clusters_name_is_not_adopted(k8s, operator, namespace):
    """A digest Secret made before the cluster (its credentials the planter's) stops the
    reconcile with SecretConflict, untouched; once it is gone the cluster makes its own."""
    k8s.core.create_namespaced_secret(namespace, {"metadata": {"name": "plant-zookeeper-digest"},
                                                  "stringData": {"credentials": "odradek:known"}})
    planted = k8s.child(namespace, "Secret", "plant-zookeeper-digest")
    k8s.apply_cluster(namespace, "plant", BASE)
    cr = wait_until(lambda: (x := k8s.cluster(namespace, "plant")) and (c := condition(x, "Ready"))
                    and c["reason"] == "SecretConflict" and x, 30, "the conflict in status")
    assert "plant-zookeeper-digest exists and is not owned by OdradekCluster plant" in condition(cr, "Ready")["message"]
    assert k8s.child(namespace, "Secret", "plant-zookeeper-digest") == planted
    assert k8s.child(namespace, "StatefulSet", "plant-brokers") is None
    k8s.delete(f"/api/v1/namespaces/{namespace}/secrets/plant-zookeeper-digest")
    made = wait_until(lambda: k8s.child(namespace, "Secret", "plant-zookeeper-digest"), 30, "the cluster's own")
    assert made["metadata"]["ownerReferences"][0]["uid"] == cr["metadata"]["uid"]
    assert made["data"]["credentials"] != planted["data"]["credentials"]


def test_tls_node_port_certificates_name_the_nodes_before_scheduling_so_nothing_rolls(k8s, operator, namespace):
    """The operator may list Nodes: the brokers' first certificates name the node their pods
    will run on, and the pods' scheduling there (``status.hostIP``) reissues nothing, so the
    pod template (what each broker restarts for) and the pods stay as created."""
    node, ip = f"node-{namespace}", "10.99.0.1"
    k8s.call("POST", "/api/v1/nodes", {"metadata": {"name": node}})
    try:
        k8s.call("PATCH", f"/api/v1/nodes/{node}/status",
                 {"status": {"addresses": [{"type": "InternalIP", "address": ip}]}}, "application/merge-patch+json")
        k8s.apply_cluster(namespace, "npt", {**BASE, "listeners": [
            {"name": "ext", "port": 9095, "type": "nodeport", "tls": True, "authentication": SCRAM}]})
        secret = wait_until(lambda: k8s.child(namespace, "Secret", "npt-broker-certs"), 60, "the brokers' certificates")
        assert ip in alt_names(base64.b64decode(secret["data"]["npt-brokers-1.crt"]))
        annotations = wait_until(lambda: (s := k8s.child(namespace, "StatefulSet", "npt-brokers"))
                                 and s["spec"]["template"]["metadata"]["annotations"], 60, "the brokers")
        sel = "app.kubernetes.io/instance=npt,app.kubernetes.io/component=broker"
        path = f"/api/v1/namespaces/{namespace}/pods"
        pods = wait_until(lambda: (p := k8s.call("GET", path, query=[("labelSelector", sel)])["items"])
                          and len(p) == 2 and p, 60, "the StatefulSet controller's pods")
        def rolling():   # what the last reconcile waited for (the status timer leaves it)
            return str((k8s.cluster(namespace, "npt").get("status") or {}).get("rolling"))
        wait_until(lambda: "node addresses" in rolling(), 60, "the reconcile waiting for the pods' nodes")
        for pod in pods:   # scheduled onto the node (no kubelet here: the status a kubelet writes)
            k8s.call("PATCH", f"{path}/{pod['metadata']['name']}/status",
                     {"status": {"hostIP": ip, "hostIPs": [{"ip": ip}], "phase": "Running",
                                 "conditions": [{"type": "Ready", "status": "True"}]}}, "application/merge-patch+json")

        wait_until(lambda: "node addresses" not in rolling(), 60, "a reconcile with the pods scheduled")
        sts = k8s.child(namespace, "StatefulSet", "npt-brokers")
        assert sts["spec"]["template"]["metadata"]["annotations"] == annotations
        assert k8s.child(namespace, "Secret", "npt-broker-certs")["data"] == secret["data"]
        uids = {p["metadata"]["uid"] for p in k8s.call("GET", path, query=[("labelSelector", sel)])["items"]}
        assert uids == {p["metadata"]["uid"] for p in pods}
    finally:
        k8s.call("DELETE", f"/api/v1/nodes/{node}")
