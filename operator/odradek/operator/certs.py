"""Operator-managed certificate authorities and the certificates of a cluster's processes,
in Strimzi's layout (docs/kubernetes.md, "Security").

Two CAs per OdradekCluster ``c``, each as two Secrets (the certificate Secret may be shared,
the key Secret not):

- the **cluster CA** (``c-cluster-ca-cert``: ``ca.crt``; ``c-cluster-ca``: ``ca.key``) signs the
  certificates of the brokers, the controller, the gateway, the operator and ZooKeeper: Kafka
  listeners, inter-broker replication, the control plane (``control.plane.ssl.*``) and
  ZooKeeper's client and quorum TLS (``zookeeper.ssl.*``, ``operator.zookeeper``);
- the **clients CA** (``c-clients-ca-cert``, ``c-clients-ca``) signs users' certificates
  (OdradekUser with ``tls`` authentication); brokers trust it on their TLS listeners.

Spec: ``clusterCa`` / ``clientsCa`` (``spec.CaSettings``) with ``validityDays``, ``renewalDays``
and ``generateCertificateAuthority`` (false: the user put ``ca.crt``/``ca.key`` into the two
Secrets, the operator only reads them and never renews them).

Per-component Secrets (owned by the cluster): ``c-broker-certs`` (``<pod>.crt``, ``<pod>.key``
and ``<pod>.pem`` = certificate, CA and key in one file, the broker's keystore form, per broker
pod; ``ca-bundle.crt`` = cluster CA + clients CA, the brokers' truststore), ``c-controller-certs``,
``c-gateway-certs``, ``c-operator-certs``, ``c-zookeeper-certs`` (``<component>.crt/.key/.pem``). Subjects are
``CN=<c>-<component>,O=odradek``, so each process has its own principal (``principal``).

Renewal: a CA whose certificate has less than ``renewalDays`` left is re-signed with the same
key (certificates it issued stay valid against the old and the new CA certificate, so pods can
restart one at a time); a process certificate is reissued when it is missing, has less than
``renewalDays`` left, was not signed by the CA's key, or its names changed. ``versions`` (a
hash per component of what its pods load; per broker too: ``broker_versions``) goes into the pod
templates: a change rolls the brokers with the rolling logic (``rolling.py``: a broker's own
certificate restarts that broker alone, ``revisions``) and the Deployments by their own strategy.

The interface for the listeners (``listeners.py``), users (``users.py``) and the pod builders:
``pod_tls_volumes``, ``broker_ssl_config``, ``control_plane_config``, ``gateway_kafka_args``,
``principal``, ``user_certificate`` (a tls OdradekUser's certificate from the clients CA),
``read_ca``; ``expiring`` is the status timer's check of what time alone makes due, and
``expiry_times`` what it exports (``odradek_certificate_expiry_timestamp_seconds``).
``plan_certificates`` is pure (validates everything before anything is written: no partial
change on bad input) over the Secrets ``read_existing`` reads; the reconcile applies the plan.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from odradek.certs import CertificateAuthority, IssuedCertificate, alt_names, not_after
from odradek.config.cluster_security import (CONTROL_PLANE_ENDPOINT_IDENTIFICATION, CONTROL_PLANE_KEYSTORE,
                                             CONTROL_PLANE_PEER_CN, CONTROL_PLANE_TRUSTSTORE)
from odradek.operator import builders
from odradek.operator.spec import CaSettings, ClusterSpec
from odradek.operator.validation import SpecError, ca_settings

ORGANIZATION = "odradek"
CERTS_DIR = "/etc/odradek/certs"
COMPONENTS = ("broker", "controller", "gateway", "operator", "zookeeper")
CA_CERT_KEY, CA_KEY_KEY, BUNDLE_KEY = "ca.crt", "ca.key", "ca-bundle.crt"
CERTS_ANNOTATION = "odradek.dev/certificates-hash"
RENEWAL_ANNOTATION = "odradek.dev/certificates-renewal"   # set on the cluster: reconcile to renew
CLUSTER_DOMAIN = "cluster.local"


# -- names, principals, what pods mount ----------------------------------------------------

def secret_names(cluster: str) -> dict[str, str]:
    """Every certificate Secret of cluster ``cluster``, by role."""
    return {"cluster_ca_cert": f"{cluster}-cluster-ca-cert", "cluster_ca": f"{cluster}-cluster-ca",
            "clients_ca_cert": f"{cluster}-clients-ca-cert", "clients_ca": f"{cluster}-clients-ca",
            **{c: f"{cluster}-{c}-certs" for c in COMPONENTS}}


def common_name(cluster: str, component: str) -> str:
    return f"{cluster}-{component}"


def principal(cluster: str, component: str) -> str:
    """The Kafka principal of a component's certificate (Kafka's DEFAULT mapping), e.g.
    ``User:CN=prod-broker,O=odradek``: for ``super.users`` and ACLs."""
    return f"User:CN={common_name(cluster, component)},O={ORGANIZATION}"


def _file(component: str) -> str:
    """The file stem of a component's certificate in its mounted Secret (brokers: per pod)."""
    return "$(POD_NAME)" if component == "broker" else component


