"""The pure plan of an OdradekCluster's reconcile: from the parsed spec and what was observed,
the objects to apply, as data (``reconcile.apply_cluster`` observes, then applies them).

Two stages, because the API server allocates what the second needs:

1. ``plan_prerequisites``: the certificate Secrets (``certs.plan_certificates``; the brokers'
   certificates name their external TLS listeners' addresses as observed, a NodePort
   gateway's its nodes'; both name every Node's address where the operator may list Nodes,
   so that the first pods start with certificates naming their node and no roll follows), the ZooKeeper digest Secret, the gateway's generated tokens
   (``gateway_security.tokens_secret``: one per ``gateway.users`` user that can be mapped), the
   tiered storage credentials file made from the user's Secret (``tiered_storage``) and the
   external listeners' Services. Applied first; a bad user-supplied CA raises ``SpecError``, a
   missing credentials Secret ``tiered_storage.CredentialsMissing``, before anything is written.
2. ``plan_children``: from the Services as applied (node ports and load balancers' addresses
   the brokers advertise), the security plan (``principals.security_plan``) and every child
   manifest as it is applied (``builders.build_children``), the live StatefulSets' claim
   templates kept (``keep_immutable``), then the NetworkPolicies (``network_policies``) and
   the names of those an earlier spec had that are to be deleted.

No I/O here (certificate keys and the digest password are generated, not read): the unit tests
call these on built ``Observed`` values and assert on exactly what is applied.
"""

from __future__ import annotations

import copy
import datetime
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from odradek.operator import builders, certs, gateway_security, listeners, network_policies, principals, tiered_storage
from odradek.operator.rolling import ScaleDecision
from odradek.operator.security import SecurityPlan
from odradek.operator.spec import ClusterSpec

Addresses = Mapping[tuple[str, int], str | None]   # (listener, broker ordinal) -> what it advertises


@dataclass(frozen=True)
class Observed:
    """What the plan needs from the API server and the controller (``reconcile.observe_cluster``)."""
    scale: ScaleDecision                                    # the brokers to run now (a refused scale-down keeps them)
    statefulsets: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)  # live, by name
    host_ips: Mapping[int, str] = field(default_factory=dict)          # broker ordinal -> its node's address
    # the TLS external listeners' per-broker Services (their addresses go into certificates)
    services: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    certificates: Mapping[str, Mapping[str, bytes]] = field(default_factory=dict)   # certificate Secrets, decoded
    zookeeper_secret: Mapping[str, Any] | None = None
    now: datetime.datetime | None = None
    gateway_tokens: Mapping[str, Any] | None = None        # the live <c>-gateway-tokens Secret
    gateway_host_ips: tuple[str, ...] = ()                  # the nodes a NodePort gateway's pods run on
    gateway_users: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)  # gateway.users' OdradekUsers
    # every Node's addresses (empty where the operator may not list Nodes): a TLS node port's
    # certificates name them from the first issue, before any broker pod is scheduled
    node_ips: tuple[str, ...] = ()
    tiered_credentials: Mapping[str, Any] | None = None     # the user's tieredStorage.credentialsSecret

    def gateway_user_problems(self, cluster: str, spec: ClusterSpec) -> dict[str, str]:
        return gateway_security.user_problems(cluster, spec.gateway.users, self.gateway_users)

    def mapped_gateway_users(self, cluster: str, spec: ClusterSpec) -> tuple[str, ...]:
        """The ``gateway.users`` the gateway can log in as now."""
        problems = self.gateway_user_problems(cluster, spec)
        return tuple(u for u in spec.gateway.users if u not in problems)


@dataclass(frozen=True)
class Prerequisites:
    """Stage 1: applied before the children (Secrets and listener Services, all owned)."""
    certificates: certs.CertificatePlan
    secrets: tuple[dict, ...]
    services: tuple[dict, ...]


@dataclass(frozen=True)
class ClusterPlan:
    """Stage 2: the children as they are applied, in apply order."""
    security: SecurityPlan
    external: Addresses
    children: tuple[dict, ...]
    stale_policies: tuple[str, ...] = ()   # NetworkPolicies to delete (turned off, component gone)
    gateway_refused: str | None = None     # gateway.users left out, and why (a status condition)
    gateway_pending: tuple[str, ...] = ()  # those of them only not Ready yet (the cluster waits for them)


