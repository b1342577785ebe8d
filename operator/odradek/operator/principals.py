"""The cluster's own processes as principals: what makes the operator, the controller, the
brokers and the gateway authenticate with identities of their own (docs/kubernetes.md,
"Security").

- **Control plane** (docs/control-plane.md): the controller and every broker serve their
  internal API over mutual TLS with their certificates from the cluster CA
  (``certs.control_plane_config``: only the CNs ``<c>-broker``, ``<c>-controller``,
  ``<c>-operator`` are admitted); a controller advertises
  ``https://<pod-ip-dashed>.<c>-controller.<ns>.svc:8080``, the name cluster DNS gives each
  endpoint of a headless Service (a Deployment's pods have no stable names; its certificate
  covers ``*.<c>-controller.<ns>.svc``). No downward API field gives the dashed address, so the
  controller container starts through ``sh -c`` which makes it from ``$POD_IP``. Readiness
  probes call the API with the pod's own certificate (``odradek operator probe``), since the
  kubelet cannot present one.
- **The operator** calls the controller with ``<c>-operator-certs`` (``operator_tls``: the
  Secret's PEMs written to files of its own, as Python's ``ssl`` needs files).
- **ZooKeeper**: digest credentials generated once into the Secret ``<c>-zookeeper-digest``
  (key ``credentials``, ``user:password``), mounted into brokers and controllers, with
  ``zookeeper.set.acl=true`` (Kafka's znode ACLs: only the cluster's processes may write).
- **The gateway** gets the cluster CA and its own certificate (``certs.gateway_kafka_args``):
  ``User:CN=<c>-gateway,O=odradek`` on TLS listeners with ``tls`` authentication.

``secure_children`` adds all of this to the manifests ``builders`` made (volumes, mounts,
settings, probes, and the ``odradek.dev/certificates-hash`` annotation whose change restarts
the pods); it is idempotent about volumes, so a builder that mounted them already is fine.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import shlex
import tempfile
from pathlib import Path
from typing import Any, Mapping

from odradek.cluster import control_plane
from odradek.cluster.control_plane_tls import ControlPlaneTls
from odradek.config.cluster_security import ZK_DIGEST_FILE, ZK_SET_ACL
from odradek.operator import builders, certs

ZK_SECRET_KEY = "credentials"
ZK_DIR = "/etc/odradek/zookeeper"
ZK_USER = "odradek"
PROBE_PERIOD_S, PROBE_TIMEOUT_S = 10, 8   # a Python process starts in each probe
_FILES = Path(tempfile.gettempdir()) / "odradek-operator-certs"


def zookeeper_secret_name(cluster: str) -> str:
    return f"{cluster}-zookeeper-digest"


def zookeeper_secret(cluster: str, namespace: str, existing: Mapping[str, Any] | None) -> dict:
    """The digest Secret: the existing credentials if any (new ones would lock the cluster out
    of the znodes it made), else fresh ones."""
    current = ((existing or {}).get("data") or {}).get(ZK_SECRET_KEY)
    value = current or base64.b64encode(f"{ZK_USER}:{secrets.token_urlsafe(24)}".encode()).decode()
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": zookeeper_secret_name(cluster), "namespace": namespace,
                         "labels": builders.labels(cluster, "zookeeper")},
            "data": {ZK_SECRET_KEY: value}}


def zookeeper_config() -> dict[str, str]:
    return {ZK_DIGEST_FILE: f"{ZK_DIR}/{ZK_SECRET_KEY}", ZK_SET_ACL: "true"}


def controller_url(cluster: str, pod_ip: str, namespace: str) -> str:
    """The URL of the controller pod at ``pod_ip``, by its DNS name (what it advertises and
    what the operator calls)."""
    host = pod_ip.replace(".", "-").replace(":", "-")
    return f"https://{host}.{builders.names(cluster)['controller']}.{namespace}.svc:{builders.CONTROLLER_PORT}"


def _advertise_by_name(cluster: str, container: dict) -> None:
    """Run the controller through ``sh -c`` so that its ``--advertised-url`` is its DNS name,
    made from ``$POD_IP`` (dots and colons to dashes). The other arguments are quoted as they
    are (the kubelet has expanded their ``$(VAR)`` references before the shell runs)."""
    args = list(container.pop("args"))
    i = args.index("--advertised-url")
    del args[i:i + 2]
    dashed = '$(printf %s "$POD_IP" | tr .: --)'
    url = f"https://{dashed}.{builders.names(cluster)['controller']}.$POD_NAMESPACE.svc:{builders.CONTROLLER_PORT}"
    container["command"] = ["sh", "-c", f"exec odradek {shlex.join(args)} --advertised-url \"{url}\""]


# -- the manifests -------------------------------------------------------------------------

def _mount(pod: dict, container: dict, volumes: list[dict], mounts: list[dict]) -> None:
    have = {v["name"] for v in pod.get("volumes", [])}
    pod["volumes"] = [*pod.get("volumes", []), *(v for v in volumes if v["name"] not in have)]
    have = {m["name"] for m in container.get("volumeMounts", [])}
    container["volumeMounts"] = [*container.get("volumeMounts", []), *(m for m in mounts if m["name"] not in have)]


def _zookeeper_volume(cluster: str) -> tuple[list[dict], list[dict]]:
    return ([{"name": "zookeeper-digest", "secret": {"secretName": zookeeper_secret_name(cluster)}}],
            [{"name": "zookeeper-digest", "mountPath": ZK_DIR, "readOnly": True}])


def _settings(container: dict, settings: Mapping[str, str]) -> None:
    for key, value in settings.items():
        container["args"] += ["--config", f"{key}={value}"]


def _probe(component: str, port: int, route: control_plane.Route) -> dict:
    """An exec probe calling the control plane with the pod's own certificate."""
    return {"exec": {"command": ["odradek", "operator", "probe", "--port", str(port), "--path", route.path(),
                                 "--keystore", certs.keystore_file(component).replace("$(POD_NAME)", "{hostname}"),
                                 "--truststore", certs.cluster_ca_file()]},
            "periodSeconds": PROBE_PERIOD_S, "timeoutSeconds": PROBE_TIMEOUT_S}


