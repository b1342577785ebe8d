"""Fixtures for the operator tests against a real Kubernetes API server (no kubelet).

- ``k8s_bins`` (session): ``scripts/k8s/build.sh`` builds (once, cached in ``.cache/k8s/``)
  kube-apiserver, kube-controller-manager, kubectl and helm. The API-server tests are skipped,
  with the build's output as the reason, only if kube-apiserver cannot be built; tests that
  need one of the others skip naming it.
- ``control_plane`` (session): etcd + kube-apiserver (+ kube-controller-manager) on loopback
  (``scripts/k8s/control_plane.py``), stopped by PID at the end.
- ``k8s``: a ``K8s`` helper (kubernetes client on the generated kubeconfig) with the CRDs
  applied; ``namespace``: a fresh namespace per test.
- ``dev_cluster`` (package): one 1-broker Odradek dev cluster (ZooKeeper, controller, broker as
  local processes) standing in for the pods no kubelet runs here, shared by the modules whose
  OdradekClusters point the operator at its controller (``odradek.dev/controller-url``): one
  start instead of one per module; each test leaves no topic of its own behind.
- ``scram_dev_cluster`` (package): a 1-broker dev cluster with SCRAM-SHA-512 on a SASL_PLAINTEXT
  (``SASL``) and a SASL_SSL (``SECURE``, certificates from ``odradek.certs``) listener and the ACL
  authorizer denying what no ACL allows (``User:ANONYMOUS``, the harness's PLAINTEXT tools, is the
  super user): the OdradekUser module's clients and a secured Connect worker log in there; its
  CA (key included) can be an OdradekCluster's own (``clusterCa.generateCertificateAuthority: false``).
- ``operator`` (session): ``odradek operator`` as a subprocess (a real ``kopf run``), short
  intervals, the dev clusters' loopback controllers trusted, resources labelled
  ``odradek.dev/operator`` left to the operators a test starts itself (``start_operator``); its
  peak RSS is checked at teardown (≤ 150 MB) and written to its log directory. It serves the
  eviction webhook on 127.0.0.1 (``EVICTION_WEBHOOK``, registered here as the chart does in a
  cluster, with a ``url`` client config: the API server runs on this host).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from odradek.certs import CertificateAuthority
from odradek.dev.harness import Cluster, start_cluster, stop_cluster
from odradek.dev.processes import listening_ports
from odradek.dev.waiting import wait_until
from odradek.operator.settings import (TRUSTED_CONTROLLER_URLS_ENV, WEBHOOK_CONFIGURATION_ENV, WEBHOOK_HOSTS_ENV,
                                       WEBHOOK_LISTEN_ENV, WEBHOOK_SECRET_ENV)
from tests.security.conftest import listener_endpoints
from tests.support.fake_peers import FakeController
from tests.support.k8s import ROOT, K8s, OperatorProcess, build, control_plane_module
from tests.support.tools import tool_missing

OPERATOR_MEMORY_LIMIT_MB = 150
# The dev clusters standing in for pods run their controllers on loopback: the operator's
# administrator trusts that origin for the controller-url annotation (principals.controller_url_problem).
DEV_CONTROLLERS = "http://127.0.0.1"


@pytest.fixture(scope="session")
def k8s_bins() -> dict[str, Path | str]:
    """name -> path, or name -> the reason it could not be built."""
    out: dict[str, Path | str] = {}
    for name in ("kube-apiserver", "kube-controller-manager", "kubectl", "helm"):
        path, why = build(name)
        out[name] = path if path else why
        if name == "kube-apiserver" and path is None:
            tool_missing(f"the Kubernetes API server cannot be built here, so the operator tests against it "
                         f"do not run: {why}")
    return out


@pytest.fixture(scope="session")
def control_plane(k8s_bins, tmp_path_factory):
    kcm = k8s_bins["kube-controller-manager"]
    cp = control_plane_module.ControlPlane(tmp_path_factory.mktemp("k8s"), k8s_bins["kube-apiserver"],
                                           kcm if isinstance(kcm, Path) else None)
    cp.start()
    yield cp
    cp.stop()


@pytest.fixture(scope="session")
def k8s(control_plane, k8s_bins) -> K8s:
    k = K8s(control_plane.kubeconfig)
    kubectl = k8s_bins["kubectl"]
    if isinstance(kubectl, Path):  # the way users install them
        subprocess.run([str(kubectl), "apply", "--server-side", "-f", str(ROOT / "crds")], check=True,
                       capture_output=True, env={**os.environ, **control_plane.env()}, timeout=60)
    else:
        for path in sorted((ROOT / "crds").glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            k.apply(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}", crd)
    for plural in ("odradekclusters", "odradektopics", "odradekusers", "odradekrebalances", "odradekconnects",
                   "odradekconnectors", "odradekmirrormaker2s"):
        wait_until(lambda: any(c["type"] == "Established" and c["status"] == "True" for c in
                               (k.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.odradek.dev")
                                or {}).get("status", {}).get("conditions", [])), 30, f"CRD {plural} established")
    return k


@pytest.fixture(scope="package")
def dev_cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("dev-cluster"), brokers=1)
    yield c
    stop_cluster(c)


SCRAM_BROKER_CONFIG = {
    "listeners": "SASL://127.0.0.1:0,SECURE://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,SECURE:SASL_SSL",
    "inter.broker.listener.name": "PLAINTEXT",
    "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",
    "allow.everyone.if.no.acl.found": "false",
    "group.initial.rebalance.delay.ms": "0",
}


@dataclass
class ScramDevCluster:
    cluster: Cluster
    ca_file: Path                     # the CA of the SECURE listener's certificate (PEM)
    endpoints: dict[str, list[str]]   # listener -> host:port
    ca: CertificateAuthority          # that CA, key included (an OdradekCluster's own CA: clusterCa)

    def status(self) -> dict:
        return self.cluster.status()


@pytest.fixture(scope="package")
def scram_dev_cluster(tmp_path_factory):
    certs = tmp_path_factory.mktemp("scram-certs")
    ca = CertificateAuthority.create()
    ca.write_ca(certs / "ca.crt")
    ca.write_issued(certs / "broker.pem", "127.0.0.1", "localhost")
    config = {**SCRAM_BROKER_CONFIG, "ssl.keystore.location": str(certs / "broker.pem"),
              "ssl.truststore.location": str(certs / "ca.crt")}
    data_dir = tmp_path_factory.mktemp("scram-cluster")
    c = start_cluster(data_dir, brokers=1, extra=tuple(a for k, v in config.items() for a in ("--config", f"{k}={v}")))
    try:
        yield ScramDevCluster(c, certs / "ca.crt", listener_endpoints(data_dir, 1), ca)
    finally:
        stop_cluster(c)


@pytest.fixture
def namespace(k8s) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    k8s.core.create_namespace({"metadata": {"name": name}})
    return name


EVICTION_WEBHOOK = "odradek-test-evictions"


def register_eviction_webhook(k8s: K8s, port: int, name: str = EVICTION_WEBHOOK,
                              namespaces: dict | None = None) -> None:
    """The chart's ValidatingWebhookConfiguration (charts/odradek/templates/webhook.yaml) with a
    url client config; the operator writes its CA bundle in. ``namespaces``: the labels of the
    namespaces it is for (none: all)."""
    hook = {"name": "evictions.odradek.dev", "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": f"https://127.0.0.1:{port}/evictions"},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["pods/eviction"], "scope": "Namespaced"}],
            "failurePolicy": "Ignore", "sideEffects": "NoneOnDryRun", "timeoutSeconds": 10}
    if namespaces:
        hook["namespaceSelector"] = {"matchLabels": namespaces}
    k8s.apply(f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{name}", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name}, "webhooks": [hook]})


def start_operator(control_plane, log: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    """``odradek operator --all-namespaces`` with short intervals, its output in ``log``; metrics
    on port 0 (the one port the operator listens on is it)."""
    env = {**os.environ, **control_plane.env(), "ODRADEK_OPERATOR_STATUS_INTERVAL": "1",
           "ODRADEK_OPERATOR_DRIFT_INTERVAL": "2", "ODRADEK_OPERATOR_RETRY_DELAY": "1",
           "ODRADEK_OPERATOR_MIRROR_LAG_INTERVAL": "2",
           TRUSTED_CONTROLLER_URLS_ENV: DEV_CONTROLLERS, **(env or {})}
    env.pop("ODRADEK_OPERATOR_CONTROLLER_URL", None)
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "odradek.cli", "operator", "--all-namespaces",
                                 "--metrics-host", "127.0.0.1", "--metrics-port", "0", *args],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=ROOT)


@pytest.fixture(scope="session")
def operator(k8s, control_plane, tmp_path_factory):
    logdir = tmp_path_factory.mktemp("operator")
    log = logdir / "operator.log"
    port = control_plane_module.free_port()
    register_eviction_webhook(k8s, port)
    # Not the resources labelled odradek.dev/operator: the leader-election test's own operators handle those.
    proc = start_operator(control_plane, log, "--selector", "!odradek.dev/operator",
                          env={WEBHOOK_LISTEN_ENV: f"127.0.0.1:{port}", WEBHOOK_HOSTS_ENV: "127.0.0.1",
                               WEBHOOK_SECRET_ENV: "default/odradek-operator-webhook",
                               WEBHOOK_CONFIGURATION_ENV: EVICTION_WEBHOOK})
    op = OperatorProcess(proc, log)
    try:
        # kopf logs "Activity 'configure' succeeded." once the startup handler ran.
        wait_until(lambda: proc.poll() is not None or "'configure' succeeded" in log.read_text(),
                   60, "the operator to start", 0.2)
        if proc.poll() is not None:
            raise AssertionError(f"the operator exited {proc.returncode}:\n{op.log_tail()}")
        (metrics,) = wait_until(lambda: set(listening_ports(proc.pid)) - {port}, 30, "the operator's metrics port")
        op.metrics_url = f"http://127.0.0.1:{metrics}/metrics"
        yield op
    finally:
        peak = op.peak_rss_mb() if proc.poll() is None else None
        control_plane_module.terminate(proc, 15)
        if peak is not None:
            (logdir / "memory.json").write_text(json.dumps({"peak_rss_mb": peak}))
            print(f"\noperator peak RSS (VmHWM): {peak:.1f} MB")
            assert peak <= OPERATOR_MEMORY_LIMIT_MB, f"operator peak RSS {peak:.1f} MB > {OPERATOR_MEMORY_LIMIT_MB} MB"


@pytest.fixture
def fake_controller():
    fake = FakeController()
    yield fake
    fake.close()
