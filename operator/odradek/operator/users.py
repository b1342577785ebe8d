"""OdradekUser: a Kafka user of an OdradekCluster and the Secret its clients log in with.

Pure part: the spec in Kafka's terms (``user_request``: the principal, each ACL operation as one
``UserAcl``, the quota keys), the spec checks a schema cannot make (``SpecError``), the
Secret's manifest (``build_secret``). I/O part (``sync_user``, ``remove_user``): the password
(from ``password.valueFrom.secretKeyRef``, else the user's own Secret, else generated), then the
active controller's users route (``PUT /internal/v1/users/{name}``, which checks the whole
request before writing anything: a bad ACL changes nothing), then the Secret (owned by the
OdradekUser, so it goes with it). Deletion removes the credential, the ACLs and the quotas
(finalizer), or releases at once when the cluster or namespace is gone, as for topics.

The Secret is the user's own or nothing is written: an OdradekUser named like a Secret any
OdradekCluster of the namespace makes (``principals.cluster_secret_names``, and any
``<cluster>-...-ca``, ``-ca-cert``, ``-certs``, ``-digest``), or like an existing Secret that is
not controlled by this very OdradekUser (``kube.foreign_secret``), is refused with reason
``SecretConflict`` before its password is read or the controller is called; so is a password
``secretKeyRef`` to a Secret the operator makes (``password_source_problem``: a cluster's key or
digest, another user's password would be copied into this user's Secret). Deletion removes
only the identities its status records (what it made), and the Secret goes by garbage collection
only when its owner reference is this user's.

Users with ``tls`` authentication get a certificate (``CN=<name>``) signed by the cluster's
clients CA; their principal is ``User:CN=<name>`` (Kafka's DEFAULT principal mapping).
"""

from __future__ import annotations

import base64
import logging
import secrets
import string
from typing import Any, Callable, Mapping

from odradek.cluster.control_plane_users import ScramPassword, UserAcl, UserSpec
from odradek.config.quotas import (CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE,
                                   REQUEST_PERCENTAGE)
from odradek.operator import admin, builders, principals
from odradek.operator.kube import MANAGED_BY, Kube, SecretConflict, foreign_secret
from odradek.operator.settings import OperatorSettings
from odradek.operator.validation import SpecError

SCRAM, TLS = "scram-sha-512", "tls"
MECHANISM = "SCRAM-SHA-512"
PASSWORD_LENGTH = 32  # Strimzi's default length of generated passwords
# ``spec.quotas`` field -> Kafka's user quota key (the registry's names: what the brokers enforce).
# Values are checked by the CRD (minimum 0) and the controller, which accept 0 as Kafka does.
QUOTAS = {"producerByteRate": PRODUCER_BYTE_RATE, "consumerByteRate": CONSUMER_BYTE_RATE,
          "requestPercentage": REQUEST_PERCENTAGE, "controllerMutationRate": CONTROLLER_MUTATION_RATE}
CLUSTER_RESOURCE = "kafka-cluster"
CLUSTER = ("odradek.dev/v1alpha1", "OdradekCluster")
# The name endings of Secrets clusters make (and may make in later versions): never a user's.
CLUSTER_SECRET_SUFFIXES = ("-ca", "-ca-cert", "-certs", "-digest")


def auth_type(spec: Mapping[str, Any]) -> str | None:
    return (spec.get("authentication") or {}).get("type")


def identity(name: str, spec: Mapping[str, Any]) -> tuple[str, str]:
    """(Kafka user name, principal): a certificate user is named by its subject."""
    username = f"CN={name}" if auth_type(spec) == TLS else name
    return username, f"User:{username}"


def _acls(spec: Mapping[str, Any], principal: str) -> tuple[UserAcl, ...]:
    authorization = spec.get("authorization") or {}
    out = []
    for i, acl in enumerate(authorization.get("acls") or []):
        where = f"authorization.acls[{i}]"
        resource = acl.get("resource") or {}
        rtype = str(resource.get("type", ""))
        name = resource.get("name")
        if rtype.lower() == "cluster":
            name = name or CLUSTER_RESOURCE
        if not name:
            raise SpecError(f"{where}.resource.name is required for a {rtype or 'resource'}")
        operations = acl.get("operations") or []
        if not operations:
            raise SpecError(f"{where}.operations: name at least one operation")
        pattern = "PREFIXED" if resource.get("patternType") == "prefix" else "LITERAL"
        for op in operations:
            out.append(UserAcl(rtype, str(name), pattern, str(op), str(acl.get("host") or "*"),
                               str(acl.get("type") or "allow").upper()))
    return tuple(out)