def _annotate(template: dict, version: str) -> None:
    template["metadata"].setdefault("annotations", {})[certs.CERTS_ANNOTATION] = version


def _secure_control_plane(cluster: str, component: str, template: dict, port: int,
                          route: control_plane.Route) -> dict:
    pod = template["spec"]
    container = pod["containers"][0]
    _mount(pod, container, *certs.pod_tls_volumes(cluster, component))
    _mount(pod, container, *_zookeeper_volume(cluster))
    _settings(container, {**certs.control_plane_config(cluster, component), **zookeeper_config()})
    container["readinessProbe"] = _probe(component, port, route)
    return container


def secure_children(children: list[dict], cluster: str, namespace: str, versions: Mapping[str, str]) -> None:
    """Give the controller, broker and gateway manifests among ``children`` their
    certificates, settings and probes (in place). ``versions``: ``CertificatePlan.versions``."""
    n = builders.names(cluster)
    for child in children:
        name, kind = child["metadata"]["name"], child["kind"]
        if kind == "Deployment" and name == n["controller"]:
            template = child["spec"]["template"]
            container = _secure_control_plane(cluster, "controller", template, builders.CONTROLLER_PORT,
                                              control_plane.HEALTH)
            _advertise_by_name(cluster, container)
            _annotate(template, versions["controller"])
        elif kind == "StatefulSet" and name == n["brokers"]:
            # The brokers' certificates are in the config hash (rolling.py restarts them one at a time).
            _secure_control_plane(cluster, "broker", child["spec"]["template"], builders.BROKER_INTERNAL_PORT,
                                  control_plane.STATUS)
        elif kind == "Deployment" and name == n["gateway"]:
            template = child["spec"]["template"]
            container = template["spec"]["containers"][0]
            _mount(template["spec"], container, *certs.pod_tls_volumes(cluster, "gateway"))
            container["args"] += certs.gateway_kafka_args()
            _annotate(template, versions["gateway"])


# -- the operator's own client certificate ---------------------------------------------------

def operator_tls(kube: Any, cluster: str, namespace: str) -> ControlPlaneTls | None:
    """The operator's control-plane identity for ``cluster``: ``<c>-operator-certs`` and the
    cluster CA written to files (named by their content, readable by the operator only); None
    while the Secrets do not exist yet."""
    n = certs.secret_names(cluster)
    own = certs.decode(kube.get("v1", "Secret", namespace, n["operator"])).get("operator.pem")
    ca = certs.decode(kube.get("v1", "Secret", namespace, n["cluster_ca_cert"])).get(certs.CA_CERT_KEY)
    if not own or not ca:
        return None
    return ControlPlaneTls(str(_private_file(own)), str(_private_file(ca)))


def _private_file(data: bytes) -> Path:
    _FILES.mkdir(mode=0o700, exist_ok=True)
    path = _FILES / f"{hashlib.sha256(data).hexdigest()[:24]}.pem"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        tmp.replace(path)   # atomic: a concurrent handler never reads half a file
    return path
