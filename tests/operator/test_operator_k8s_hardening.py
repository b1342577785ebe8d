"""Hardening against the real API server (the session's shared one, the operator as a process):
the NetworkPolicies and the restricted security contexts as applied, owned by the cluster, and
the policies deleted when ``spec.networkPolicies`` turns them off; the gateway as its
Deployment runs it, over HTTPS and only with a token, its tokens mapped to the OdradekUsers of
``gateway.users`` whose Secrets it mounts."""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.dev.processes import listening_ports
from odradek.dev.waiting import wait_until
from odradek.operator import network_policies
from odradek.operator import handlers
from odradek.operator.settings import OperatorSettings
from odradek.operator.status import ClusterHealth
from tests.support.k8s import ROOT, control_plane_module

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(3000)]

SPEC = {"brokers": {"replicas": 1, "storage": {"type": "ephemeral"}}, "controller": {"replicas": 1},
        "zookeeper": {"managed": {"replicas": 1}}, "gateway": {"replicas": 1},
        "listeners": [{"name": "tls", "port": 9092, "type": "internal", "tls": True,
                       "authentication": {"type": "scram-sha-512"}}]}
POLICY_PATH = "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies/{name}"


def policy(k8s, namespace, component):
    return k8s.get(POLICY_PATH.format(ns=namespace, name=network_policies.policy_name("h", component)))


def test_applied_policies_and_security_contexts_and_turning_policies_off(k8s, operator, namespace):
    cr = k8s.apply_cluster(namespace, "h", SPEC)
    found = wait_until(lambda: (p := {c: policy(k8s, namespace, c) for c in network_policies.COMPONENTS})
                       and all(p.values()) and p, 60, "the cluster's four NetworkPolicies", 0.2)
    for component, obj in found.items():
        assert [(r["kind"], r["uid"]) for r in obj["metadata"]["ownerReferences"]] == \
            [("OdradekCluster", cr["metadata"]["uid"])], component
    ingress = {tuple(p["port"] for p in r["ports"]): r.get("from") for r in found["broker"]["spec"]["ingress"]}
    assert ingress[(9092,)] is None                                   # the user's listener: anyone
    assert {(f.get("podSelector") or {}).get("matchLabels", {}).get("app.kubernetes.io/component")
            for f in ingress[(9091,)]} == {"broker", "operator", "gateway"}
    zk = {tuple(p["port"] for p in r["ports"]): r["from"] for r in found["zookeeper"]["spec"]["ingress"]}
    assert zk[(2888, 3888)] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/instance": "h",
                                                                 "app.kubernetes.io/component": "zookeeper"}}}]

    for kind, name in (("StatefulSet", "h-brokers"), ("StatefulSet", "h-zookeeper"),
                       ("Deployment", "h-controller"), ("Deployment", "h-gateway")):
        obj = wait_until(lambda: k8s.child(namespace, kind, name), 30, f"{kind}/{name}", 0.2)
        pod = obj["spec"]["template"]["spec"]
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        for c in (*pod.get("initContainers", []), *pod["containers"]):
            ctx = c["securityContext"]
            assert (ctx["readOnlyRootFilesystem"], ctx["allowPrivilegeEscalation"], ctx["capabilities"]) == \
                (True, False, {"drop": ["ALL"]}), (name, c["name"])
            assert "/tmp" in {m["mountPath"] for m in c["volumeMounts"]}, (name, c["name"])
    assert k8s.child(namespace, "StatefulSet", "h-zookeeper")["spec"]["template"]["spec"]["securityContext"][
        "runAsUser"] == 1000

    k8s.apply_cluster(namespace, "h", {**SPEC, "networkPolicies": False})
    wait_until(lambda: not any(policy(k8s, namespace, c) for c in network_policies.COMPONENTS), 60,
               "the NetworkPolicies to be deleted", 0.2)


class _Pinned(http.client.HTTPSConnection):
    """HTTPS to 127.0.0.1, checking the certificate against ``host`` (the Service's DNS name)."""

    def connect(self) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port), 10)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def _materialize(k8s, namespace: str, pod: dict, root: Path) -> None:
    """The pod's Secret volumes written under ``root`` at their mount paths."""
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    for mount in pod["containers"][0]["volumeMounts"]:
        if mount["name"] in secrets:
            data = k8s.child(namespace, "Secret", secrets[mount["name"]])["data"]
            target = root / mount["mountPath"].lstrip("/")
            target.mkdir(parents=True, exist_ok=True)
            for key, value in data.items():
                (target / key).write_bytes(base64.b64decode(value))


def _condition(k8s, namespace: str, cluster: str, kind: str) -> dict | None:
    conditions = ((k8s.cluster(namespace, cluster) or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind and c["status"] == "True"), None)


