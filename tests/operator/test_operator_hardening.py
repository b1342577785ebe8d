"""Hardening of what an OdradekCluster runs, on the pure plan: the restricted security contexts
of every pod and container (``pod_security``) and the NetworkPolicies (``network_policies``)."""

from __future__ import annotations

import base64
import datetime
import json

from odradek.certs import alt_names
from odradek.operator import certs, cluster_plan, metrics, network_policies, reconcile
from odradek.operator.rolling import ScaleDecision
from tests.operator.plans import VERSIONS, children as planned, cluster_spec

NS = "data"
SECURED = {"listeners": [{"name": "tls", "port": 9092, "type": "internal", "tls": True,
                          "authentication": {"type": "scram-sha-512"}},
                         {"name": "ext", "port": 9094, "type": "nodeport", "tls": True}],
           "authorization": {"type": "simple"}, "gateway": {"replicas": 1}}


def pods(children):
    return {c["metadata"]["name"]: c["spec"]["template"]["spec"] for c in children
            if c["kind"] in ("StatefulSet", "Deployment")}


def policies(children):
    return {c["metadata"]["name"]: c for c in children if c["kind"] == "NetworkPolicy"}


def plan(raw, cluster="c"):
    spec = cluster_spec(raw)
    observed = cluster_plan.Observed(ScaleDecision(spec.brokers.replicas, True, ""),
                                     now=datetime.datetime.now(datetime.timezone.utc))
    return cluster_plan.plan_children(cluster, NS, spec, observed, VERSIONS, {})


def test_every_pod_and_container_runs_restricted_with_writable_tmp():
    raw = {**SECURED, "rack": {"topologyKey": "topology.kubernetes.io/zone"}}
    found = pods(planned("c", NS, raw))
    assert set(found) == {"c-zookeeper", "c-controller", "c-brokers", "c-gateway"}
    for name, pod in found.items():
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        volumes = {v["name"]: v for v in pod["volumes"]}
        for c in (*pod.get("initContainers", []), *pod["containers"]):
            ctx = c["securityContext"]
            assert ctx["readOnlyRootFilesystem"] is True and ctx["allowPrivilegeEscalation"] is False, (name, c["name"])
            assert ctx["capabilities"] == {"drop": ["ALL"]} and ctx["runAsNonRoot"] is True, (name, c["name"])
            assert ctx["seccompProfile"] == {"type": "RuntimeDefault"}, (name, c["name"])
            tmp = next(m for m in c["volumeMounts"] if m["mountPath"] == "/tmp")
            assert "emptyDir" in volumes[tmp["name"]], (name, c["name"])
    brokers = found["c-brokers"]
    assert [c["name"] for c in brokers["initContainers"]] == ["advertise", "rack"]
    assert brokers["securityContext"]["fsGroup"] == 10001     # the builder's own, kept


def test_zookeeper_runs_as_its_image_user_with_its_config_and_logs_on_volumes():
    pod = pods(planned("c", NS, {}))["c-zookeeper"]
    assert {k: pod["securityContext"][k] for k in ("runAsUser", "runAsGroup", "fsGroup")} == \
        {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}
    mounts = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    # the entrypoint writes zoo.cfg (/conf) and myid (/data); the JVM /tmp; the official image /logs
    assert {"/data", "/datalog", "/conf", "/logs", "/tmp"} <= mounts


def test_user_pod_template_security_context_leaves_the_containers_restricted():
    pod = pods(planned("c", NS, {"template": {"pod": {"securityContext": {"runAsUser": 4242}}}}))["c-brokers"]
    assert pod["securityContext"] == {"runAsUser": 4242}
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


def test_network_policies_admit_each_port_only_from_its_users():
    found = policies(plan(SECURED).children)
    assert set(found) == {f"c-network-policy-{c}" for c in ("zookeeper", "controller", "broker", "gateway")}
    for name, policy in found.items():
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        component = name.rpartition("-")[2]
        assert policy["spec"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/instance": "c",
                                                                "app.kubernetes.io/component": component}

    def peers(policy, port):
        rules = [r for r in found[f"c-network-policy-{policy}"]["spec"]["ingress"]
                 if port in [p["port"] for p in r["ports"]]]
        assert len(rules) == 1, (policy, port)
        froms = rules[0].get("from")
        if froms is None:
            return "anywhere"
        return {(p.get("podSelector") or {}).get("matchLabels", {}).get("app.kubernetes.io/component")
                or ("scrapers" if p.get("podSelector") else "any pod") for p in froms}

    assert peers("broker", 9092) == peers("broker", 9094) == "anywhere"   # the user's listeners
    assert peers("broker", 9091) == {"broker", "operator", "gateway"}       # replication
    assert peers("broker", 9093) == {"broker", "controller", "operator"}    # control plane
    assert peers("broker", 9404) == {"scrapers", "gateway"}
    assert peers("controller", 8080) == {"broker", "operator"}
    assert peers("controller", 9404) == {"scrapers"}
    assert peers("zookeeper", 2181) == {"broker", "controller", "operator"}
    assert peers("zookeeper", 2888) == peers("zookeeper", 3888) == {"zookeeper"}
    assert peers("gateway", 8000) == {"any pod"}                            # a ClusterIP Service
    # the operator and scrapers may be in any namespace; the cluster's own pods only in its own
    operator = next(p for r in found["c-network-policy-broker"]["spec"]["ingress"] for p in r.get("from", [])
                    if p["podSelector"]["matchLabels"].get("app.kubernetes.io/component") == "operator")
    assert operator == {"podSelector": {"matchLabels": network_policies.OPERATOR_LABELS}, "namespaceSelector": {}}
    scraper = next(p for r in found["c-network-policy-controller"]["spec"]["ingress"] for p in r["from"]
                   if "odradek.dev/scrape-metrics" in p["podSelector"]["matchLabels"])
    assert scraper["podSelector"]["matchLabels"] == {"odradek.dev/scrape-metrics": "true"}


