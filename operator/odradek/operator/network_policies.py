"""The NetworkPolicies of an OdradekCluster, as Strimzi generates them for Kafka: one per
component, each admitting every port the component serves only from the pods that use it
(``spec.networkPolicies``, on by default; docs/security.md, "Operator hardening").

What talks to what (``builders``, ``principals``, the chart):

====================  ==========================================  ====================================
component, port       from                                        why
====================  ==========================================  ====================================
brokers, listeners    anywhere                                    the user's clients (as Strimzi's
                                                                  listeners without networkPolicyPeers)
brokers 9091          brokers, the operator, the gateway          replication (mutual TLS); the gateway
                                                                  connects there with its certificate
brokers 9093          brokers, controllers, the operator          the control plane
controllers 8080      brokers, the operator                       the controller's API
ZooKeeper 2181        brokers, controllers, the operator          the metadata store
ZooKeeper 2888/3888   ZooKeeper                                   quorum and leader election
9404 (brokers,        pods labelled ``SCRAPER_LABEL`` (any        /metrics names topics, groups and
controllers)          namespace); the gateway (brokers' only)     users; the console's figures
gateway 8000          anywhere (NodePort, LoadBalancer) or any    its clients (it authenticates them)
                      pod of the cluster (ClusterIP)
====================  ==========================================  ====================================

Peers of the cluster are its own pods (same namespace, ``builders.selector``); the operator is
any pod labelled as the chart labels it, in any namespace (as Strimzi admits its cluster
operator). Only ingress is restricted (as Strimzi). Labels can be forged by whoever may create
pods in the namespace: the policies narrow the network, mutual TLS and SASL still decide.

Pure: ``build_network_policies`` returns the manifests; ``cluster_plan`` plans them and the
reconcile applies them with owner references (or deletes them when turned off).
"""

from __future__ import annotations

from typing import Any

from odradek.operator import builders
from odradek.operator import listeners as listener_specs
from odradek.operator.spec import ClusterSpec

API_VERSION = "networking.k8s.io/v1"
SCRAPER_LABEL = ("odradek.dev/scrape-metrics", "true")
OPERATOR_LABELS = {"app.kubernetes.io/name": "odradek", "app.kubernetes.io/component": "operator"}
ZK_PEER_PORT, ZK_ELECTION_PORT = 2888, 3888
COMPONENTS = ("zookeeper", "controller", "broker", "gateway")


def policy_name(cluster: str, component: str) -> str:
    return f"{cluster}-network-policy-{component}"


def _own(cluster: str, component: str) -> dict:
    return {"podSelector": {"matchLabels": builders.selector(cluster, component)}}


def _operator() -> dict:
    return {"podSelector": {"matchLabels": dict(OPERATOR_LABELS)}, "namespaceSelector": {}}


def _scrapers() -> dict:
    return {"podSelector": {"matchLabels": dict([SCRAPER_LABEL])}, "namespaceSelector": {}}


def _rule(ports: list[int], peers: list[dict] | None) -> dict:
    """Ingress to ``ports`` from ``peers`` (None: from anywhere)."""
    rule: dict[str, Any] = {"ports": [{"protocol": "TCP", "port": p} for p in ports]}
    if peers is not None:
        rule["from"] = peers
    return rule


def _policy(cluster: str, namespace: str, component: str, rules: list[dict]) -> dict:
    return {"apiVersion": API_VERSION, "kind": "NetworkPolicy",
            "metadata": {"name": policy_name(cluster, component), "namespace": namespace,
                         "labels": builders.labels(cluster, component)},
            "spec": {"podSelector": {"matchLabels": builders.selector(cluster, component)},
                     "policyTypes": ["Ingress"], "ingress": rules}}


def _broker_rules(cluster: str, spec: ClusterSpec) -> list[dict]:
    brokers, gateway = _own(cluster, "broker"), _own(cluster, "gateway")
    clients = [p["port"] for p in listener_specs.kafka_ports(spec.listeners)
               if p["port"] != listener_specs.REPLICATION_PORT]
    rules = [_rule(clients, None)]
    if spec.listeners:
        rules.append(_rule([listener_specs.REPLICATION_PORT], [brokers, _operator(), gateway]))
    return [*rules,
            _rule([builders.BROKER_INTERNAL_PORT], [brokers, _own(cluster, "controller"), _operator()]),
            _rule([builders.METRICS_PORT], [_scrapers(), gateway])]


def _gateway_rules(spec: ClusterSpec) -> list[dict]:
    if spec.gateway.service_type == "ClusterIP":
        return [_rule([builders.GATEWAY_PORT], [{"namespaceSelector": {}}])]
    return [_rule([builders.GATEWAY_PORT], None)]


def build_network_policies(cluster: str, namespace: str, spec: ClusterSpec) -> list[dict]:
    """The policies of ``cluster``'s components that run (none when ``networkPolicies`` is false)."""
    if not spec.network_policies:
        return []
    brokers, controllers = _own(cluster, "broker"), _own(cluster, "controller")
    out = []
    if spec.zookeeper.managed is not None:
        out.append(_policy(cluster, namespace, "zookeeper", [
            _rule([builders.ZK_CLIENT_PORT], [brokers, controllers, _operator()]),
            _rule([ZK_PEER_PORT, ZK_ELECTION_PORT], [_own(cluster, "zookeeper")])]))
    out.append(_policy(cluster, namespace, "controller", [
        _rule([builders.CONTROLLER_PORT], [brokers, _operator()]),
        _rule([builders.METRICS_PORT], [_scrapers()])]))
    out.append(_policy(cluster, namespace, "broker", _broker_rules(cluster, spec)))
    if spec.gateway.replicas > 0:
        out.append(_policy(cluster, namespace, "gateway", _gateway_rules(spec)))
    return out


def unwanted(cluster: str, spec: ClusterSpec) -> list[str]:
    """The policies ``cluster`` may have from an earlier spec that it should not have now."""
    wanted = {p["metadata"]["name"] for p in build_network_policies(cluster, "", spec)}
    return [policy_name(cluster, c) for c in COMPONENTS if policy_name(cluster, c) not in wanted]
