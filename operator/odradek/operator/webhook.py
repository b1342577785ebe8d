"""The operator's admission webhook server: its serving certificate and where the API server
learns to trust it (docs/kubernetes.md, "Evictions and node drains").

The chart registers a ValidatingWebhookConfiguration (``webhook.enabled``) whose client config
names the operator's webhook Service, without a CA bundle; the operator keeps its own small CA
and serving certificate in a Secret (``ODRADEK_OPERATOR_WEBHOOK_SECRET``: created on first start,
shared by every operator replica, reissued at start-up when its names change or it has less than
``RENEW_BEFORE`` left) and writes the CA into each webhook of that configuration
(``publish_ca``, a strategic merge patch by webhook name). The tests on a local API server
register a ``url`` client config on 127.0.0.1 instead; the rest is the same.

kopf serves the admission reviews (``kopf.WebhookServer`` from ``server``), on the paths of the
handler ids (``evictions``); the handlers are in ``evictions``.
"""

from __future__ import annotations

import base64
import datetime
import tempfile
from pathlib import Path
from typing import Any, Iterable

import kopf

from odradek.certs import CertificateAuthority, alt_names, not_after

VALIDITY = datetime.timedelta(days=365)
RENEW_BEFORE = datetime.timedelta(days=30)
CONFIGURATION_API = "admissionregistration.k8s.io/v1"


def _fresh(data: dict[str, bytes], hosts: list[str]) -> bool:
    if not {"ca.crt", "tls.crt", "tls.key"} <= data.keys():
        return False
    left = not_after(data["tls.crt"]) - datetime.datetime.now(datetime.timezone.utc)
    return sorted(alt_names(data["tls.crt"])) == sorted(hosts) and left > RENEW_BEFORE


def issue(hosts: list[str]) -> dict[str, bytes]:
    """A new CA and a serving certificate for ``hosts`` (DNS names or IP addresses)."""
    ca = CertificateAuthority.create("odradek-operator-webhook-ca", "odradek", VALIDITY + RENEW_BEFORE)
    cert = ca.issue_certificate(*hosts, organization="odradek", validity=VALIDITY)
    return {"ca.crt": ca.cert_pem, "tls.crt": cert.cert_pem, "tls.key": cert.key_pem}


def serving_certificate(kube: Any, namespace: str, name: str, hosts: Iterable[str]) -> dict[str, bytes]:
    """``ca.crt``, ``tls.crt``, ``tls.key`` from the Secret, issued (and stored) when missing or due.
    Two replicas starting together: the loser of the create reads the winner's."""
    hosts = list(hosts)
    secret = kube.get("v1", "Secret", namespace, name)
    data = {k: base64.b64decode(v) for k, v in ((secret or {}).get("data") or {}).items()}
    if _fresh(data, hosts):
        return data
    data = issue(hosts)
    body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "odradek-operator"}},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}
    try:
        if secret is None:
            kube.request("POST", f"/api/v1/namespaces/{namespace}/secrets", body)
        else:   # resourceVersion: a replica that renewed it first wins, this one reads it
            body["metadata"]["resourceVersion"] = secret["metadata"]["resourceVersion"]
            kube.merge_patch("v1", "Secret", namespace, name, body)
    except kube.ApiException as e:
        if e.status != 409:
            raise
        return serving_certificate(kube, namespace, name, hosts)
    return data


def publish_ca(kube: Any, configuration: str, ca_pem: bytes) -> int:
    """Write ``ca_pem`` into every webhook of the ValidatingWebhookConfiguration; how many (0:
    the configuration does not exist, e.g. ``webhook.enabled`` off)."""
    path = f"/apis/{CONFIGURATION_API}/validatingwebhookconfigurations/{configuration}"
    try:
        current = kube.request("GET", path)
    except kube.ApiException as e:
        if e.status == 404:
            return 0
        raise
    bundle = base64.b64encode(ca_pem).decode()
    hooks = [{"name": w["name"], "clientConfig": {"caBundle": bundle}} for w in current.get("webhooks") or []]
    if hooks:
        kube.request("PATCH", path, {"webhooks": hooks}, content_type="application/strategic-merge-patch+json")
    return len(hooks)


def server(listen: str, data: dict[str, bytes], hosts: list[str]) -> Any:
    """A ``kopf.WebhookServer`` on ``listen`` (``host:port``) with the serving certificate
    (written to a private temporary directory: kopf's server loads files)."""
    directory = Path(tempfile.mkdtemp(prefix="odradek-webhook-"))
    for key in ("tls.crt", "tls.key"):
        (directory / key).touch(mode=0o600)
        (directory / key).write_bytes(data[key])
    addr, _, port = listen.rpartition(":")
    return kopf.WebhookServer(addr=addr or "0.0.0.0", port=int(port), host=hosts[0],
                              certfile=str(directory / "tls.crt"), pkeyfile=str(directory / "tls.key"))