def test_plain_cluster_opens_its_one_listener_and_a_node_port_gateway_to_anywhere():
    found = policies(plan({"gateway": {"replicas": 1, "serviceType": "NodePort"}}).children)
    broker_ports = [[p["port"] for p in r["ports"]] for r in found["c-network-policy-broker"]["spec"]["ingress"]]
    assert broker_ports == [[9092], [9093], [9404]]             # no replication listener without spec.listeners
    assert "from" not in found["c-network-policy-broker"]["spec"]["ingress"][0]
    assert "from" not in found["c-network-policy-gateway"]["spec"]["ingress"][0]


def test_policies_off_or_components_gone_are_planned_for_deletion():
    on = plan({"zookeeper": {"external": {"connect": "zk:2181"}}})
    assert set(policies(on.children)) == {"c-network-policy-controller", "c-network-policy-broker"}
    assert set(on.stale_policies) == {"c-network-policy-zookeeper", "c-network-policy-gateway"}
    off = plan({"networkPolicies": False, "gateway": {"replicas": 1}})
    assert not policies(off.children)
    assert set(off.stale_policies) == {f"c-network-policy-{c}" for c in network_policies.COMPONENTS}


def test_topic_cleanup_without_namespace_reads_falls_back_to_its_cluster():
    """Namespaced RBAC (the chart's watchNamespaces) forbids reading Namespaces: the cleanup of a
    deleted topic then goes by its cluster alone."""
    class Forbidden(Exception):
        def __init__(self, status):
            super().__init__(status)
            self.status = status

    class Kube:
        ApiException = Forbidden

        def get(self, api_version, kind, namespace, name):
            if kind == "Namespace":
                raise Forbidden(403)
            return None     # the cluster is gone

    cluster, why = reconcile.cluster_for_cleanup(Kube(), "apps", {"name": "t"}, {"cluster": "c"})
    assert cluster is None and "does not exist" in why


def test_certificate_expiry_metric_names_every_certificate_until_the_cluster_goes_stale():
    spec = cluster_spec({})
    now = datetime.datetime.now(datetime.timezone.utc)
    plan_ = certs.plan_certificates("c", NS, spec, {}, 2, now=now)
    expiry = certs.expiry_times({s["metadata"]["name"]: certs.decode(s) for s in plan_.secrets})
    assert set(expiry) == {("c-cluster-ca-cert", "ca.crt"), ("c-clients-ca-cert", "ca.crt"),
                           ("c-broker-certs", "c-brokers-0.crt"), ("c-broker-certs", "c-brokers-1.crt"),
                           ("c-controller-certs", "controller.crt"), ("c-gateway-certs", "gateway.crt"),
                           ("c-operator-certs", "operator.crt"), ("c-zookeeper-certs", "zookeeper.crt")}
    year = (now + spec.cluster_ca.validity).timestamp()
    assert all(abs(when - year) < 3600 for when in expiry.values())
    clock = [100.0]
    gauge = metrics.CertificateExpiry(lambda: clock[0])
    gauge.record(NS, "c", expiry)

    def samples():
        return {(s.labels["cluster"], s.labels["secret"], s.labels["key"]): s.value
                for family in gauge.collect() for s in family.samples}

    assert samples()[("c", "c-broker-certs", "c-brokers-1.crt")] == expiry[("c-broker-certs", "c-brokers-1.crt")]
    assert {s.labels["resource_namespace"] for f in gauge.collect() for s in f.samples} == {NS}
    clock[0] += metrics.CertificateExpiry.STALE_S + 1    # no status refresh since: deleted or unwatched
    assert samples() == {}


def prerequisites(raw, **observed):
    spec = cluster_spec(raw)
    return cluster_plan.plan_prerequisites("c", NS, spec, cluster_plan.Observed(
        ScaleDecision(spec.brokers.replicas, True, ""), **observed))