def validate_user(spec: Mapping[str, Any]) -> None:
    """What the schema cannot say; ACL names are checked by the controller (the ACL model lives
    with the brokers' authorizer), still before anything is written."""
    authentication = spec.get("authentication") or {}
    if authentication.get("password") is not None and authentication.get("type") != SCRAM:
        raise SpecError("authentication.password applies only to type scram-sha-512")
    authorization = spec.get("authorization")
    if authorization is not None and authorization.get("type") != "simple":
        raise SpecError(f"authorization.type {authorization.get('type')!r} is not supported (simple)")


def user_request(name: str, spec: Mapping[str, Any], password: str | None) -> UserSpec:
    """What the controller makes of this user (``password`` for SCRAM users)."""
    _, principal = identity(name, spec)
    quotas = {QUOTAS[k]: v for k, v in (spec.get("quotas") or {}).items() if k in QUOTAS and v is not None}
    scram = ScramPassword(password, MECHANISM) if password is not None else None
    return UserSpec(principal, scram, _acls(spec, principal), quotas)


def jaas_config(name: str, password: str) -> str:
    """Kafka's client ``sasl.jaas.config`` line for this user (JAAS quoting of ``\\`` and ``"``)."""
    def quoted(s: str) -> str:
        return s.replace("\\", "\\\\").replace('"', '\\"')
    return (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{quoted(name)}" '
            f'password="{quoted(password)}";')


def generate_password() -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(PASSWORD_LENGTH))


def build_secret(name: str, namespace: str, cluster: str, data: Mapping[str, str],
                 labels: Mapping[str, str] | None = None) -> dict:
    """The user's Secret (named after the user; the caller adopts it); ``labels`` for another
    owner's credentials (an OdradekConnect's REST login)."""
    if labels is None:
        labels = {**builders.labels(cluster, "user"), "odradek.dev/user": name}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in sorted(data.items())}}


def secret_value(secret: Mapping[str, Any] | None, key: str) -> str | None:
    raw = ((secret or {}).get("data") or {}).get(key)
    return None if raw is None else base64.b64decode(raw).decode()


def reserved_by(name: str, clusters: list[str]) -> str | None:
    """The cluster (of ``clusters``, those of the namespace) whose Secret ``name`` is, or may be."""
    for cluster in clusters:
        if name in principals.cluster_secret_names(cluster) or (
                name.startswith(f"{cluster}-") and name.endswith(CLUSTER_SECRET_SUFFIXES)):
            return cluster
    return None


def secret_conflict(body: Mapping[str, Any], cluster: str, clusters: list[str],
                    existing: Mapping[str, Any] | None) -> str | None:
    """Why the OdradekUser ``body`` may not have its Secret (None: it may)."""
    meta = body["metadata"]
    name = meta["name"]
    owner = reserved_by(name, clusters)
    if owner is not None:
        return (f"OdradekUser {name} is named like a Secret of OdradekCluster {owner} (its Secret would be "
                f"{meta['namespace']}/{name}): choose another name")
    wanted = build_secret(name, meta["namespace"], cluster, {})
    wanted["metadata"]["ownerReferences"] = [{"apiVersion": body.get("apiVersion"), "kind": "OdradekUser",
                                              "name": name, "uid": meta.get("uid"), "controller": True}]
    return foreign_secret(existing, wanted)


def describe(spec: Mapping[str, Any], fields: Mapping[str, Any]) -> str:
    """The Ready condition's message."""
    credential = {SCRAM: "SCRAM-SHA-512 credential", TLS: "certificate"}.get(auth_type(spec), "no credential")
    acls = sum(len(a.get("operations") or []) for a in (spec.get("authorization") or {}).get("acls") or [])
    quotas = len(spec.get("quotas") or {})
    return f"{fields['principal']}: {credential}, {acls} ACLs, {quotas} quotas; Secret {fields['secret']}"


# -- I/O ------------------------------------------------------------------------------------

