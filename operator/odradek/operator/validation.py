"""Spec validation for OdradekCluster and OdradekTopic, beyond what the CRD schema enforces.

The CRDs' OpenAPI schemas reject wrong types and out-of-range numbers at the API server; this
module checks what a schema cannot say: broker settings against the config registry
(``odradek.config``, which the broker uses too; the operator never imports the broker), one
ZooKeeper mode, quantities, topic names and configs. ``parse_cluster`` turns an OdradekCluster's
spec into the frozen ``spec.ClusterSpec`` (the CRD's defaults stated there once), checking it
whole. Every check raises ``SpecError`` with a one-line reason; the handlers turn it into
``kopf.PermanentError`` and write the reason into the resource's status.

Pure: no Kubernetes or network access, so the unit tests call it directly.
"""

from __future__ import annotations

import re
from typing import Any, Mapping
from urllib.parse import urlsplit

from odradek import topics
from odradek.config import parse_broker_settings, validate_topic_configs
from odradek.errors import KafkaError
from odradek.operator import listeners, spec as model, tiered_storage
from odradek.operator.spec import SpecError

_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")   # S3's bucket naming rules
_IPV4 = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$")        # which exclude a name shaped as an IP address
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")                 # a Secret's data key
_CONNECT = re.compile(r"^[A-Za-z0-9.-]+:[0-9]{1,5}(,[A-Za-z0-9.-]+:[0-9]{1,5})*(/[A-Za-z0-9/_.-]*)?$")


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


def parse_cluster(spec: Mapping[str, Any]) -> model.ClusterSpec:
    """An OdradekCluster's ``spec`` as a ``ClusterSpec`` (the CRD's defaults for what it leaves
    out); ``SpecError`` for a spec the operator cannot build."""
    brokers = spec.get("brokers") or {}
    config = dict(sorted(validate_broker_config(brokers.get("config") or {}).items()))
    return model.ClusterSpec(
        image=spec.get("image", model.ClusterSpec.image),
        image_pull_policy=spec.get("imagePullPolicy", model.ClusterSpec.image_pull_policy),
        brokers=model.Brokers(int(brokers.get("replicas", model.Brokers.replicas)), _broker_storage(brokers),
                              brokers.get("resources"), config, _pdb(brokers.get("pdb") or {})),
        listeners=tuple(listeners.validate(spec)),
        authorization=_authorization(spec),
        controller=_controller(spec.get("controller") or {}),
        gateway=_gateway(spec.get("gateway") or {}, listeners.secured(listeners.parse(spec))),
        zookeeper=_zookeeper(spec.get("zookeeper") or {}),
        cluster_ca=ca_settings(spec, "clusterCa"), clients_ca=ca_settings(spec, "clientsCa"),
        rack_topology_key=(spec.get("rack") or {}).get("topologyKey") or None,
        network_policies=bool(spec.get("networkPolicies", model.ClusterSpec.network_policies)),
        pod_template=(spec.get("template") or {}).get("pod") or {},
        auto_rebalance=_auto_rebalance(spec.get("autoRebalance") or []),
        tiered_storage=_tiered_storage(spec.get("tieredStorage"), config),
        source={key: spec[key] for key in ("listeners", "authorization", "rack", "template") if key in spec})


def _auto_rebalance(entries: list) -> tuple[model.AutoRebalance, ...]:
    out = tuple(model.AutoRebalance(e.get("mode"), (e.get("template") or {}).get("name")) for e in entries)
    modes = [e.mode for e in out]
    if any(m not in ("add-brokers", "remove-brokers") for m in modes) or len(set(modes)) != len(modes):
        raise SpecError(f"autoRebalance: each mode (add-brokers, remove-brokers) at most once, got {modes}")
    return out