def secret(prereqs, name):
    return next((s for s in prereqs.secrets if s["metadata"]["name"] == name), None)


def test_a_gateway_without_auth_secret_gets_generated_tokens_kept_across_reconciles():
    first = secret(prerequisites({"gateway": {"replicas": 1}}), "c-gateway-tokens")
    tokens = json.loads(base64.b64decode(first["data"]["credentials"]))["tokens"]
    assert [(t["name"], t["admin"], len(t["token"]) >= 32) for t in tokens] == [("admin", True, True)]
    again = secret(prerequisites({"gateway": {"replicas": 1}}, gateway_tokens=first), "c-gateway-tokens")
    assert again["data"] == first["data"]
    assert secret(prerequisites({"gateway": {"replicas": 1, "authSecret": "mine"}}), "c-gateway-tokens") is None
    assert secret(prerequisites({}), "c-gateway-tokens") is None


NODE_PORT_TLS = {"brokers": {"replicas": 3}, "gateway": {"replicas": 1, "serviceType": "NodePort"},
                 "listeners": [{"name": "ext", "port": 9095, "type": "nodeport", "tls": True}]}


def test_node_port_certificates_name_every_listed_node_so_scheduling_reissues_nothing():
    nodes = ("10.0.0.7", "10.0.0.8")
    first = prerequisites(NODE_PORT_TLS, node_ips=nodes)    # no pod scheduled yet
    brokers, gateway = (certs.decode(secret(first, f"c-{c}-certs")) for c in ("broker", "gateway"))
    assert set(nodes) <= set(alt_names(brokers["c-brokers-2.crt"]))
    assert set(nodes) <= set(alt_names(gateway["gateway.crt"]))
    existing = {s["metadata"]["name"]: certs.decode(s) for s in first.certificates.secrets}
    scheduled = prerequisites(NODE_PORT_TLS, node_ips=nodes, host_ips={0: nodes[0], 1: nodes[1], 2: nodes[0]},
                              gateway_host_ips=(nodes[1],), certificates=existing)
    assert scheduled.certificates.renewed == [] and scheduled.certificates.versions == first.certificates.versions
    # without the Nodes (the operator may not list them) scheduling reissues: the brokers roll once
    blind = {s["metadata"]["name"]: certs.decode(s) for s in prerequisites(NODE_PORT_TLS).certificates.secrets}
    reissued = prerequisites(NODE_PORT_TLS, host_ips={0: nodes[0]}, certificates=blind).certificates
    assert "c-brokers-0" in reissued.renewed


class _Nodes:
    class ApiException(Exception):
        def __init__(self, status):
            self.status = status

    def __init__(self, nodes=None, status=None):
        self.nodes, self.status = nodes, status

    def list(self, api_version, kind, namespace):
        assert (api_version, kind, namespace) == ("v1", "Node", None)
        if self.status:
            raise self.ApiException(self.status)
        return self.nodes


def test_node_addresses_are_internal_and_external_ips_or_none_when_forbidden():
    import logging
    log = logging.getLogger("test")
    nodes = [{"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.7"},
                                       {"type": "Hostname", "address": "node-a"},
                                       {"type": "ExternalIP", "address": "203.0.113.4"}]}}, {"metadata": {}}]
    assert reconcile.node_addresses(_Nodes(nodes), log) == ("10.0.0.7", "203.0.113.4")
    assert reconcile.node_addresses(_Nodes(status=403), log) == ()


def test_a_node_port_gateway_certificate_names_the_nodes_it_ran_on():
    raw = {"gateway": {"replicas": 1, "serviceType": "NodePort"}}
    first = prerequisites(raw, gateway_host_ips=("10.0.0.7",))
    gateway = certs.decode(secret(first, "c-gateway-certs"))
    assert "10.0.0.7" in alt_names(gateway["gateway.crt"])
    assert "c-gateway.data.svc" in alt_names(gateway["gateway.crt"])
    existing = {s["metadata"]["name"]: certs.decode(s) for s in first.certificates.secrets}
    moved = prerequisites(raw, gateway_host_ips=("10.0.0.8",), certificates=existing)
    assert {"10.0.0.7", "10.0.0.8"} <= set(alt_names(certs.decode(secret(moved, "c-gateway-certs"))["gateway.crt"]))
    same = prerequisites(raw, gateway_host_ips=("10.0.0.7",), certificates=existing)
    assert "c-gateway-certs" not in " ".join(same.certificates.renewed) and "gateway" not in same.certificates.renewed
    cluster_ip = certs.decode(secret(prerequisites({"gateway": {"replicas": 1}}, gateway_host_ips=("10.0.0.7",)),
                                     "c-gateway-certs"))
    assert "10.0.0.7" not in alt_names(cluster_ip["gateway.crt"])