def pod_tls_volumes(cluster: str, component: str) -> tuple[list[dict], list[dict]]:
    """The volumes and container volumeMounts a ``component`` (broker, controller, gateway)
    pod needs for its certificates: its own Secret at ``/etc/odradek/certs/<component>/``
    (``<stem>.crt``, ``.key``, ``.pem``; for brokers also ``ca-bundle.crt``) and the cluster
    CA's certificate at ``/etc/odradek/certs/cluster-ca/ca.crt``. Mounted as directories (not
    subPath), so renewed Secrets reach running pods; processes load them at start, which is
    why a change rolls the pods (``CERTS_ANNOTATION``). ``principals.security_plan`` gives them
    to every broker, controller and gateway pod."""
    n = secret_names(cluster)
    volumes = [{"name": "cluster-ca", "secret": {"secretName": n["cluster_ca_cert"]}},
               {"name": f"{component}-certs", "secret": {"secretName": n[component]}}]
    mounts = [{"name": "cluster-ca", "mountPath": f"{CERTS_DIR}/cluster-ca", "readOnly": True},
              {"name": f"{component}-certs", "mountPath": f"{CERTS_DIR}/{component}", "readOnly": True}]
    return volumes, mounts


def cluster_ca_file() -> str:
    return f"{CERTS_DIR}/cluster-ca/{CA_CERT_KEY}"


def keystore_file(component: str) -> str:
    """The component's certificate, CA and key in one PEM (``$(POD_NAME)`` for brokers: the
    kubelet expands it in container args)."""
    return f"{CERTS_DIR}/{component}/{_file(component)}.pem"


def broker_ssl_config(client_auth: str = "none") -> dict[str, str]:
    """The broker settings (``--config KEY=VALUE``, docs/security.md "TLS") for its TLS
    listeners: the pod's own certificate as keystore, the cluster CA + clients CA bundle as
    truststore (followers check leaders against the cluster CA, clients present clients-CA
    certificates), ``ssl.client.auth`` (``none``, ``requested``, ``required``: every TLS
    listener of a broker shares it). Needs ``pod_tls_volumes(cluster, "broker")``."""
    if client_auth not in ("none", "requested", "required"):
        raise ValueError(f"ssl.client.auth {client_auth!r}: none, requested or required")
    return {"ssl.keystore.location": keystore_file("broker"),
            "ssl.truststore.location": f"{CERTS_DIR}/broker/{BUNDLE_KEY}",
            "ssl.client.auth": client_auth,
            "ssl.endpoint.identification.algorithm": "https"}


def control_plane_config(cluster: str, component: str) -> dict[str, str]:
    """The ``control.plane.ssl.*`` settings of a broker or controller: mutual TLS with its own
    certificate, the cluster CA, and only the cluster's brokers, controllers and operator
    admitted by CN (the gateway's certificate comes from the same CA but opens no control plane)."""
    peers = "|".join(("broker", "controller", "operator"))
    return {CONTROL_PLANE_KEYSTORE: keystore_file(component), CONTROL_PLANE_TRUSTSTORE: cluster_ca_file(),
            CONTROL_PLANE_ENDPOINT_IDENTIFICATION: "https",
            CONTROL_PLANE_PEER_CN: f"{re.escape(cluster)}-({peers})"}


