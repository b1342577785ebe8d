"""Spec validation for OdradekCluster and OdradekTopic, beyond what the CRD schema enforces.

The CRDs' OpenAPI schemas reject wrong types and out-of-range numbers at the API server; this
module checks what a schema cannot say: broker settings against the config registry
(``odradek.config``, which the broker uses too; the operator never imports the broker), one
ZooKeeper mode, quantities, topic names and configs. Every check raises ``SpecError`` with a
one-line reason; the handlers turn it into ``kopf.PermanentError`` and write the reason into
the resource's status.

Pure: no Kubernetes or network access, so the unit tests call it directly.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from odradek import topics
from odradek.config import parse_broker_settings, validate_topic_configs
from odradek.errors import KafkaError

_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_CONNECT = re.compile(r"^[A-Za-z0-9.-]+:[0-9]{1,5}(,[A-Za-z0-9.-]+:[0-9]{1,5})*(/[A-Za-z0-9/_.-]*)?$")


class SpecError(ValueError):
    """An invalid spec: retrying cannot help until the user edits the resource."""


def quantity_bytes(q: str) -> int:
    """A Kubernetes storage quantity (``10Gi``, ``500M``, ``1073741824``) in bytes."""
    m = _QUANTITY.match(str(q))
    if not m:
        raise SpecError(f"invalid storage quantity {q!r} (expected e.g. 10Gi, 500Mi)")
    suffix = m.group(2) or ""
    return int(float(str(q)[: len(str(q)) - len(suffix)]) * _SUFFIX[suffix])


def validate_broker_config(config: Mapping[str, Any]) -> dict[str, str]:
    """The ``brokers.config`` map -> ``{key: value}`` strings, checked with the config registry
    as ``odradek broker --config`` checks them: the broker's own keys, the group coordinator's
    ``group.*``/``offsets.*`` keys, topic keys and their Kafka broker synonyms (``log.retention.hours``...)."""
    settings = {str(k): _string(v) for k, v in (config or {}).items()}
    try:
        parse_broker_settings(settings)
    except KafkaError as e:
        raise SpecError(f"brokers.config: {e.message}") from None
    return settings


def validate_cluster(spec: Mapping[str, Any]) -> None:
    """Raise ``SpecError`` for an OdradekCluster spec the operator cannot build."""
    brokers = spec.get("brokers") or {}
    storage = brokers.get("storage") or {}
    if storage.get("type", "persistent-claim") == "persistent-claim":
        quantity_bytes(storage.get("size", "10Gi"))
    elif storage.get("size") or storage.get("class"):
        raise SpecError("brokers.storage: size and class apply only to type persistent-claim")
    validate_broker_config(brokers.get("config") or {})

    zk = spec.get("zookeeper") or {}
    managed, external = zk.get("managed"), zk.get("external")
    if managed is not None and external is not None:
        raise SpecError("zookeeper: set either managed or external, not both")
    if external is not None:
        connect = external.get("connect", "")
        if not _CONNECT.match(connect):
            raise SpecError(f"zookeeper.external.connect: {connect!r} is not host:port[,host:port...]")
        if "/" in connect:
            raise SpecError("zookeeper.external.connect: give no chroot; the cluster uses /odradek/<name>")
    if managed is not None:
        replicas = managed.get("replicas", 3)
        if replicas % 2 == 0:
            raise SpecError(f"zookeeper.managed.replicas: {replicas} is even; an ensemble needs an odd size")
        quantity_bytes((managed.get("storage") or {}).get("size", "5Gi"))

    gateway = spec.get("gateway") or {}
    if gateway.get("authSecret") is not None and not gateway.get("replicas", 0):
        raise SpecError("gateway.authSecret is set but gateway.replicas is 0")


def validate_storage_change(old_size: str, new_size: str) -> None:
    """PVCs can grow, never shrink."""
    if quantity_bytes(new_size) < quantity_bytes(old_size):
        raise SpecError(f"brokers.storage.size: cannot shrink volumes from {old_size} to {new_size}")


def topic_name(name: str, spec: Mapping[str, Any]) -> str:
    """``spec.topicName`` or the resource's name, checked against Kafka's rule."""
    topic = spec.get("topicName") or name
    problem = topics.name_problem(topic)
    if problem is not None:
        raise SpecError(f"topic name {topic!r} is invalid: {problem}")
    return topic


def validate_topic(name: str, spec: Mapping[str, Any]) -> dict[str, str]:
    """Check an OdradekTopic spec; returns its configs as strings."""
    topic_name(name, spec)
    try:
        return validate_topic_configs({str(k): _string(v) for k, v in (spec.get("config") or {}).items()})
    except KafkaError as e:
        raise SpecError(f"config: {e.message}") from None


def validate_topic_change(spec: Mapping[str, Any], partitions: int, replicas: int) -> None:
    """What the controller cannot do to an existing topic: fewer partitions, another RF."""
    want = spec.get("partitions")
    if want is not None and want < partitions:
        raise SpecError(f"partitions cannot decrease: the topic has {partitions}, the spec asks for {want}")
    rf = spec.get("replicas")
    if rf is not None and rf != replicas:
        raise SpecError(f"replicas cannot change from {replicas} to {rf}: changing the replication "
                        "factor needs a partition reassignment, which this operator does not run")


def _string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