def _user_secrets(deployment: dict) -> set[tuple[str, str]]:
    """(Secret, mount path) of the OdradekUsers' Secrets the gateway mounts."""
    pod = deployment["spec"]["template"]["spec"]
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    return {(secrets[m["name"]], m["mountPath"]) for m in pod["containers"][0]["volumeMounts"]
            if m["mountPath"].startswith("/etc/odradek/gateway-users/")}


def _ready_tls_user(k8s, namespace: str, name: str, cluster: str, ready: bool = True) -> None:
    """A tls OdradekUser as a reconcile leaves it (no controller runs here: paused, its Secret
    and status written by the test; ``ready=False``: as before its first reconcile)."""
    k8s.apply(f"/api/v1/namespaces/{namespace}/secrets/{name}",
              {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
               "data": {k: base64.b64encode(b"PEM").decode() for k in ("user.crt", "user.key", "ca.crt")}})
    k8s.apply(k8s.cr_path(namespace, "odradekusers", name),
              {"apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekUser",
               "metadata": {"name": name, "namespace": namespace,
                            "annotations": {"odradek.dev/pause-reconciliation": "true"}},
               "spec": {"cluster": cluster, "authentication": {"type": "tls"}}})
    if ready:
        k8s.merge(k8s.cr_path(namespace, "odradekusers", name) + "/status",
                  {"status": {"cluster": cluster, "secret": name, "username": f"CN={name}"}})


