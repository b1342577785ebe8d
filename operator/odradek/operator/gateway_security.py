"""The HTTP gateway on Kubernetes: authenticated always, over HTTPS, at its Service's address
(docs/security.md, "Operator hardening").

- **Authentication always.** The gateway reads its bearer tokens from ``gateway.authSecret``
  (key ``credentials``, the format of ``odradek.gateway.auth``) or, without one, from
  ``<c>-gateway-tokens``, which the operator generates (``tokens_secret``: each token kept
  across reconciles; the user reads it from the Secret, as Strimzi users read generated
  passwords). ``ODRADEK_GATEWAY_REQUIRE_AUTH=true`` makes the gateway refuse to start without tokens.
- **Never a super user; a Kafka principal per mapped user.** ``gateway.users`` names
  OdradekUsers of the cluster with ``tls`` authentication: each user's Secret is mounted at
  ``/etc/odradek/gateway-users/<user>`` and the generated tokens file has one token per user
  (named after it) mapped to its certificate, so the gateway logs in on the replication
  listener (9091, mutual TLS, whose truststore holds the clients CA) as ``User:CN=<user>`` and
  the brokers' ACLs decide. A name that cannot be mapped (no such OdradekUser, another
  cluster's, SCRAM, not Ready yet: ``user_problems``) is left out and named by the cluster's
  ``GatewayUsersRefused`` condition until it can be; while one is only not Ready yet (reason
  ``GatewayUserNotReady``: ``pending_users``) the cluster is not Ready either, its clients would
  get 401s; a permanent refusal (reason ``GatewayUserRefused``) does not hold the others.
  Without ``gateway.users`` the file holds one ``admin`` token acting as the gateway's own
  certificate principal, which is no super user: it has every right only on a cluster without
  ``authorization``.
- **HTTPS** with its certificate from the cluster CA (``certs``: ``<c>-gateway-certs``, whose
  names are its Service's DNS names and, for a NodePort Service, the addresses of the nodes
  its pods ran on: ``certificate_names``); the probes use HTTPS (the kubelet does not verify).
- **Its Service's URL** in consumer instances' ``base_uri`` (``https://<c>-gateway.<ns>.svc:8000``),
  not a pod's address; the Service keeps a client on one replica (``sessionAffinity: ClientIP``),
  where its consumer instances live.
- **Its pod's own URL for the schema registry** (``--schema-registry-url`` as its env var, ``registry_url_word``):
  the replicas forward registry writes to the primary at the URL it registered, which must lead
  to that pod, not through the Service to any replica. The name ``<pod-ip-dashed>.<c>-gateway-pods.<ns>.svc``
  comes from a headless Service (its certificate names ``*.<c>-gateway-pods.<ns>.svc``), made by
  the shell from ``$POD_IP`` at start (``builders`` runs the gateway through ``sh -c`` for it),
  as the controller advertises itself.

Pure, but for ``tokens_secret``'s fresh token.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import secrets
from typing import Any, Iterable, Mapping, Sequence

from odradek.certs import alt_names
from odradek.operator import builders, certs
from odradek.operator.spec import ClusterSpec

AUTH_DIR = "/etc/odradek/gateway-auth"
USERS_DIR = "/etc/odradek/gateway-users"   # <user>/user.crt, user.key: an OdradekUser's Secret
TOKENS_KEY = "credentials"
REQUIRE_AUTH_ENV = "ODRADEK_GATEWAY_REQUIRE_AUTH"


def tokens_secret_name(cluster: str) -> str:
    return f"{cluster}-gateway-tokens"


def auth_secret(cluster: str, spec: ClusterSpec) -> str:
    """The Secret the gateway's tokens come from."""
    return spec.gateway.auth_secret or tokens_secret_name(cluster)


def _user_problem(cluster: str, name: str, body: Mapping[str, Any] | None) -> tuple[str, bool] | None:
    """Why ``gateway.users`` name ``name`` cannot be mapped, and whether that passes by itself
    (True: the user exists as it should and is only not Ready yet), or None."""
    spec, status = (body or {}).get("spec") or {}, (body or {}).get("status") or {}
    owner = spec.get("cluster") or (((body or {}).get("metadata") or {}).get("labels") or {}).get(
        builders.CLUSTER_LABEL)
    if body is None:
        return f"OdradekUser {name} does not exist", False
    if owner != cluster:
        return f"OdradekUser {name} belongs to cluster {owner!r}, not {cluster}", False
    if (spec.get("authentication") or {}).get("type") != "tls":
        return (f"OdradekUser {name} has no tls authentication: the gateway logs in on the replication "
                "listener (9091, mutual TLS) with the user's certificate, so map users of type tls"), False
    if status.get("secret") != name:
        return f"OdradekUser {name} is not Ready yet (its certificate Secret is not made)", True
    return None