class Waiting(Exception):
    """Something the user needs does not exist yet (the password's Secret)."""


def password_source_problem(name: str, secret: Mapping[str, Any] | None, clusters: list[str]) -> str | None:
    """Why ``password.valueFrom.secretKeyRef`` may not name Secret ``name``: one the operator
    makes (a cluster's keys or digest, another user's password) would be copied into this user's
    Secret, for whoever reads it."""
    labels = ((secret or {}).get("metadata") or {}).get("labels") or {}
    if reserved_by(name, clusters) is None and labels.get(MANAGED_BY[0]) != MANAGED_BY[1]:
        return None
    return (f"authentication.password: Secret {name} is the operator's (a cluster's or a user's); "
            "the password must come from a Secret of your own")


def _password(kube: Kube, namespace: str, spec: Mapping[str, Any], own: Mapping[str, Any] | None,
              clusters: list[str]) -> str:
    ref = (((spec.get("authentication") or {}).get("password") or {}).get("valueFrom") or {}).get("secretKeyRef")
    if ref:
        secret = kube.get("v1", "Secret", namespace, ref["name"])
        refusal = password_source_problem(ref["name"], secret, clusters)
        if refusal is not None:
            raise SecretConflict(refusal)
        value = secret_value(secret, ref["key"])
        if not value:
            raise Waiting(f"authentication.password: Secret {namespace}/{ref['name']} "
                          f"{'has no key ' + repr(ref['key']) if secret else 'does not exist'}")
        return value
    return secret_value(own, "password") or generate_password()


def sync_user(kube: Kube, client: admin.ControllerClient, body: Mapping[str, Any], cluster: str,
              adopt: Callable[[list[dict]], None], logger: logging.Logger,
              certificate: Callable[[str], Mapping[str, str]] | None = None) -> dict[str, Any]:
    """Make the cluster's user and the Secret match the OdradekUser; returns the status fields.
    ``certificate(cn)``: ``user.crt``/``user.key``/``ca.crt`` signed by the clients CA (tls users)."""
    meta, spec, status = body["metadata"], body.get("spec") or {}, body.get("status") or {}
    name, namespace = meta["name"], meta["namespace"]
    validate_user(spec)
    own = kube.get("v1", "Secret", namespace, name)
    clusters = [c["metadata"]["name"] for c in kube.list(*CLUSTER, namespace)]
    refusal = secret_conflict(body, cluster, clusters, own)
    if refusal is not None:   # before anything is read from it or written anywhere
        raise SecretConflict(refusal)
    username, principal = identity(name, spec)
    if auth_type(spec) == TLS and certificate is None:   # the cluster's reconcile makes it
        raise Waiting(f"authentication.type tls needs the clients CA of OdradekCluster {cluster} "
                      f"(Secrets {cluster}-clients-ca-cert, {cluster}-clients-ca), which does not exist yet")
    password = _password(kube, namespace, spec, own, clusters) if auth_type(spec) == SCRAM else None
    request = user_request(name, spec, password)
    old = status.get("username")
    if old and old != username:  # tls <-> scram: the old identity goes first
        client.delete_user(old, status.get("principal"))
    state = client.put_user(username, request)
    if state.get("changed"):
        logger.info("user %s: wrote %s", username, ", ".join(state["changed"]))
    if password is not None:
        data = {"password": password, "sasl.jaas.config": jaas_config(username, password)}
    elif auth_type(spec) == TLS:
        data = dict(certificate(name))   # the subject CN=<name>, whose principal is User:CN=<name>
    else:
        data = {}
    secret = build_secret(name, namespace, cluster, data)
    adopt([secret])
    kube.apply(secret)
    return {"cluster": cluster, "username": username, "principal": principal, "secret": name,
            "observedGeneration": meta.get("generation")}


def remove_user(client: admin.ControllerClient, name: str, status: Mapping[str, Any]) -> str:
    """Remove the user's credential, quotas and ACLs: the identity its status records, the one
    it made (a change of kind replaces it before the status does); nothing for a user never made
    (a refused one): a Kafka user of that name made otherwise is not its to remove."""
    username = status.get("username")
    if not username:
        return f"user {name} was never made in the cluster: nothing to remove"
    client.delete_user(username, status.get("principal") or f"User:{username}")
    return f"user {username} removed (credential, ACLs, quotas)"
