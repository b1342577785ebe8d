"""The HTTP gateway on Kubernetes: authenticated always, over HTTPS, at its Service's address
(docs/security.md, "Operator hardening").

- **Authentication always.** The gateway reads its bearer tokens from ``gateway.authSecret``
  (key ``credentials``, the format of ``odradek.gateway.auth``) or, without one, from
  ``<c>-gateway-tokens``, which the operator generates once (one ``admin`` token, kept across
  reconciles: the user reads it from the Secret, as Strimzi users read generated passwords).
  ``ODRADEK_GATEWAY_REQUIRE_AUTH=true`` makes the gateway refuse to start without tokens.
- **HTTPS** with its certificate from the cluster CA (``certs``: ``<c>-gateway-certs``, whose
  names are its Service's DNS names and, for a NodePort Service, the addresses of the nodes
  its pods ran on: ``certificate_names``); the probes use HTTPS (the kubelet does not verify).
- **Its Service's URL** in consumer instances' ``base_uri`` (``https://<c>-gateway.<ns>.svc:8000``),
  not a pod's address; the Service keeps a client on one replica (``sessionAffinity: ClientIP``),
  where its consumer instances live.

Pure, but for ``tokens_secret``'s fresh token.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import secrets
from typing import Any, Iterable, Mapping

from odradek.certs import alt_names
from odradek.operator import builders, certs
from odradek.operator.spec import ClusterSpec

AUTH_DIR = "/etc/odradek/gateway-auth"
TOKENS_KEY = "credentials"
REQUIRE_AUTH_ENV = "ODRADEK_GATEWAY_REQUIRE_AUTH"


def tokens_secret_name(cluster: str) -> str:
    return f"{cluster}-gateway-tokens"


def auth_secret(cluster: str, spec: ClusterSpec) -> str:
    """The Secret the gateway's tokens come from."""
    return spec.gateway.auth_secret or tokens_secret_name(cluster)


def tokens_secret(cluster: str, namespace: str, spec: ClusterSpec, existing: Mapping[str, Any] | None) -> list[dict]:
    """``<c>-gateway-tokens`` when a gateway runs without ``authSecret``: its existing tokens if
    any, else one fresh admin token. Empty otherwise."""
    if spec.gateway.replicas <= 0 or spec.gateway.auth_secret:
        return []
    current = ((existing or {}).get("data") or {}).get(TOKENS_KEY)
    if not current:
        tokens = {"tokens": [{"token": secrets.token_urlsafe(32), "name": "admin", "admin": True, "topics": {"*": "rw"}}]}
        current = base64.b64encode(json.dumps(tokens).encode()).decode()
    return [{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
             "metadata": {"name": tokens_secret_name(cluster), "namespace": namespace,
                          "labels": builders.labels(cluster, "gateway")},
             "data": {TOKENS_KEY: current}}]


def args(cluster: str, namespace: str) -> list[str]:
    """The gateway's HTTPS, advertised URL and tokens options."""
    own = f"{certs.CERTS_DIR}/gateway/gateway"
    return ["--ssl-certfile", f"{own}.crt", "--ssl-keyfile", f"{own}.key",
            "--advertised-url", builders.gateway_address(cluster, namespace), "--auth-file", f"{AUTH_DIR}/{TOKENS_KEY}"]


def secure_pod(cluster: str, spec: ClusterSpec, pod: dict, container: dict) -> None:
    """Mount the tokens (a directory, not subPath: the gateway re-reads a rotated Secret) and
    require them; HTTPS probes."""
    container["env"] = [*container.get("env", []), {"name": REQUIRE_AUTH_ENV, "value": "true"}]
    container["volumeMounts"] = [*container.get("volumeMounts", []),
                                 {"name": "auth", "mountPath": AUTH_DIR, "readOnly": True}]
    pod["volumes"] = [*pod.get("volumes", []), {"name": "auth", "secret": {"secretName": auth_secret(cluster, spec)}}]
    for probe in ("readinessProbe", "livenessProbe"):
        container[probe]["httpGet"]["scheme"] = "HTTPS"


def certificate_names(spec: ClusterSpec, host_ips: Iterable[str], existing: Mapping[str, bytes]) -> list[str]:
    """The addresses the gateway's certificate names besides its Service's DNS names: for a
    NodePort Service the nodes its pods run on, with those it named before (a pod moving
    adds its node; dropping the old one would reissue and restart it at every move)."""
    if spec.gateway.replicas <= 0 or spec.gateway.service_type != "NodePort":
        return []
    before = existing.get("gateway.crt")
    named = [n for n in (alt_names(before) if before else []) if _is_ip(n)]
    return sorted(set(named) | set(host_ips))


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False