def gateway_kafka_args() -> list[str]:
    """The gateway's ``--kafka-ssl-*`` options: the cluster CA to check the brokers with, and
    its own certificate (its principal on TLS listeners with ``tls`` authentication). The
    security protocol is the listener's, chosen by the caller (``--kafka-security-protocol``)."""
    return ["--kafka-ssl-ca-location", cluster_ca_file(),
            "--kafka-ssl-certificate-location", f"{CERTS_DIR}/gateway/gateway.crt",
            "--kafka-ssl-key-location", f"{CERTS_DIR}/gateway/gateway.key"]


def _service_names(service: str, namespace: str) -> list[str]:
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.{CLUSTER_DOMAIN}"]


def broker_names(cluster: str, namespace: str, ordinal: int, extra: Iterable[str] = ()) -> list[str]:
    """SANs of broker ``ordinal``: its headless-Service DNS names, the bootstrap and headless
    Services' names, and ``extra`` (external addresses, from the listeners)."""
    n = builders.names(cluster)
    pod = f"{n['brokers']}-{ordinal}"
    names = [f"{pod}.{n['brokers']}.{namespace}.svc", f"{pod}.{n['brokers']}.{namespace}.svc.{CLUSTER_DOMAIN}",
             *_service_names(n["bootstrap"], namespace), *_service_names(n["brokers"], namespace), *extra]
    return list(dict.fromkeys(names))


def component_names(cluster: str, namespace: str, component: str) -> list[str]:
    """SANs of the controller (its Service, and ``*.<c>-controller.<ns>.svc``: it advertises
    ``<pod-ip-dashed>.<c>-controller.<ns>.svc``), the gateway (its Service, and
    ``*.<c>-gateway-pods.<ns>.svc``, where each pod's schema registry is reached), ZooKeeper (its
    client Service, which the connect string names, and every server's headless name); the
    operator: none."""
    n = builders.names(cluster)
    if component == "zookeeper":
        headless = n["zookeeper_headless"]
        return [*_service_names(n["zookeeper"], namespace), f"*.{headless}.{namespace}.svc",
                f"*.{headless}.{namespace}.svc.{CLUSTER_DOMAIN}"]
    if component == "controller":
        svc = n["controller"]
        return [*_service_names(svc, namespace), f"*.{svc}.{namespace}.svc",
                f"*.{svc}.{namespace}.svc.{CLUSTER_DOMAIN}"]
    if component == "gateway":
        pods = n["gateway_pods"]
        return [*_service_names(n["gateway"], namespace), f"*.{pods}.{namespace}.svc",
                f"*.{pods}.{namespace}.svc.{CLUSTER_DOMAIN}"]
    return []


# -- the plan (pure) -------------------------------------------------------------------------

def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def decode(secret: Mapping[str, Any] | None) -> dict[str, bytes]:
    """A Secret's ``data`` as bytes (empty for a missing Secret)."""
    return {k: base64.b64decode(v) for k, v in ((secret or {}).get("data") or {}).items()}


def _secret(name: str, namespace: str, cluster: str, data: Mapping[str, bytes]) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace, "labels": builders.labels(cluster, "certificates")},
            "data": {k: _b64(v) for k, v in sorted(data.items())}}


@dataclass
class CertificatePlan:
    """What the reconcile writes, and what the pod builders need (``versions``)."""
    secrets: list[dict] = field(default_factory=list)      # owned by the cluster: adopt, then apply
    versions: dict[str, str] = field(default_factory=dict)  # component (and broker-<n>) -> hash of what its pods load
    renewed: list[str] = field(default_factory=list)       # for the log: what was (re)issued
    warnings: list[str] = field(default_factory=list)
    cluster_ca: CertificateAuthority | None = None
    clients_ca: CertificateAuthority | None = None