def user_problems(cluster: str, users: Sequence[str], found: Mapping[str, Mapping[str, Any] | None]) -> dict[str, str]:
    """``gateway.users`` names that cannot be mapped, and why (``found``: each name's
    OdradekUser, None when absent). Only ``tls`` users: the gateway logs in on the replication
    listener, which takes a client certificate and no SASL."""
    problems = {name: _user_problem(cluster, name, found.get(name)) for name in users}
    return {name: p[0] for name, p in problems.items() if p is not None}


def pending_users(cluster: str, users: Sequence[str], found: Mapping[str, Mapping[str, Any] | None]) -> tuple[str, ...]:
    """The ``gateway.users`` being taken in: refused only until their OdradekUser is Ready (the
    cluster is not Ready meanwhile; a permanent refusal does not hold it)."""
    return tuple(n for n in users if (p := _user_problem(cluster, n, found.get(n))) is not None and p[1])


def refusal(problems: Mapping[str, str]) -> str | None:
    """The ``GatewayUsersRefused`` condition's message (None: every mapping works)."""
    if not problems:
        return None
    return "gateway.users left out of the gateway's tokens: " + "; ".join(problems[n] for n in sorted(problems))


def _token_entry(user: str, token: str) -> dict:
    if user == "admin":
        return {"token": token, "name": "admin", "admin": True, "topics": {"*": "rw"}}
    return {"token": token, "name": user,
            "kafka_ssl_certificate_location": f"{USERS_DIR}/{user}/user.crt",
            "kafka_ssl_key_location": f"{USERS_DIR}/{user}/user.key"}


def tokens_secret(cluster: str, namespace: str, spec: ClusterSpec, existing: Mapping[str, Any] | None,
                  users: Sequence[str] = ()) -> list[dict]:
    """``<c>-gateway-tokens`` when a gateway runs without ``authSecret``: one token per mapped
    user of ``users`` (those ``user_problems`` accepts), or one admin token without
    ``gateway.users``; a name's existing token is kept. Empty otherwise."""
    if spec.gateway.replicas <= 0 or spec.gateway.auth_secret:
        return []
    current = ((existing or {}).get("data") or {}).get(TOKENS_KEY)
    before = {t.get("name"): t["token"] for t in json.loads(base64.b64decode(current))["tokens"]} if current else {}
    names = sorted(users) if spec.gateway.users else ["admin"]
    tokens = {"tokens": [_token_entry(n, before.get(n) or secrets.token_urlsafe(32)) for n in names]}
    return [{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
             "metadata": {"name": tokens_secret_name(cluster), "namespace": namespace,
                          "labels": builders.labels(cluster, "gateway")},
             "data": {TOKENS_KEY: base64.b64encode(json.dumps(tokens, sort_keys=True).encode()).decode()}}]


def args(cluster: str, namespace: str) -> list[str]:
    """The gateway's HTTPS, advertised URL and tokens options."""
    own = f"{certs.CERTS_DIR}/gateway/gateway"
    return ["--ssl-certfile", f"{own}.crt", "--ssl-keyfile", f"{own}.key",
            "--advertised-url", builders.gateway_address(cluster, namespace), "--auth-file", f"{AUTH_DIR}/{TOKENS_KEY}"]


def registry_url_word(cluster: str) -> str:
    """``--schema-registry-url``'s value as a shell word: this pod's DNS name through the headless
    ``<c>-gateway-pods`` Service, from ``$POD_IP`` (dots and colons to dashes) and ``$POD_NAMESPACE``."""
    dashed = '$(printf %s "$POD_IP" | tr .: --)'
    return f"https://{dashed}.{builders.names(cluster)['gateway_pods']}.$POD_NAMESPACE.svc:{builders.GATEWAY_PORT}"


def secure_pod(cluster: str, spec: ClusterSpec, pod: dict, container: dict, users: Sequence[str] = ()) -> None:
    """Mount the tokens and the mapped ``users``' Secrets (directories, not subPath: the gateway
    re-reads a rotated Secret, a renewed certificate) and require tokens; HTTPS probes."""
    container["env"] = [*container.get("env", []), {"name": REQUIRE_AUTH_ENV, "value": "true"}]
    mounts = [{"name": "auth", "mountPath": AUTH_DIR, "readOnly": True}]
    volumes = [{"name": "auth", "secret": {"secretName": auth_secret(cluster, spec)}}]
    for i, user in enumerate(sorted(users)):
        mounts.append({"name": f"user-{i}", "mountPath": f"{USERS_DIR}/{user}", "readOnly": True})
        volumes.append({"name": f"user-{i}", "secret": {"secretName": user}})
    container["volumeMounts"] = [*container.get("volumeMounts", []), *mounts]
    pod["volumes"] = [*pod.get("volumes", []), *volumes]
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
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
