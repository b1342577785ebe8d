"""What a cluster's security asks of its pods, as frozen values the builders take in
(``principals.security_plan`` decides it; ``builders`` renders it into the manifests).

Per component (controller, broker, gateway; ZooKeeper's certificates when it is managed) a ``PodSecurity``: the Secret volumes and their
mounts (certificates, ZooKeeper digest), the settings passed as ``--config KEY=VALUE``
(control-plane mutual TLS, ZooKeeper ACLs), extra arguments (the gateway's ``--kafka-ssl-*``),
the readiness probe that replaces the builder's plain one (an exec probe presenting the pod's
certificate: the kubelet cannot) and the certificate version annotated on the pod template
(its change restarts a Deployment's pods; each broker's version is in its own hash instead,
``revisions``, so ``rolling`` restarts them one at a time). ``SecurityPlan`` adds the brokers' TLS
listener material and the controller's advertised URL (its DNS name, made by the shell from
``$POD_IP``: no downward API field gives the dashed address).

Pure values; no Kubernetes access. Imported by ``builders`` (types only from here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from odradek.operator.listeners import BrokerTls


@dataclass(frozen=True)
class PodSecurity:
    volumes: tuple[Mapping[str, Any], ...] = ()
    mounts: tuple[Mapping[str, Any], ...] = ()
    settings: Mapping[str, str] = field(default_factory=dict)   # --config KEY=VALUE, in this order
    args: tuple[str, ...] = ()
    probe: Mapping[str, Any] | None = None                     # replaces the builder's readiness probe
    annotations: Mapping[str, str] = field(default_factory=dict)  # on the pod template (the certificates' version)


@dataclass(frozen=True)
class SecurityPlan:
    controller: PodSecurity
    broker: PodSecurity
    gateway: PodSecurity
    broker_certificates: str = ""         # the version of every broker's certificate (pods before revisions.py)
    broker_pod_certificates: Mapping[int, str] = field(default_factory=dict)   # ordinal -> its own version
    broker_tls: BrokerTls | None = None   # TLS listeners and mutual-TLS replication, when secured
    controller_advertised_url: str = ""   # a shell word: the controller runs through ``sh -c``
    zookeeper: PodSecurity = field(default_factory=PodSecurity)   # the managed ensemble's certificates
    gateway_users: tuple[str, ...] = ()   # OdradekUsers the gateway logs in as (gateway_security)
    tiered_credentials: str = ""          # the version of the brokers' object-store credentials (tiered_storage)
