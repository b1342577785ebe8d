"""What a broker pod was started with, and whether it must restart: Strimzi's per-pod
configuration on a StatefulSet (whose one pod template cannot differ per pod).

Two hashes, both on the brokers' pod template, so that every pod carries the values current
when the StatefulSet created it:

- ``odradek.dev/config-hash`` (``config_hash``): what every broker shares (settings, image,
  ZooKeeper, resources, racks, template, listeners, authorization, tiered storage with the
  version of its credentials). Its change rolls every
  broker, one at a time.
- ``odradek.dev/broker-hashes``: JSON ``{ordinal: hash}`` of what is each broker's own (its load
  balancers' addresses, which it advertises, and its certificate with the CA bundle; node ports
  stay once allocated). A pod compares only its own entry, so adding or removing broker N
  (a new entry, a new certificate, a new load balancer) restarts no other broker, while a change
  of broker N's own address or certificate restarts broker N alone.

Pods started before the split carry only the hash of everything (``legacy``: every load
balancer's address and every broker's certificate, what ``config_hash`` with ``external`` and
``certificates`` computes); such a pod is current while that hash is unchanged, so an operator
upgrade restarts nothing. The Secrets and the ``<c>-config`` ConfigMap are applied before the
StatefulSet (``cluster_plan``), so a pod's hashes are never newer than what it loaded.

Pure: the builders annotate the template, ``rolling.plan_roll`` compares pods.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from odradek.operator import listeners as listener_specs, tiered_storage
from odradek.operator.spec import ClusterSpec

CONFIG_HASH_ANNOTATION = "odradek.dev/config-hash"
BROKER_HASHES_ANNOTATION = "odradek.dev/broker-hashes"

Addresses = Mapping[tuple[str, int], str | None]   # (listener, broker ordinal) -> what it advertises


def _digest(material: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


def _hosts(external: Addresses | None, ordinal: int | None = None) -> list[str]:
    """Load balancers' addresses (of broker ``ordinal``, or of all); node ports are not hashed."""
    return sorted(a for (_, i), a in (external or {}).items()
                  if a and listener_specs.HOST_IP not in a and (ordinal is None or i == ordinal))


def config_hash(connect: str, spec: ClusterSpec, external: Addresses | None = None, certificates: str = "",
                tiered_credentials: str = "") -> str:
    """What a restart of every broker must pick up: settings, image, ZooKeeper (``connect``),
    resources, listeners, authorization and tiered storage (``tiered_credentials``: the version of
    its credentials file). With ``external`` and ``certificates`` (the version of every broker's
    certificates) it is the hash pods carried before the per-broker split."""
    source = spec.source   # as the user wrote them: the hash existing clusters have
    material = {"config": dict(spec.brokers.config), "image": spec.image, "zookeeper": connect,
                "resources": spec.brokers.resources or {}, "rack": source.get("rack") or {},
                "template": source.get("template") or {}}
    for key in ("listeners", "authorization"):  # only when set: older clusters keep their hash
        if source.get(key) is not None:
            material[key] = source[key]
    tiered = tiered_storage.hash_material(spec, tiered_credentials)
    if tiered is not None:   # only when on: clusters without it keep their hash
        material["tieredStorage"] = tiered
    hosts = _hosts(external)
    if hosts:
        material["loadBalancers"] = hosts
    if certificates:
        material["certificates"] = certificates
    return _digest(material)


def broker_hash(ordinal: int, external: Addresses | None, certificate: str) -> str:
    """Broker ``ordinal``'s own: its load balancers' addresses and its certificate's version."""
    material: dict[str, Any] = {"loadBalancers": _hosts(external, ordinal)}
    if certificate:
        material["certificate"] = certificate
    return _digest(material)


@dataclass(frozen=True)
class Revision:
    """What the brokers should run: the shared hash, each broker's own, and the hash of
    everything that pods from before the split carry (None: no such pods to honour)."""

    shared: str
    own: Mapping[int, str] = field(default_factory=dict)
    legacy: str | None = None

    def annotations(self) -> dict[str, str]:
        own = json.dumps({str(i): h for i, h in sorted(self.own.items())}, sort_keys=True)
        return {CONFIG_HASH_ANNOTATION: self.shared, BROKER_HASHES_ANNOTATION: own}

    def current(self, ordinal: int, config_hash: str | None, own_hash: str | None) -> bool:
        """Whether a pod with these annotations runs what broker ``ordinal`` should."""
        if self.own and ordinal not in self.own:   # scaled away: its pod goes, nothing to restart
            return True
        if own_hash is None:   # started before the split (or without its entry)
            return config_hash == (self.legacy if self.own else self.shared)
        return config_hash == self.shared and own_hash == self.own.get(ordinal)


def desired(connect: str, spec: ClusterSpec, replicas: int, external: Addresses | None,
            certificates: Mapping[int, str], all_certificates: str = "", tiered_credentials: str = "") -> Revision:
    """The revision of ``replicas`` brokers; ``certificates``: ordinal -> its certificate's
    version (``certs.broker_versions``), ``all_certificates`` the version of them all,
    ``tiered_credentials`` the tiered storage credentials' (``tiered_storage.credentials_version``)."""
    own = {i: broker_hash(i, external, certificates.get(i, "")) for i in range(replicas)}
    return Revision(config_hash(connect, spec, tiered_credentials=tiered_credentials), own,
                    config_hash(connect, spec, external, all_certificates, tiered_credentials))


def own_hash(annotations: Mapping[str, str], ordinal: int) -> str | None:
    """A pod's own entry of ``odradek.dev/broker-hashes`` (None: absent or unreadable)."""
    try:
        table = json.loads(annotations.get(BROKER_HASHES_ANNOTATION) or "{}")
    except ValueError:
        return None
    value = table.get(str(ordinal)) if isinstance(table, dict) else None
    return value if isinstance(value, str) else None