def _ca(which: str, cluster: str, settings: CaSettings, cert_data: Mapping[str, bytes],
        key_data: Mapping[str, bytes], now: datetime.datetime, plan: CertificatePlan) -> tuple[CertificateAuthority, bool]:
    """The CA ``which`` (cluster, clients) to use, and whether the operator writes its Secrets."""
    n = secret_names(cluster)
    cert_pem, key_pem = cert_data.get(CA_CERT_KEY), key_data.get(CA_KEY_KEY)
    field_name = f"{which}Ca"
    if cert_pem is None or key_pem is None:
        if not settings.generate:
            raise SpecError(f"{field_name}.generateCertificateAuthority is false: put the CA's certificate into "
                            f"Secret {n[which + '_ca_cert']} (key {CA_CERT_KEY}) and its key into Secret "
                            f"{n[which + '_ca']} (key {CA_KEY_KEY})")
        plan.renewed.append(f"{which} CA (new)")
        return CertificateAuthority.create(f"{cluster}-{which}-ca", ORGANIZATION, settings.validity), True
    try:
        ca = CertificateAuthority.from_pem(cert_pem, key_pem)
    except ValueError as e:
        raise SpecError(f"{field_name}: Secrets {n[which + '_ca_cert']}/{n[which + '_ca']}: {e}") from None
    left = ca.cert.not_valid_after_utc - now
    if left < settings.renewal:
        if not settings.generate:
            plan.warnings.append(f"the user-supplied {which} CA expires {ca.cert.not_valid_after_utc:%Y-%m-%d}: "
                                 "replace it")
            return ca, False
        plan.renewed.append(f"{which} CA (renewed, same key)")
        return ca.renewed(settings.validity), True
    return ca, settings.generate


def _signed_by(cert: x509.Certificate, ca: CertificateAuthority) -> bool:
    try:
        cert.verify_directly_issued_by(ca.cert)
        return True
    except (ValueError, TypeError, InvalidSignature):
        return False


def _keep(data: Mapping[str, bytes], stem: str, ca: CertificateAuthority, names: list[str], cn: str,
          settings: CaSettings, now: datetime.datetime) -> IssuedCertificate | None:
    """The certificate under ``stem`` if it can stay: present, signed by ``ca``'s key, same CN
    and names, and more than ``renewalDays`` left."""
    cert_pem, key_pem = data.get(f"{stem}.crt"), data.get(f"{stem}.key")
    if not cert_pem or not key_pem:
        return None
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        return None
    cns = [a.value for a in cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)]
    if (cns != [cn] or not _signed_by(cert, ca) or sorted(alt_names(cert_pem)) != sorted(names)
            or _due(cert.not_valid_after_utc, ca.cert.not_valid_after_utc, settings, now)):
        return None
    return IssuedCertificate(cert_pem, key_pem, ca.cert_pem)


def _due(end: datetime.datetime, cap: datetime.datetime | None, settings: CaSettings,
         now: datetime.datetime) -> bool:
    """A certificate ending at ``end`` is renewed with less than ``renewalDays`` left, unless
    its CA's end ``cap`` caps it (a user-supplied CA about to expire: a new one would end as
    soon, and reissuing it at every reconcile would restart pods for nothing)."""
    return end - now < settings.renewal and (cap is None or end < cap)


def _issue(data: Mapping[str, bytes], stem: str, ca: CertificateAuthority, names: list[str], cn: str,
           settings: CaSettings, now: datetime.datetime, plan: CertificatePlan) -> dict[str, bytes]:
    cert = _keep(data, stem, ca, names, cn, settings, now)
    if cert is None:
        cert = ca.issue_certificate(*names, common_name=cn, organization=ORGANIZATION, validity=settings.validity)
        plan.renewed.append(stem)
    else:  # the CA certificate may have been renewed: the .pem carries the current one
        cert = IssuedCertificate(cert.cert_pem, cert.key_pem, ca.cert_pem)
    return {f"{stem}.crt": cert.cert_pem, f"{stem}.key": cert.key_pem, f"{stem}.pem": cert.chain_and_key()}


def _version(data: Mapping[str, bytes]) -> str:
    digest = hashlib.sha256()
    for key in sorted(data):
        digest.update(key.encode() + b"\0" + data[key] + b"\0")
    return digest.hexdigest()[:16]


