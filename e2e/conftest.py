"""The e2e suite's cluster and release.

- ``ODRADEK_E2E_KUBECONFIG`` set: the cluster it points to (``e2e/kind.sh`` creates a kind
  cluster, loads the image and sets it); its images must already be there.
- otherwise: a one-node cluster on this host for the session (``e2e/local_node.py``: kubelet,
  containerd, runc, images built without a registry). This is the path CI runs.

The chart is installed once per session (``e2e/values-e2e.yaml``), its cluster on release N-1's
image (``support.previous_image``) until ``test_cluster.py`` upgrades it, and uninstalled at the
end from ``ODRADEK_E2E_KUBECONFIG``'s cluster (the local node is deleted whole); the tests of
``test_cluster.py`` run in file order against it.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import local_node
from odradek.client import GatewayClient, GatewayError
from odradek.dev.waiting import wait_until
from support import CLUSTER, NAMESPACE, RELEASE, ROOT, Kube, cluster_ready, diagnose, pods_ready, previous_image, settled
from tests.support.tools import tool_missing


@pytest.fixture(scope="session")
def kube(tmp_path_factory):
    configured = os.environ.get("ODRADEK_E2E_KUBECONFIG")
    if configured:
        yield Kube(Path(configured), shutil.which("kubectl") or "kubectl", shutil.which("helm") or "helm")
        return
    missing = local_node.missing_prerequisites()
    if missing:
        tool_missing("the local e2e node cannot run here (scripts/e2e_node.sh installs what it needs; "
                     "or set ODRADEK_E2E_KUBECONFIG): missing " + ", ".join(missing))
    bins = local_node.binaries()
    node = local_node.LocalNode(tmp_path_factory.mktemp("node"), bins, local_node.build_images)
    node.start()
    try:
        yield Kube(node.kubeconfig, str(bins["kubectl"]), str(bins["helm"]), disposable=True)
    finally:
        node.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report carries ``diagnose``: CI keeps only the log, and the cluster goes
    with the session (a ready pod's warnings may be all that says why)."""
    report = (yield).get_result()
    kube = item.funcargs.get("kube") if hasattr(item, "funcargs") else None
    if report.when == "call" and report.failed and isinstance(kube, Kube):
        report.sections.append(("e2e cluster at the failure", diagnose(kube)))


@pytest.fixture(scope="session")
def release(kube):
    # the cluster on release N-1's image: test_cluster.py upgrades it to this release's first
    kube.helm("install", RELEASE, str(ROOT / "charts" / "odradek"), "--namespace", NAMESPACE, "--create-namespace",
              "-f", str(ROOT / "e2e" / "values-e2e.yaml"), "--set", f"cluster.spec.image={previous_image()}")
    try:
        kube.kubectl("apply", "-f", "-", input=json.dumps(GATEWAY_USER))
        try:
            wait_until(lambda: cluster_ready(kube) and settled(kube) and pods_ready(kube), 900,
                       "cluster Ready, its gateway users taken in, every pod rolled out and Ready", 2)
        except TimeoutError:
            print(diagnose(kube))   # CI keeps only the log: say why it is not Ready
            raise
        yield
    finally:
        # the suite's own node goes with everything on it; 1: keep the release to look around afterwards
        if not kube.disposable and os.environ.get("ODRADEK_E2E_KEEP_RELEASE") != "1":
            _uninstall(kube)


def _uninstall(kube: Kube) -> None:
    """Topics and the cluster first (the operator's finalizers need it running), then the release."""
    try:
        kube.kubectl("delete", "odradektopics", "--all", "-n", NAMESPACE, "--timeout=120s")
        kube.kubectl("delete", "odradekcluster", "--all", "-n", NAMESPACE, "--timeout=300s", timeout=330)
        kube.helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "5m", timeout=330)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"e2e: uninstall incomplete: {e}")


# The OdradekUser the gateway's token acts as (values-e2e.yaml's gateway.users): the gateway is no
# super user, so the ACLs the tests' produce, consume, inventory and Spark job need are its own.
GATEWAY_USER_NAME = "http-client"
GATEWAY_USER = {
    "apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekUser",
    "metadata": {"name": GATEWAY_USER_NAME, "namespace": NAMESPACE},
    "spec": {"cluster": CLUSTER, "authentication": {"type": "tls"}, "authorization": {"type": "simple", "acls": [
        {"resource": {"type": "topic", "name": "*", "patternType": "literal"}, "operations": ["All"]},
        {"resource": {"type": "group", "name": "*", "patternType": "literal"}, "operations": ["All"]},
        {"resource": {"type": "cluster"}, "operations": ["Describe", "DescribeConfigs"]}]}}}


@dataclass(frozen=True)
class Gateway:
    """The gateway as a host outside the cluster reaches it: its NodePort Service at the node's
    InternalIP over HTTPS (its certificate, from the cluster CA, names the node), with the token
    the operator generated (``<cluster>-gateway-tokens``: the gateway requires one) for OdradekUser
    ``http-client``, whose certificate the gateway logs in with: its ACLs decide."""
    url: str
    token: str
    ca_file: str

    def client(self, **kwargs) -> GatewayClient:
        return GatewayClient(self.url, self.token, ca_file=self.ca_file, **kwargs)


@pytest.fixture(scope="session")
def gateway(kube, release, tmp_path_factory) -> Gateway:
    service = kube.get("service", f"{CLUSTER}-gateway")
    node_port = service["spec"]["ports"][0]["nodePort"]
    node = json.loads(kube.kubectl("get", "nodes", "-o", "json"))["items"][0]
    address = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    ca = tmp_path_factory.mktemp("gateway-ca") / "ca.crt"
    ca.write_bytes(base64.b64decode(kube.get("secret", f"{CLUSTER}-cluster-ca-cert")["data"]["ca.crt"]))

    def user_token() -> str | None:   # once the user is Ready the operator maps a token to it
        tokens = base64.b64decode(kube.get("secret", f"{CLUSTER}-gateway-tokens")["data"]["credentials"])
        return next((t["token"] for t in json.loads(tokens)["tokens"] if t["name"] == GATEWAY_USER_NAME), None)
    out = Gateway(f"https://{address}:{node_port}", wait_until(user_token, 300, "the gateway user's token", 2), str(ca))

    def answers() -> bool:   # the gateway pod with the user's Secret mounted, the token file updated
        try:
            with out.client(timeout=30) as gw:
                gw.topics()
            return True
        except (GatewayError, httpx.HTTPError, OSError):   # 401 until the token reaches the pod; a pod restarting
            return False
    wait_until(answers, 300, "the gateway serving the user's token", 3)
    return out
