"""Helpers of the e2e suite: kubectl/helm against the suite's cluster, its readiness checks.
(Waiting on them: ``odradek.dev.waiting.wait_until``.)"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from odradek.dev.waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE = "odradek-e2e"
RELEASE = "odradek"
CLUSTER = "e2e"  # cluster.name in values-e2e.yaml
BROKERS = "app.kubernetes.io/component=broker"
IMAGE = "ghcr.io/odradek/odradek:0.1.0"   # this release's: the chart's default (e2e/images/build.sh)


def previous_image() -> str:
    """Release N-1's image, which the suite's cluster is installed with (e2e/images/previous-release;
    e2e/images/build.sh and e2e/kind.sh build it)."""
    lines = (ROOT / "e2e" / "images" / "previous-release").read_text().splitlines()
    commit = next(line.strip() for line in lines if line.strip() and not line.startswith("#"))
    return f"ghcr.io/odradek/odradek:git-{commit[:7]}"


@dataclass
class Kube:
    kubeconfig: Path
    kubectl_bin: str
    helm_bin: str
    disposable: bool = False   # the suite's own node, deleted with everything on it at the end

    def env(self) -> dict[str, str]:
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 120) -> str:
        return self._run(self.kubectl_bin, args, input, timeout)

    def helm(self, *args: str, timeout: float = 300) -> str:
        return self._run(self.helm_bin, args, None, timeout)

    def _run(self, binary: str, args, input, timeout) -> str:
        result = subprocess.run([binary, *args], input=input, capture_output=True, text=True, timeout=timeout,
                                env=self.env())
        if result.returncode != 0:
            raise RuntimeError(f"{Path(binary).name} {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def get(self, *args: str) -> dict:
        return json.loads(self.kubectl("get", "-n", NAMESPACE, *args, "-o", "json"))


def cluster_ready(kube: Kube) -> bool:
    status = kube.get("odradekcluster", CLUSTER).get("status", {})
    return any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", []))

def settled(kube: Kube) -> bool:
    """The cluster has taken in everything asked of it: no gateway user left out (the gateway's
    tokens change, and its pod rolls, once one is taken in) and every Deployment and StatefulSet
    has rolled its current spec out (observed, every replica updated and ready). The operator
    may call the cluster Ready from its children's health a moment before such a change."""
    status = kube.get("odradekcluster", CLUSTER).get("status", {})
    if any(c["type"] == "GatewayUsersRefused" and c["status"] == "True" for c in status.get("conditions", [])):
        return False
    for kind in ("deployments", "statefulsets"):
        for w in kube.get(kind)["items"]:
            st, want = w.get("status", {}), w["spec"].get("replicas", 1)
            if st.get("observedGeneration") != w["metadata"]["generation"] or not (
                    st.get("replicas", 0) == st.get("updatedReplicas", 0) == st.get("readyReplicas", 0) == want):
                return False
    return True