def broker_version_key(ordinal: int) -> str:
    """``CertificatePlan.versions``' key of broker ``ordinal``'s own certificate (with the CA
    bundle): its change restarts that broker alone (``revisions``); ``broker`` is all of them."""
    return f"broker-{ordinal}"


def broker_versions(versions: Mapping[str, str]) -> dict[int, str]:
    """Broker ordinal -> its own certificate's version, from ``CertificatePlan.versions``."""
    return {int(k.removeprefix("broker-")): v for k, v in versions.items()
            if k.startswith("broker-") and k.removeprefix("broker-").isdigit()}


def plan_certificates(cluster: str, namespace: str, spec: ClusterSpec, existing: Mapping[str, Mapping[str, bytes]],
                      broker_replicas: int, extra_broker_names: Mapping[int, Iterable[str]] | None = None,
                      now: datetime.datetime | None = None, gateway_names: Iterable[str] = ()) -> CertificatePlan:
    """Every certificate Secret the cluster should have, from ``existing`` (Secret name -> its
    decoded data; absent names are missing Secrets); ``gateway_names``: addresses the gateway's
    certificate names besides its Service (``gateway_security.certificate_names``). ``SpecError`` for missing or unusable
    user-supplied CAs, before anything is decided."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    n, plan = secret_names(cluster), CertificatePlan()
    settings = {"cluster": spec.cluster_ca, "clients": spec.clients_ca}
    cas = {}
    for which in ("cluster", "clients"):
        ca, owned = _ca(which, cluster, settings[which], existing.get(n[f"{which}_ca_cert"], {}),
                        existing.get(n[f"{which}_ca"], {}), now, plan)
        cas[which] = ca
        if owned:
            plan.secrets += [_secret(n[f"{which}_ca_cert"], namespace, cluster, {CA_CERT_KEY: ca.cert_pem}),
                             _secret(n[f"{which}_ca"], namespace, cluster, {CA_KEY_KEY: ca.key_pem})]
    plan.cluster_ca, plan.clients_ca = cas["cluster"], cas["clients"]
    ca, cfg, extra = cas["cluster"], settings["cluster"], extra_broker_names or {}
    bundle = ca.cert_pem + cas["clients"].cert_pem
    broker_data: dict[str, bytes] = {BUNDLE_KEY: bundle}
    old = existing.get(n["broker"], {})
    for i in range(broker_replicas):
        stem = f"{builders.names(cluster)['brokers']}-{i}"
        own = _issue(old, stem, ca, broker_names(cluster, namespace, i, extra.get(i, ())),
                     common_name(cluster, "broker"), cfg, now, plan)
        broker_data |= own
        plan.versions[broker_version_key(i)] = _version({BUNDLE_KEY: bundle, **own})
    plan.secrets.append(_secret(n["broker"], namespace, cluster, broker_data))
    plan.versions["broker"] = _version(broker_data)
    for component in COMPONENTS[1:]:
        names = component_names(cluster, namespace, component) + (list(gateway_names) if component == "gateway" else [])
        data = _issue(existing.get(n[component], {}), component, ca, names, common_name(cluster, component), cfg, now, plan)
        plan.secrets.append(_secret(n[component], namespace, cluster, data))
        plan.versions[component] = _version({**data, CA_CERT_KEY: ca.cert_pem})
    return plan


def expiring(cluster: str, spec: ClusterSpec, existing: Mapping[str, Mapping[str, bytes]],
             now: datetime.datetime | None = None) -> list[str]:
    """What the next reconcile would renew because of time alone (``Secret/key``): operator-made
    CAs and process certificates with fewer than ``renewalDays`` left. The operator's status
    timer asks this (cheap: no keys made), so a cluster nobody edits is still renewed in time."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    n, out = secret_names(cluster), []
    settings = {"cluster": spec.cluster_ca, "clients": spec.clients_ca}
    for which in ("cluster", "clients"):
        cert_pem, key_pem = existing.get(n[f"{which}_ca_cert"], {}).get(CA_CERT_KEY), \
            existing.get(n[f"{which}_ca"], {}).get(CA_KEY_KEY)
        if not cert_pem or not key_pem:
            return []   # not made yet: the reconcile that makes them is under way
        ca = CertificateAuthority.from_pem(cert_pem, key_pem)
        if settings[which].generate and ca.cert.not_valid_after_utc - now < settings[which].renewal:
            out.append(f"{n[which + '_ca_cert']}/{CA_CERT_KEY}")
        if which == "cluster":   # an operator-made CA is renewed first: it caps nothing
            cap = None if settings[which].generate else ca.cert.not_valid_after_utc
            for component in COMPONENTS:
                for key, data in sorted(existing.get(n[component], {}).items()):
                    if key.endswith(".crt") and key != BUNDLE_KEY and _due(not_after(data), cap, settings[which], now):
                        out.append(f"{n[component]}/{key}")
    return out


