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
  ``zookeeper.set.acl=true`` (Kafka's znode ACLs: only the cluster's processes may write). A
  managed ensemble serves TLS only (``zookeeper``): ZooKeeper gets ``<c>-zookeeper-certs``, and
  brokers and controllers connect with their own certificates (``zookeeper.ssl.*``), which also
  locks ZooKeeper's root to them (``odradek.cluster.zk_session.ensure_chroot``).
- **The gateway** gets the cluster CA and its own certificate (``certs.gateway_kafka_args``):
  ``User:CN=<c>-gateway,O=odradek`` on TLS listeners with ``tls`` authentication, which is no
  super user (its only ACLs are its schema registry's, ``gateway_acls``): requests run as the
  OdradekUsers it maps tokens to (``gateway_security``), whose Secrets it mounts (``gateway_users``).

- **Where the operator sends credentials**: the ``odradek.dev/controller-url`` annotation is
  honoured only for ``https`` URLs whose host is a Service of the cluster's namespace
  (``<svc>.<ns>.svc[.cluster.local]``, or a pod under it), or that start with a prefix the
  operator's administrator trusts (``ODRADEK_OPERATOR_TRUSTED_CONTROLLER_URLS``, for controllers
  outside Kubernetes in development: ``scheme://host`` origins); otherwise it is ignored (``annotated_controller_urls``
  says why, for a status condition) and the controller Service's endpoints are used: the
  users' passwords the operator sends there never leave the cluster's namespace.

``security_plan`` decides all of this as a frozen ``security.SecurityPlan`` (volumes, mounts,
settings, probes, the ``odradek.dev/certificates-hash`` annotation whose change restarts the
pods, the brokers' TLS listener material) before anything is built; the pure ``builders`` take
it in and return the manifests as they are applied.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets
import tempfile
import urllib.parse
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from odradek.cluster import control_plane
from odradek.cluster.control_plane_tls import ControlPlaneTls
from odradek.config.cluster_security import ZK_DIGEST_FILE, ZK_SET_ACL
from odradek.operator import builders, certs, tiered_storage, zookeeper
from odradek.operator.listeners import BrokerTls, Listener, secured
from odradek.operator.security import PodSecurity, SecurityPlan

ZK_SECRET_KEY = "credentials"
ZK_DIR = "/etc/odradek/zookeeper"
ZK_USER = "odradek"
# A broker is ready once serving and in every ISR it belongs to (READY); on an image before that
# route (404: control-plane version 1, whose probe takes the last --path) once serving (STATUS).
BROKER_PROBE_ROUTES = (control_plane.READY, control_plane.STATUS)
_FILES = Path(tempfile.gettempdir()) / "odradek-operator-certs"
CONTROLLER_URL_ANNOTATION = "odradek.dev/controller-url"
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"


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


def cluster_secret_names(cluster: str) -> list[str]:
    """Every Secret an OdradekCluster ``cluster`` makes: no OdradekUser may be named like one."""
    return sorted({*certs.secret_names(cluster).values(), zookeeper_secret_name(cluster),
                   tiered_storage.secret_name(cluster)})


def controller_url_problem(url: str, namespace: str, trusted: Sequence[str] = ()) -> str | None:
    """Why the operator may not call ``url`` from the controller-url annotation of a cluster in
    ``namespace`` (None: https to a Service of that namespace). ``trusted``: ``scheme://host``
    origins the operator's administrator allows besides (any port)."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a bad port
    except ValueError as e:
        return f"{url!r} is not a URL ({e})"
    if parts.username is not None or parts.query or parts.fragment:
        return f"{url!r} carries credentials, a query or a fragment"
    origins = {(t.scheme, t.hostname) for t in map(urllib.parse.urlsplit, trusted)}
    if (parts.scheme, parts.hostname) in origins:
        return None
    if parts.scheme != "https":
        return f"{url!r} is not https"
    service = rf"^({_DNS_LABEL}\.)?{_DNS_LABEL}\.{re.escape(namespace)}\.svc(\.cluster\.local)?$"
    if not re.match(service, parts.hostname or ""):
        return f"{url!r} is not a Service of namespace {namespace} (<service>.{namespace}.svc)"
    return None


def annotated_controller_urls(meta: Mapping[str, Any], trusted: Sequence[str] = ()) -> tuple[list[str], str | None]:
    """The controller URLs a cluster's ``odradek.dev/controller-url`` annotation names, and why
    it is ignored (then the URLs are empty: one untrusted URL voids the annotation)."""
    annotated = (meta.get("annotations") or {}).get(CONTROLLER_URL_ANNOTATION) or ""
    urls = [u.strip() for u in annotated.split(",") if u.strip()]
    problems = [p for p in (controller_url_problem(u, meta["namespace"], trusted) for u in urls) if p]
    if problems:
        return [], (f"{CONTROLLER_URL_ANNOTATION} ignored, the controller Service is used: "
                    f"{'; '.join(problems)}")
    return urls, None


def _controller_url_word(cluster: str) -> str:
    """The controller's ``--advertised-url`` as a shell word: its DNS name made from ``$POD_IP``
    (dots and colons to dashes) and ``$POD_NAMESPACE``; ``builders`` runs the controller through
    ``sh -c`` for it."""
    dashed = '$(printf %s "$POD_IP" | tr .: --)'
    return f"https://{dashed}.{builders.names(cluster)['controller']}.$POD_NAMESPACE.svc:{builders.CONTROLLER_PORT}"


# -- the security plan----------------------------------------------------------------------

def _zookeeper_volume(cluster: str) -> tuple[list[dict], list[dict]]:
    return ([{"name": "zookeeper-digest", "secret": {"secretName": zookeeper_secret_name(cluster)}}],
            [{"name": "zookeeper-digest", "mountPath": ZK_DIR, "readOnly": True}])


def _probe(component: str, port: int, routes: Sequence[control_plane.Route]) -> dict:
    """An exec probe calling the control plane with the pod's own certificate: the first of
    ``routes`` that the pod's API knows (``probe``: a 404 passes to the next); the probe of an
    image before ``--path`` could repeat asks the last only (argparse keeps the last value)."""
    paths = [a for route in routes for a in ("--path", route.path())]
    command = ["odradek", "operator", "probe", "--port", str(port), *paths,
               "--keystore", certs.keystore_file(component).replace("$(POD_NAME)", "{hostname}"),
               "--truststore", certs.cluster_ca_file()]
    return builders.readiness_probe({"exec": {"command": command}})


def _control_plane(cluster: str, component: str, port: int, routes: Sequence[control_plane.Route],
                   zookeeper_tls: bool) -> PodSecurity:
    """A broker's or controller's: its certificates, the ZooKeeper digest, control-plane mutual
    TLS and ZooKeeper ACL settings (and TLS to a managed ensemble), the probe with its own
    certificate."""
    tls_volumes, tls_mounts = certs.pod_tls_volumes(cluster, component)
    zk_volumes, zk_mounts = _zookeeper_volume(cluster)
    zk_tls = zookeeper.client_settings(certs.keystore_file(component), certs.cluster_ca_file()) if zookeeper_tls else {}
    return PodSecurity(tuple(tls_volumes + zk_volumes), tuple(tls_mounts + zk_mounts),
                       {**certs.control_plane_config(cluster, component), **zookeeper_config(), **zk_tls},
                       probe=_probe(component, port, routes))


def _zookeeper(cluster: str, versions: Mapping[str, str], managed: bool) -> PodSecurity:
    """The managed ensemble's server certificate and the cluster CA (``zookeeper.zoo_cfg``
    names the files); nothing for an external one."""
    if not managed:
        return PodSecurity()
    volumes, mounts = certs.pod_tls_volumes(cluster, "zookeeper")
    return PodSecurity(tuple(volumes), tuple(mounts), annotations={certs.CERTS_ANNOTATION: versions["zookeeper"]})


def broker_tls(cluster: str, listeners: Sequence[Listener]) -> BrokerTls | None:
    """The brokers' TLS material (``certs``) when a listener has TLS or authentication: then
    replication is mutual TLS too. Super users: the brokers' and the operator's certificates;
    never the gateway's (its requests run as mapped OdradekUsers, under their ACLs)."""
    if not secured(listeners):
        return None
    return BrokerTls(certs.broker_ssl_config(), certs.principal(cluster, "broker"),
                     (certs.principal(cluster, "operator"),))


