"""The brokers' tiered storage (KIP-405) from an OdradekCluster's ``spec.tieredStorage``: the broker
keys it renders, the credentials Secret the brokers mount, and what of it a rolling restart tracks.

The broker reads the object store's settings from its static keys (``odradek.config.tiered``:
Kafka's switch and task interval, the store under ``rsm.config.`` with Aiven's S3 plugin's names)
and its credentials from an AWS shared-credentials file named by
``rsm.config.storage.aws.credentials.file`` (never a key's value: DescribeConfigs shows those).
A user's Secret holds an access key id and a secret access key under two keys of its own
(``credentialsSecret``); no volume projection turns two keys into that INI file, so the operator
writes it: ``<cluster>-tiered-storage`` (key ``credentials``, owned by the cluster, applied with the
other Secrets before the brokers' StatefulSet), mounted read-only at ``CREDENTIALS_DIR``.

A restart of every broker picks up a change: ``revisions.config_hash`` takes the rendered keys and
``credentials_version`` (a digest of the file), so a key rotated in the user's Secret rolls the
brokers: Secrets are not watched, so the status timer compares the two Secrets (``rotated``) and
sets ``ROTATION_ANNOTATION`` on the cluster, whose change runs the reconcile (as a due
certificate renewal does). The user's Secret missing, or lacking a key, is ``CredentialsMissing``:
the cluster's status says which, and the operator looks again.

Pure: the Secret is read by ``reconcile.observe_cluster``; the plan and builders call these.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any, Mapping

from odradek.operator.spec import ClusterSpec, CredentialsSecret, SpecError, TieredStorage

SECRET_KEY = "credentials"
CREDENTIALS_DIR = "/etc/odradek/tiered-storage"
CREDENTIALS_FILE = f"{CREDENTIALS_DIR}/{SECRET_KEY}"
VOLUME = "tiered-storage"
ROTATION_ANNOTATION = "odradek.dev/tiered-storage-rotation"   # set on the cluster: reconcile to take a new key
COMPONENT = "tiered-storage"     # the Secret's component label (its own field manager: kube.secret_field_manager)

# The broker keys spec.tieredStorage sets (odradek.config.tiered); brokers.config may not set them besides.
SWITCH, INTERVAL = "remote.log.storage.system.enable", "remote.log.manager.task.interval.ms"
ENDPOINT, BUCKET, REGION = ("rsm.config.storage.s3.endpoint.url", "rsm.config.storage.s3.bucket.name",
                            "rsm.config.storage.s3.region")
PREFIX, CREDENTIALS = "rsm.config.storage.key.prefix", "rsm.config.storage.aws.credentials.file"
KEYS = (SWITCH, INTERVAL, ENDPOINT, BUCKET, REGION, PREFIX, CREDENTIALS)


class CredentialsMissing(SpecError):
    """The credentials Secret is absent or lacks a key: nothing is applied, the reconcile retries
    (the Secret may be created after the cluster)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "TieredStorageCredentialsMissing")


def active(spec: ClusterSpec) -> TieredStorage | None:
    """The tiered storage the brokers run with (None: absent or ``enabled: false``)."""
    ts = spec.tiered_storage
    return ts if ts is not None and ts.enabled else None


def credentials_ref(spec: ClusterSpec) -> CredentialsSecret | None:
    """The user's credentials Secret of the active tiered storage (None: off, or boto3's chain)."""
    ts = active(spec)
    return ts.credentials_secret if ts is not None else None


def secret_name(cluster: str) -> str:
    return f"{cluster}-tiered-storage"


def broker_settings(ts: TieredStorage) -> dict[str, str]:
    """The broker keys, as ``--config KEY=VALUE`` passes them (the endpoint, prefix and credentials
    file only when given: the broker's defaults are AWS S3 and boto3's chain)."""
    out = {SWITCH: "true", INTERVAL: str(ts.task_interval_ms), BUCKET: ts.bucket, REGION: ts.region}
    if ts.endpoint:
        out[ENDPOINT] = ts.endpoint
    if ts.prefix:
        out[PREFIX] = ts.prefix
    if ts.credentials_secret is not None:
        out[CREDENTIALS] = CREDENTIALS_FILE
    return out