def _tiered_storage(raw: Mapping[str, Any] | None, config: Mapping[str, str]) -> model.TieredStorage | None:
    """``tieredStorage``; the keys it renders are checked with the registry as brokers.config is,
    and brokers.config may not set them besides (one place says where the store is)."""
    if raw is None:
        return None
    default = model.TieredStorage
    ref = raw.get("credentialsSecret")
    out = model.TieredStorage(
        str(raw.get("bucket") or ""), bool(raw.get("enabled", default.enabled)), str(raw.get("endpoint") or ""),
        str(raw.get("region", default.region)), str(raw.get("prefix") or ""),
        None if ref is None else model.CredentialsSecret(
            str(ref.get("name") or ""), str(ref.get("accessKeyIdKey", model.CredentialsSecret.access_key_id_key)),
            str(ref.get("secretAccessKeyKey", model.CredentialsSecret.secret_access_key_key))),
        int(raw.get("taskIntervalMs", default.task_interval_ms)))
    both = sorted(set(tiered_storage.KEYS) & set(config))
    if both:
        raise SpecError(f"brokers.config: {', '.join(both)} set by spec.tieredStorage; remove them from brokers.config")
    _bucket(out.bucket)
    _endpoint(out.endpoint)
    if not out.region.strip():
        raise SpecError("tieredStorage.region: empty (the region signatures use, e.g. us-east-1)")
    if out.prefix.startswith("/"):
        raise SpecError(f"tieredStorage.prefix: {out.prefix!r} starts with '/' (keys are <prefix><topic>-<id>/...)")
    if out.credentials_secret is not None:
        _credentials_secret(out.credentials_secret)
    try:
        parse_broker_settings(tiered_storage.broker_settings(out))
    except KafkaError as e:
        raise SpecError(f"tieredStorage: {e.message}") from None
    return out


def _bucket(bucket: str) -> None:
    if not _BUCKET.match(bucket) or ".." in bucket or _IPV4.match(bucket):
        raise SpecError(f"tieredStorage.bucket: {bucket!r} is not a bucket name (3-63 characters: lower-case "
                        "letters, digits, '.' and '-', beginning and ending with a letter or digit, not an IP address)")


def _endpoint(endpoint: str) -> None:
    """Empty (AWS S3), or an http(s) URL of a host; no credentials in it: DescribeConfigs shows it."""
    if not endpoint:
        return
    try:
        url = urlsplit(endpoint)
        url.port   # raises for a port out of range
    except ValueError:
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.hostname or url.query or url.fragment:
        raise SpecError(f"tieredStorage.endpoint: {endpoint!r} is not an http:// or https:// URL of the object store")
    if url.username is not None or url.password is not None:
        raise SpecError("tieredStorage.endpoint: no credentials in the URL (brokers show it in DescribeConfigs); "
                        "give them in tieredStorage.credentialsSecret")


def _credentials_secret(ref: model.CredentialsSecret) -> None:
    if not ref.name:
        raise SpecError("tieredStorage.credentialsSecret.name: the Secret's name is required")
    for field_name, key in ref.keys:
        if not _SECRET_KEY.match(key):
            raise SpecError(f"tieredStorage.credentialsSecret.{field_name}: {key!r} is not a Secret key")


def _broker_storage(brokers: Mapping[str, Any]) -> model.BrokerStorage:
    storage = brokers.get("storage") or {}
    default = model.BrokerStorage()
    out = model.BrokerStorage(storage.get("type", default.type), storage.get("size", default.size),
                              storage.get("class"), bool(storage.get("deleteClaim", default.delete_claim)))
    if out.persistent:
        quantity_bytes(out.size)
    elif storage.get("size") or storage.get("class"):
        raise SpecError("brokers.storage: size and class apply only to type persistent-claim")
    return out


def _pdb(pdb: Mapping[str, Any]) -> model.Pdb:
    return model.Pdb(bool(pdb.get("enabled", model.Pdb.enabled)),
                     int(pdb.get("maxUnavailable", model.Pdb.max_unavailable)))


def _controller(ctl: Mapping[str, Any]) -> model.Controller:
    return model.Controller(int(ctl.get("replicas", model.Controller.replicas)), ctl.get("resources"))


def _gateway(gateway: Mapping[str, Any], secured: bool) -> model.Gateway:
    out = model.Gateway(int(gateway.get("replicas", model.Gateway.replicas)),
                        gateway.get("serviceType", model.Gateway.service_type), gateway.get("authSecret"),
                        gateway.get("resources"), tuple(gateway.get("users") or ()))
    if out.auth_secret is not None and not out.replicas:
        raise SpecError("gateway.authSecret is set but gateway.replicas is 0")
    if out.users and (out.auth_secret is not None or not out.replicas):
        raise SpecError("gateway.users maps the generated tokens: it needs gateway.replicas > 0 and no authSecret")
    if out.users and not secured:
        raise SpecError("gateway.users needs a TLS listener in spec.listeners: the gateway logs in as each user "
                        "with its certificate on the replication listener, which is mutual TLS only then")
    if len(set(out.users)) != len(out.users):
        raise SpecError("gateway.users: a user is named twice")
    return out