def test_the_status_timer_writes_over_the_status_as_it_is_when_it_writes(k8s, namespace):
    """The status timer's reads are slow; what the reconcile writes meanwhile stays: a refusal it
    cleared stays cleared (a merge patch replaces ``conditions`` whole: the timer merges its
    Ready into the list as it is, conditional on the resourceVersion it read), and a Failed phase
    stays Failed (the timer then writes nothing). It once wrote over the status it had started
    with: a cleared ``GatewayUsersRefused`` came back, a Failed cluster went back to Ready, for good."""
    path = k8s.cr_path(namespace, "odradekclusters", "t")   # labelled out of the session operator's selector
    k8s.apply(path, {"apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekCluster", "spec": SPEC, "metadata": {
        "name": "t", "namespace": namespace, "labels": {"odradek.dev/operator": "none"}}})
    status_path = path + "/status"
    refused = {"type": "GatewayUsersRefused", "status": "True", "reason": "GatewayUserNotReady", "message": "gwr"}
    k8s.merge(status_path, {"status": {"phase": "Reconciling", "conditions": [refused]}})
    health = ClusterHealth(brokers_desired=1, brokers_ready=1, controllers_available=1, zookeeper_desired=0,
                           zookeeper_ready=0, gateway_desired=0, gateway_available=0, active_controller="c-0",
                           under_replicated=0)
    settings = OperatorSettings()

    def timer_meeting(reconcile_status: dict):
        seen = []

        def update(cluster: dict) -> dict | None:
            seen.append(cluster["status"])
            if len(seen) == 1:   # the reconcile writes between the timer's read and its write
                k8s.merge(status_path, {"status": reconcile_status})
            return handlers.status_now(health, [], settings, cluster)
        return update, seen

    update, seen = timer_meeting({"conditions": [{**refused, "status": "False"}]})
    assert k8s.kube.update_status("odradek.dev/v1alpha1", "OdradekCluster", namespace, "t", update)
    status = k8s.cluster(namespace, "t")["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"GatewayUsersRefused": "False", "Ready": "True"}
    assert status["phase"] == "Ready" and len(seen) == 2, (status, seen)

    update, seen = timer_meeting({"phase": "Failed"})
    assert not k8s.kube.update_status("odradek.dev/v1alpha1", "OdradekCluster", namespace, "t", update)
    assert k8s.cluster(namespace, "t")["status"]["phase"] == "Failed" and len(seen) == 2
    assert not k8s.kube.update_status("odradek.dev/v1alpha1", "OdradekCluster", namespace, "gone", update)


def test_gateway_deployment_serves_https_with_its_certificate_and_requires_a_token(k8s, operator, namespace, tmp_path):
    """The gateway exactly as its Deployment runs it (arguments, environment, the Secrets it
    mounts, read back from the API server), as a local process: HTTPS with the operator's
    certificate for its Service's name and for its pod's name under ``g-gateway-pods`` (where
    the other replicas forward schema-registry writes: the registry is on, at that URL), checked
    against the cluster CA, and no request without the generated token."""
    spec = {**SPEC, "gateway": {"replicas": 1, "users": ["gwr"]}}
    k8s.apply_cluster(namespace, "g", spec)
    dep = wait_until(lambda: k8s.child(namespace, "Deployment", "g-gateway"), 60, "the gateway Deployment", 0.2)
    # the gateway maps no token to a user that does not exist yet, and says so
    refused = wait_until(lambda: _condition(k8s, namespace, "g", "GatewayUsersRefused"), 60, "the refusal", 0.2)
    assert refused["reason"] == "GatewayUserRefused" and "OdradekUser gwr does not exist" in refused["message"]
    assert _user_secrets(dep) == set()
    # a permanent refusal does not hold Ready (the cluster serves its other users)...
    not_ready = wait_until(lambda: _condition(k8s, namespace, "g", "NotReady"), 60, "the NotReady condition", 0.2)
    assert "gateway users" not in not_ready["message"]
    # ...one that passes by itself does: the user exists, its certificate is not made yet
    _ready_tls_user(k8s, namespace, "gwr", "g", ready=False)
    wait_until(lambda: (_condition(k8s, namespace, "g", "GatewayUsersRefused") or {}).get("reason")
               == "GatewayUserNotReady", 60, "the transient refusal", 0.2)
    wait_until(lambda: "gateway users not taken in yet" in (_condition(k8s, namespace, "g", "NotReady") or {}).get(
        "message", ""), 60, "Ready held for the user", 0.2)
    _ready_tls_user(k8s, namespace, "gwr", "g")
    dep = wait_until(lambda: (d := k8s.child(namespace, "Deployment", "g-gateway")) and _user_secrets(d) and d,
                     60, "the user's Secret mounted in the gateway", 0.2)
    assert _user_secrets(dep) == {("gwr", "/etc/odradek/gateway-users/gwr")}
    wait_until(lambda: not _condition(k8s, namespace, "g", "GatewayUsersRefused"), 60, "the refusal lifted", 0.2)
    wait_until(lambda: "gateway users" not in (_condition(k8s, namespace, "g", "NotReady") or {}).get("message", ""),
               60, "Ready no longer held for the user", 0.2)
    tokens = json.loads(base64.b64decode(k8s.child(namespace, "Secret", "g-gateway-tokens")["data"]["credentials"]))
    assert [(t["name"], t["kafka_ssl_certificate_location"]) for t in tokens["tokens"]] == [
        ("gwr", "/etc/odradek/gateway-users/gwr/user.crt")]
    pod = dep["spec"]["template"]["spec"]
    _materialize(k8s, namespace, pod, tmp_path)
    container = pod["containers"][0]
    assert "--schema-registry" not in container["args"], "the registry runs with the gateway by default"
    assert container["command"][-2:] == [
        'export ODRADEK_GATEWAY_SCHEMA_REGISTRY_URL="https://$(printf %s "$POD_IP" | tr .: --).g-gateway-pods.'
        '$POD_NAMESPACE.svc:8000"; exec odradek "$@"', "odradek"]
    assert k8s.child(namespace, "Service", "g-gateway-pods")["spec"]["clusterIP"] == "None"
    args = [a.replace("/etc/odradek/", f"{tmp_path}/etc/odradek/") for a in container["args"]]
    args[args.index("--host") + 1], args[args.index("--port") + 1] = "127.0.0.1", "0"
    env = {**os.environ, **{e["name"]: e["value"] for e in container["env"] if "value" in e}}
    assert env["ODRADEK_GATEWAY_REQUIRE_AUTH"] == "true"
    proc = subprocess.Popen([sys.executable, "-m", "odradek.cli", *args], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        (port,) = wait_until(lambda: listening_ports(proc.pid), 60, "the gateway's port", 0.2)
        ca = ssl.create_default_context(cafile=str(tmp_path / "etc/odradek/certs/cluster-ca/ca.crt"))
        token = json.loads((tmp_path / "etc/odradek/gateway-auth/credentials").read_text())["tokens"][0]["token"]

        def status(path, method="GET", headers=None, body=None):
            conn = _Pinned(f"g-gateway.{namespace}.svc", port, context=ca, timeout=10)
            try:
                conn.request(method, path, body=body, headers=headers or {})
                return conn.getresponse().status
            finally:
                conn.close()

        assert status("/healthz") == 200      # TLS verified against the cluster CA and the Service's name
        pod_name = _Pinned(f"10-0-0-7.g-gateway-pods.{namespace}.svc", port, context=ca, timeout=10)
        pod_name.connect()    # a pod's own name (the registry's URL) is in the certificate too
        pod_name.close()
        produce = json.dumps({"records": [{"value": "x"}]})
        kinds = {"content-type": "application/vnd.kafka.json.v2+json"}
        assert status("/topics/t", "POST", kinds, produce) == 401
        assert status("/topics/t", "POST", {**kinds, "authorization": f"Bearer {token}x"}, produce) == 401
        with pytest.raises(ssl.SSLCertVerificationError):
            _Pinned("elsewhere.example", port, context=ca, timeout=10).connect()
    finally:
        control_plane_module.terminate(proc, 10)
    assert k8s.cluster(namespace, "g")   # its status names the Service's https URL once reconciled
    wait_until(lambda: ((k8s.cluster(namespace, "g") or {}).get("status") or {}).get("gatewayAddress")
               == f"https://g-gateway.{namespace}.svc:8000", 30, "status.gatewayAddress", 0.2)