def credentials_file(access_key_id: str, secret_access_key: str) -> str:
    """The AWS shared-credentials file the broker reads (``[default]`` profile)."""
    return f"[default]\naws_access_key_id = {access_key_id}\naws_secret_access_key = {secret_access_key}\n"


def credentials(spec: ClusterSpec, source: Mapping[str, Any] | None) -> str | None:
    """The credentials file made from the user's Secret ``source`` (None: no credentialsSecret);
    ``CredentialsMissing`` when the Secret or one of its keys is not there."""
    ref = credentials_ref(spec)
    if ref is None:
        return None
    if source is None:
        raise CredentialsMissing(f"tieredStorage.credentialsSecret: Secret {ref.name} does not exist")
    data = source.get("data") or {}
    values = []
    for field_name, key in ref.keys:
        value = _decode(data.get(key))
        if not value:
            raise CredentialsMissing(f"tieredStorage.credentialsSecret: Secret {ref.name} has no key {key!r} "
                                     f"({field_name}), or it is empty")
        if any(c in value for c in "\r\n"):   # one line of the INI file each
            raise CredentialsMissing(f"tieredStorage.credentialsSecret: Secret {ref.name} key {key!r} spans lines")
        values.append(value)
    return credentials_file(*values)


def _decode(value: str | None) -> str:
    try:
        return base64.b64decode(value or "", validate=True).decode().strip()
    except (binascii.Error, UnicodeDecodeError):
        return ""


def credentials_version(spec: ClusterSpec, source: Mapping[str, Any] | None) -> str:
    """A digest of the credentials file (empty without a credentialsSecret): part of the brokers'
    config hash, so a rotated key restarts them."""
    content = credentials(spec, source)
    return hashlib.sha256(content.encode()).hexdigest()[:16] if content else ""


def rotated(spec: ClusterSpec, source: Mapping[str, Any] | None, written: Mapping[str, Any] | None) -> bool:
    """Whether the user's Secret ``source`` now makes another file than the one the brokers have
    (``written``: the live ``<cluster>-tiered-storage``); False while either is missing (the
    reconcile writes or reports it)."""
    try:
        content = credentials(spec, source)
    except CredentialsMissing:
        return False
    if content is None or written is None:
        return False
    return (written.get("data") or {}).get(SECRET_KEY) != base64.b64encode(content.encode()).decode()


def credentials_secret(cluster: str, namespace: str, spec: ClusterSpec, source: Mapping[str, Any] | None,
                       labels: Mapping[str, str]) -> list[dict]:
    """``<cluster>-tiered-storage`` with the credentials file (none without a credentialsSecret)."""
    content = credentials(spec, source)
    if content is None:
        return []
    return [{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
             "metadata": {"name": secret_name(cluster), "namespace": namespace, "labels": dict(labels)},
             "data": {SECRET_KEY: base64.b64encode(content.encode()).decode()}}]


def add_to_broker(cluster: str, spec: ClusterSpec, pod: dict, container: dict) -> None:
    """The broker container being built gets the keys and, with a credentialsSecret, the file's volume."""
    ts = active(spec)
    if ts is None:
        return
    for key, value in broker_settings(ts).items():
        container["args"] += ["--config", f"{key}={value}"]
    if ts.credentials_secret is None:
        return
    pod["volumes"] = [*pod.get("volumes", []),
                      {"name": VOLUME, "secret": {"secretName": secret_name(cluster)}}]
    container["volumeMounts"] = [*container.get("volumeMounts", []),
                                 {"name": VOLUME, "mountPath": CREDENTIALS_DIR, "readOnly": True}]


def hash_material(spec: ClusterSpec, version: str) -> dict[str, str] | None:
    """What of tiered storage the brokers' shared config hash covers (None: off, so a cluster
    without it keeps the hash it had)."""
    ts = active(spec)
    if ts is None:
        return None
    return {**broker_settings(ts), "credentials": version}