def _zookeeper(zk: Mapping[str, Any]) -> model.Zookeeper:
    managed, external = zk.get("managed"), zk.get("external")
    if managed is not None and external is not None:
        raise SpecError("zookeeper: set either managed or external, not both")
    if external is not None:
        connect = external.get("connect", "")
        if not _CONNECT.match(connect):
            raise SpecError(f"zookeeper.external.connect: {connect!r} is not host:port[,host:port...]")
        if "/" in connect:
            raise SpecError("zookeeper.external.connect: give no chroot; the cluster uses /odradek/<name>")
        return model.Zookeeper(None, connect)
    managed = managed or {}
    replicas = int(managed.get("replicas", model.ManagedZookeeper.replicas))
    if replicas % 2 == 0:
        raise SpecError(f"zookeeper.managed.replicas: {replicas} is even; an ensemble needs an odd size")
    storage = managed.get("storage") or {}
    storage = model.ZookeeperStorage(storage.get("size", model.ZookeeperStorage.size), storage.get("class"))
    quantity_bytes(storage.size)
    return model.Zookeeper(model.ManagedZookeeper(replicas, managed.get("image", model.ManagedZookeeper.image),
                                                  storage, managed.get("resources")))


def _authorization(spec: Mapping[str, Any]) -> model.Authorization | None:
    """``spec.authorization`` (``listeners.validate`` checks its type and that listeners exist)."""
    authz = spec.get("authorization")
    if authz is None:
        return None
    return model.Authorization(tuple(str(u) for u in authz.get("superUsers") or []))


def ca_settings(spec: Mapping[str, Any], key: str) -> model.CaSettings:
    """``spec[key]`` (``clusterCa`` or ``clientsCa``); ``SpecError`` when renewal would start
    before the certificate is issued."""
    ca, default = spec.get(key) or {}, model.CaSettings()
    out = model.CaSettings(int(ca.get("validityDays", default.validity_days)),
                           int(ca.get("renewalDays", default.renewal_days)),
                           bool(ca.get("generateCertificateAuthority", default.generate)))
    if out.validity_days < 1 or out.renewal_days < 1:
        raise SpecError(f"{key}: validityDays and renewalDays must be at least 1")
    if out.renewal_days >= out.validity_days:
        raise SpecError(f"{key}.renewalDays ({out.renewal_days}) must be less than validityDays "
                        f"({out.validity_days})")
    return out


def validate_storage_change(old_size: str, new_size: str) -> None:
    """PVCs can grow, never shrink."""
    if quantity_bytes(new_size) < quantity_bytes(old_size):
        raise SpecError(f"brokers.storage.size: cannot shrink volumes from {old_size} to {new_size}")


def topic_name(name: str, spec: Mapping[str, Any]) -> str:
    """``spec.topicName`` or the resource's name, checked against Kafka's rule; an internal
    topic (``__consumer_offsets``, ``__transaction_state``) is refused (reason ``InternalTopic``)."""
    topic = spec.get("topicName") or name
    problem = topics.name_problem(topic)
    if problem is not None:
        raise SpecError(f"topic name {topic!r} is invalid: {problem}")
    if topics.is_internal(topic):   # the brokers' own (offsets, transactions): never a tenant's
        raise SpecError(f"topic {topic!r} is internal to the cluster: an OdradekTopic may not manage it",
                        "InternalTopic")
    return topic


def validate_topic(name: str, spec: Mapping[str, Any]) -> dict[str, str]:
    """Check an OdradekTopic spec; returns its configs as strings."""
    topic_name(name, spec)
    try:
        return validate_topic_configs({str(k): _string(v) for k, v in (spec.get("config") or {}).items()})
    except KafkaError as e:
        raise SpecError(f"config: {e.message}") from None


def validate_topic_change(spec: Mapping[str, Any], partitions: int, replicas: int) -> None:
    """What the controller cannot do to an existing topic: fewer partitions (another replication
    factor it can: ``replicas_change``)."""
    want = spec.get("partitions")
    if want is not None and want < partitions:
        raise SpecError(f"partitions cannot decrease: the topic has {partitions}, the spec asks for {want}")


def _string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