def external_client(kube: Kube, ca_file: Path) -> dict:
    """A Kafka client's settings for the cluster's external NodePort SASL_SSL listener, from
    ``status.listeners`` and the CA Secret it names (written to ``ca_file``): nothing else; the
    caller adds a user's SCRAM login."""
    def listed():
        status = kube.get("odradekcluster", CLUSTER).get("status") or {}
        return next((li for li in status.get("listeners") or []
                     if li["type"] == "nodeport" and li.get("bootstrapServers")), None)
    listener = wait_until(listed, 300, "the NodePort listener in status.listeners", 2)
    ca_file.write_bytes(base64.b64decode(kube.get("secret", listener["caSecret"])["data"]["ca.crt"]))
    return {"bootstrap.servers": listener["bootstrapServers"], "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(ca_file)}


def scram_login(kube: Kube, user: str, settings: dict) -> dict:
    """``settings`` plus OdradekUser ``user``'s SCRAM-SHA-512 login, its password from its Secret."""
    password = base64.b64decode(kube.get("secret", user)["data"]["password"]).decode()
    return {**settings, "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password}


def pods_ready(kube: Kube, selector: str = "") -> list[dict]:
    """The namespace's pods (matching ``selector``) if every one is Running and Ready, else []."""
    args = ("pods", "-l", selector) if selector else ("pods",)
    pods = kube.get(*args)["items"]
    ready = all(p["status"].get("phase") == "Running" and p["metadata"].get("deletionTimestamp") is None
                and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
                for p in pods)
    return pods if pods and ready else []


def diagnose(kube: Kube) -> str:
    """What a failed wait or test needs in the log: the cluster's status, every pod's state, the
    last lines of each container that is not ready (the operator's always), the recent warnings
    of the ready brokers, controllers and ZooKeeper servers, and the Warning events."""
    out = []

    def section(title: str, *args: str, **kw) -> None:
        try:
            out.append(f"--- {title}\n{kube.kubectl(*args, **kw)}")
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            out.append(f"--- {title}: {e}")

    section("odradekcluster status", "get", "odradekcluster", "-n", NAMESPACE, "-o", "jsonpath={.items[*].status}")
    section("node conditions", "get", "nodes", "-o",
            "jsonpath={range .items[*].status.conditions[*]}{.type}={.status} {.message}{'\\n'}{end}")
    section("pods", "get", "pods", "-n", NAMESPACE, "-o", "wide")
    try:
        pods = kube.get("pods")["items"]
    except (RuntimeError, subprocess.TimeoutExpired):
        pods = []
    for pod in pods:
        name = pod["metadata"]["name"]
        for c in pod["status"].get("containerStatuses", []):
            if not c.get("ready") or "operator" in name:
                section(f"logs {name}/{c['name']}", "logs", "-n", NAMESPACE, name, "-c", c["name"], "--tail=60")
                if c.get("restartCount"):   # what the container said before it was restarted
                    section(f"previous logs {name}/{c['name']}", "logs", "-n", NAMESPACE, name, "-c", c["name"],
                            "--previous", "--tail=60")
            elif pod["metadata"].get("labels", {}).get("app.kubernetes.io/component") in CORE:
                out.append(f"--- warnings {name}/{c['name']}\n{_warnings(kube, name, c['name'])}")
    # last: CI keeps a failure's first and last lines, and Normal events (every pod scheduled,
    # pulled, started) filled the first ones
    section("warning events", "get", "events", "-n", NAMESPACE, "--field-selector", "type=Warning",
            "--sort-by=.lastTimestamp")
    return "\n".join(out)


CORE = ("broker", "controller", "zookeeper")   # whose warnings say what a ready pod went through
WARNING_MARKS = (" WARNING ", " ERROR ", " - WARN ", " - ERROR ")   # Python's logging, ZooKeeper's log4j
ISR_MARKS = ("ISR", "the coordinator of", "loaded __")   # INFO lines a stuck group or ISR needs
PROBE_NOISE = "Unsuccessful handshake with session 0x0"   # ZooKeeper: its TCP readiness probe, every 5 s


def _warnings(kube: Kube, pod: str, container: str, tail: int = 40) -> str:
    """The last ``tail`` kinds of warnings, errors and ISR changes of a ready container's last 15
    minutes (a session lost and expired, an ISR shrunk), each with its last timestamp and count:
    one line repeated thousands of times (a rebalance storm) must not hide the rest."""
    try:
        lines = kube.kubectl("logs", "-n", NAMESPACE, pod, "-c", container, "--since=15m").splitlines()
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        return str(e)
    return "\n".join(collapse([line for line in lines if any(m in line for m in WARNING_MARKS + ISR_MARKS)
                               and PROBE_NOISE not in line])[-tail:])


def collapse(lines: list[str]) -> list[str]:
    """``lines`` with those differing only in their numbers (timestamps, generations) folded into
    the last of them, in the order of their last occurrence, with how many there were."""
    last: dict[str, tuple[int, str]] = {}
    for line in lines:
        kind = re.sub(r"\d+", "#", line)
        count = last.pop(kind, (0, ""))[0]
        last[kind] = (count + 1, line)
    return [line if n == 1 else f"{line}  [x{n}]" for n, line in last.values()]