def security_plan(cluster: str, listeners: Sequence[Listener], versions: Mapping[str, str],
                  managed_zookeeper: bool = False, gateway_users: Sequence[str] = ()) -> SecurityPlan:
    """What the controller, broker, gateway (and managed ZooKeeper) pods of ``cluster`` get for
    their identities. ``versions``: ``CertificatePlan.versions`` (component -> hash of what its
    pods load); ``managed_zookeeper``: the operator runs the ensemble (TLS only);
    ``gateway_users``: the OdradekUsers whose Secrets the gateway mounts."""
    gateway_volumes, gateway_mounts = certs.pod_tls_volumes(cluster, "gateway")
    controller = _control_plane(cluster, "controller", builders.CONTROLLER_PORT, (control_plane.HEALTH,),
                                managed_zookeeper)
    return SecurityPlan(
        controller=replace(controller, annotations={certs.CERTS_ANNOTATION: versions["controller"]}),
        broker=_control_plane(cluster, "broker", builders.BROKER_INTERNAL_PORT, BROKER_PROBE_ROUTES,
                              managed_zookeeper),
        gateway=PodSecurity(tuple(gateway_volumes), tuple(gateway_mounts), args=tuple(certs.gateway_kafka_args()),
                            annotations={certs.CERTS_ANNOTATION: versions["gateway"]}),
        broker_certificates=versions["broker"], broker_pod_certificates=certs.broker_versions(versions),
        broker_tls=broker_tls(cluster, listeners),
        controller_advertised_url=_controller_url_word(cluster),
        zookeeper=_zookeeper(cluster, versions, managed_zookeeper), gateway_users=tuple(sorted(gateway_users)))


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