def keep_immutable(desired: dict, existing: Mapping[str, Any] | None) -> dict:
    """A StatefulSet's ``volumeClaimTemplates`` cannot change after creation: keep the live
    ones (storage growth is applied to the PVCs themselves)."""
    if not existing or desired.get("kind") != "StatefulSet":
        return desired
    out = copy.deepcopy(desired)
    live = (existing.get("spec") or {}).get("volumeClaimTemplates")
    if live is not None and "volumeClaimTemplates" in out["spec"]:
        out["spec"]["volumeClaimTemplates"] = [
            {"metadata": {k: v for k, v in t["metadata"].items() if k in ("name", "labels")},
             "spec": {k: v for k, v in t["spec"].items() if k in ("accessModes", "resources", "storageClassName")}}
            for t in live]
    return out


def external_addresses(name: str, specs: Sequence[listeners.Listener], replicas: int,
                       live: Mapping[str, Mapping[str, Any] | None]) -> dict[tuple[str, int], str | None]:
    """(listener, ordinal) -> what that broker advertises, from its live Service."""
    out = {}
    for li in (li for li in specs if li.external):
        for ordinal, service in enumerate(listeners.service_names(name, li, replicas)[1]):
            out[(li.name, ordinal)] = listeners.external_address(li, live.get(service))
    return out


def observed_service_names(name: str, spec: ClusterSpec, replicas: int) -> list[str]:
    """The Services whose addresses the brokers' certificates carry (TLS external listeners)."""
    return [n for li in spec.listeners if li.external and li.tls
            for n in listeners.service_names(name, li, replicas)[1]]


def plan_prerequisites(name: str, namespace: str, spec: ClusterSpec, observed: Observed) -> Prerequisites:
    """The certificate and digest Secrets and the listener Services for ``observed.scale``."""
    replicas = observed.scale.replicas
    nodes = {*observed.host_ips.values(), *observed.node_ips}
    cert_names = listeners.certificate_names(spec.listeners, replicas, nodes,
                                             external_addresses(name, spec.listeners, replicas, observed.services))
    gateway_names = gateway_security.certificate_names(
        spec, {*observed.gateway_host_ips, *observed.node_ips},
        observed.certificates.get(certs.secret_names(name)["gateway"], {}))
    plan = certs.plan_certificates(name, namespace, spec, observed.certificates, replicas, cert_names, observed.now,
                                   gateway_names)
    digest = principals.zookeeper_secret(name, namespace, observed.zookeeper_secret)
    tokens = gateway_security.tokens_secret(name, namespace, spec, observed.gateway_tokens,
                                            observed.mapped_gateway_users(name, spec))
    tiered = tiered_storage.credentials_secret(name, namespace, spec, observed.tiered_credentials,
                                               builders.labels(name, tiered_storage.COMPONENT))
    return Prerequisites(plan, (*tiered, *plan.secrets, digest, *tokens),
                         tuple(builders.build_listener_services(name, namespace, spec, replicas)))


def plan_children(name: str, namespace: str, spec: ClusterSpec, observed: Observed, versions: Mapping[str, str],
                  live_services: Mapping[str, Mapping[str, Any] | None]) -> ClusterPlan:
    """Every child manifest as it is applied. ``versions``: ``CertificatePlan.versions``;
    ``live_services``: the listener Services as the API server returned them."""
    replicas = observed.scale.replicas
    external = external_addresses(name, spec.listeners, replicas, live_services)
    security = replace(principals.security_plan(name, spec.listeners, versions, spec.zookeeper.managed is not None,
                                                observed.mapped_gateway_users(name, spec)),
                       tiered_credentials=tiered_storage.credentials_version(spec, observed.tiered_credentials))
    children = [keep_immutable(child, observed.statefulsets.get(child["metadata"]["name"]))
                if child["kind"] == "StatefulSet" else child
                for child in builders.build_children(name, namespace, spec, security, replicas, external)]
    children += network_policies.build_network_policies(name, namespace, spec)
    return ClusterPlan(security, external, tuple(children), tuple(network_policies.unwanted(name, spec)),
                       gateway_security.refusal(observed.gateway_user_problems(name, spec)),
                       gateway_security.pending_users(name, spec.gateway.users, observed.gateway_users))