def expiry_times(existing: Mapping[str, Mapping[str, bytes]]) -> dict[tuple[str, str], float]:
    """(Secret, key) -> when that certificate expires (its notAfter, Unix time): the CAs' and
    the processes' certificates in ``existing`` (``read_existing``), for the expiry metric
    (``metrics.CERTIFICATES``) and its alert. ``ValueError`` for a key that is no certificate."""
    return {(name, key): not_after(pem).timestamp() for name, data in sorted(existing.items())
            for key, pem in sorted(data.items()) if key.endswith(".crt") and key != BUNDLE_KEY}


# -- with the API server ---------------------------------------------------------------------

def read_existing(kube: Any, cluster: str, namespace: str) -> dict[str, dict[str, bytes]]:
    """The cluster's certificate Secrets that exist, decoded."""
    out = {}
    for name in secret_names(cluster).values():
        secret = kube.get("v1", "Secret", namespace, name)
        if secret is not None:
            out[name] = decode(secret)
    return out


def read_ca(kube: Any, cluster: str, namespace: str, which: str = "clients") -> CertificateAuthority | None:
    """The cluster's ``which`` (clients, cluster) CA with its key, e.g. to sign a user's
    certificate; None while the operator has not made it (or a user-supplied one is missing)."""
    n = secret_names(cluster)
    cert = decode(kube.get("v1", "Secret", namespace, n[f"{which}_ca_cert"])).get(CA_CERT_KEY)
    key = decode(kube.get("v1", "Secret", namespace, n[f"{which}_ca"])).get(CA_KEY_KEY)
    return CertificateAuthority.from_pem(cert, key) if cert and key else None


def user_certificate(kube: Any, cluster_body: Mapping[str, Any],
                     user_secret: str) -> Callable[[str], dict[str, str]] | None:
    """For an OdradekUser with ``tls`` authentication: ``cn`` -> ``user.crt``, ``user.key`` and
    ``ca.crt`` (PEM text) from the cluster's clients CA, subject ``CN=<cn>`` (principal
    ``User:CN=<cn>``). The certificate already in the user's Secret is kept while it can stay
    (same CN, signed by the CA's key, more than ``clientsCa.renewalDays`` left). None while the
    clients CA does not exist (the cluster not reconciled yet, or a user-supplied CA missing)."""
    meta, spec = cluster_body["metadata"], cluster_body.get("spec") or {}
    ca = read_ca(kube, meta["name"], meta["namespace"], "clients")
    if ca is None:
        return None
    settings = ca_settings(spec, "clientsCa")
    existing = decode(kube.get("v1", "Secret", meta["namespace"], user_secret))

    def issue(cn: str) -> dict[str, str]:
        now = datetime.datetime.now(datetime.timezone.utc)
        current = {"user.crt": existing.get("user.crt"), "user.key": existing.get("user.key")}
        cert = _keep({k: v for k, v in current.items() if v}, "user", ca, [], cn, settings, now)
        if cert is None:
            cert = ca.issue_certificate(common_name=cn, validity=settings.validity)
        return {"user.crt": cert.cert_pem.decode(), "user.key": cert.key_pem.decode(), "ca.crt": ca.cert_pem.decode()}
    return issue
