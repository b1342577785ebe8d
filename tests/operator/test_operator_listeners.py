"""spec.listeners and spec.authorization: validation, the brokers' Kafka settings, external
Services and advertised addresses, without a cluster (the API-server test is
test_operator_k8s_listeners.py)."""

from __future__ import annotations

import json

import pytest

from odradek.config import parse_broker_settings
from odradek.operator import builders, certs, cluster_plan, listeners, revisions
from odradek.operator.validation import SpecError
from tests.operator.plans import VERSIONS, children as planned, cluster_spec, security

NS = "data"
SCRAM = {"type": "scram-sha-512"}


def spec_with(*items, **extra):
    return {"brokers": {"replicas": 3}, "listeners": list(items), **extra}


@pytest.mark.parametrize("items, extra, match", [
    ([{"name": "ext", "port": 9094, "type": "route"}], {}, r"\(ext\): unknown listener type 'route'"),
    ([{"name": "a", "port": 9094}, {"name": "b", "port": 9094}], {}, "port 9094 is used by both 'a' and 'b'"),
    ([{"name": "a", "port": 9094}, {"name": "a", "port": 9095}], {}, "duplicate listener name 'a'"),
    ([{"name": "plain", "port": 9094, "authentication": {"type": "tls"}}], {},
     r"\(plain\): authentication type tls needs a TLS listener"),
    ([{"name": "a", "port": 9091}], {}, "port 9091 is reserved for the replication listener"),
    ([{"name": "a", "port": 9093}], {}, "reserved for the brokers' control-plane API"),
    ([{"name": "Bad-Name", "port": 9094}], {}, "must be 1-11 lower-case letters or digits"),
    ([{"name": "replication", "port": 9094}], {}, "the operator's own"),
    ([{"name": "a", "port": 9094, "authentication": {"type": "gssapi"}}], {}, "unknown authentication type 'gssapi'"),
    ([{"name": "a", "port": 9094}], {"authorization": {"type": "opa"}}, "'opa' is not supported"),
    ([], {"authorization": {"type": "simple"}}, "needs a listener with authentication"),
    # plaintext or TLS without authentication only: every client would be User:ANONYMOUS
    ([{"name": "a", "port": 9094}, {"name": "b", "port": 9095, "tls": True}], {"authorization": {"type": "simple"}},
     "needs a listener with authentication"),
    ([{"name": "a", "port": 9094, "authentication": SCRAM}],
     {"authorization": {"type": "simple", "superUsers": ["ops", "User:ANONYMOUS"]}}, "ANONYMOUS .* cannot be a super"),
    ([{"name": "a", "port": 9094, "authentication": SCRAM}], {"authorization": {"type": "simple",
                                                                                "superUsers": ["ANONYMOUS"]}},
     "ANONYMOUS"),
    ([{"name": "a", "port": 9094}], {"brokers": {"config": {"listener.name.replication.ssl.client.auth": "none",
                                                            "ssl.client.auth": "none"}}},
     "brokers.config: listener.name.replication.ssl.client.auth, ssl.client.auth are set from spec.listeners"),
    ([{"name": "a", "port": 9094}], {"brokers": {"config": {"listeners": "X://:1", "super.users": "User:x"}}},
     "brokers.config: listeners, super.users are set from spec.listeners"),
])
def test_bad_listener_specs_are_refused_with_the_reason(items, extra, match):
    with pytest.raises(SpecError, match=match):
        listeners.validate(spec_with(*items, **extra))


def test_authorization_without_authentication_is_refused_with_its_own_reason():
    with pytest.raises(SpecError) as refused:
        cluster_spec(spec_with({"name": "plain", "port": 9092}, authorization={"type": "simple"}))
    assert refused.value.reason == "NoAuthenticatingListener" and "User:ANONYMOUS" in str(refused.value)
    with pytest.raises(SpecError) as anonymous:
        listeners.validate(spec_with({"name": "a", "port": 9094, "authentication": SCRAM},
                                     authorization={"type": "simple", "superUsers": ["ANONYMOUS"]}))
    assert anonymous.value.reason == "AnonymousSuperUser"
    with pytest.raises(SpecError, match="needs a listener with authentication"):   # never ANONYMOUS as super
        listeners.broker_settings(listeners.Authorization(), listeners.parse(spec_with({"name": "a", "port": 9094})),
                                  "", None)


def test_no_listeners_keeps_the_plain_9092_listener():
    assert listeners.validate({}) == []
    spec = cluster_spec({})
    sts = builders.build_brokers("c", NS, spec, security(spec))[-1]
    args = sts["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--listen") + 1] == "0.0.0.0:9092"
    assert not any(a.startswith("listeners=") for a in args)


def broker_config(children) -> dict[str, str]:
    sts = next(c for c in children if c["kind"] == "StatefulSet" and c["metadata"]["name"].endswith("-brokers"))
    args = sts["spec"]["template"]["spec"]["containers"][0]["args"]
    return dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--config")


def test_internal_listeners_render_kafka_settings_the_broker_accepts():
    spec = spec_with({"name": "plain", "port": 9092}, {"name": "scram", "port": 9094, "authentication": SCRAM},
                     authorization={"type": "simple", "superUsers": ["alice", "User:CN=ops"]})
    children = planned("c", NS, spec)
    config = broker_config(children)
    assert config["listeners"] == "REPLICATION://0.0.0.0:9091,PLAIN://0.0.0.0:9092,SCRAM://0.0.0.0:9094"
    assert config["advertised.listeners"] == ",".join(
        f"{n}://$(POD_NAME).c-brokers.$(POD_NAMESPACE).svc:{p}" for n, p in
        (("REPLICATION", 9091), ("PLAIN", 9092), ("SCRAM", 9094)))
    # authentication on a listener: replication is mutual TLS, so its port is no back door
    assert config["listener.security.protocol.map"] == "REPLICATION:SSL,PLAIN:PLAINTEXT,SCRAM:SASL_PLAINTEXT"
    assert config["inter.broker.listener.name"] == "REPLICATION"
    assert config["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert config["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
    # never the gateway's certificate: its requests run as mapped OdradekUsers, under their ACLs
    assert config["super.users"] == "User:CN=c-broker,O=odradek;User:CN=c-operator,O=odradek;User:alice;User:CN=ops"
    assert "ANONYMOUS" not in config["super.users"] and "gateway" not in config["super.users"]
    # replication: mutual TLS required on its own listener (Kafka's per-listener key)
    assert config["listener.name.replication.ssl.client.auth"] == "required"
    # without TLS material nor authorization (no TLS, no authentication) replication is plaintext
    plain = broker_config(planned("c", NS, spec_with({"name": "plain", "port": 9092})))
    assert "super.users" not in plain and plain["listener.security.protocol.map"].startswith("REPLICATION:PLAINTEXT")
    settings = {k: v.replace("$(POD_NAME)", "c-brokers-0").replace("$(POD_NAMESPACE)", NS) for k, v in config.items()}
    parse_broker_settings(settings)  # the broker's own registry accepts every key and value
    headless, bootstrap = (c for c in children if c["kind"] == "Service" and c["metadata"]["name"] in
                           ("c-brokers", "c-bootstrap"))
    assert [p["port"] for p in bootstrap["spec"]["ports"]] == [9091, 9092, 9094]
    assert [p["port"] for p in headless["spec"]["ports"]] == [9091, 9092, 9094, 9093]
    assert builders.bootstrap_servers("c", NS, cluster_spec(spec)) == "c-bootstrap.data.svc:9092"


def test_protocols_follow_tls_and_authentication():
    got = [li.protocol for li in listeners.parse(spec_with(
        {"name": "a", "port": 9100}, {"name": "b", "port": 9101, "tls": True},
        {"name": "c", "port": 9102, "authentication": SCRAM},
        {"name": "d", "port": 9103, "tls": True, "authentication": SCRAM},
        {"name": "e", "port": 9104, "tls": True, "authentication": {"type": "tls"}}))]
    assert got == ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", "SSL"]


def test_tls_material_sets_ssl_keys_replication_over_mutual_tls_and_the_principals():
    tls = listeners.BrokerTls({"ssl.keystore.location": "/k.pem", "ssl.truststore.location": "/ca.pem"},
                              "User:CN=c-brokers", ("User:CN=c-operator",))
    specs = listeners.parse(spec_with({"name": "tls", "port": 9094, "tls": True, "authentication": SCRAM},
                                      {"name": "open", "port": 9095, "tls": True}))
    out = listeners.broker_settings(cluster_spec({"authorization": {"type": "simple"}, "listeners": [
        {"name": "tls", "port": 9094, "authentication": SCRAM}]}).authorization, specs, "", tls)
    assert out["listener.security.protocol.map"] == "REPLICATION:SSL,TLS:SASL_SSL,OPEN:SSL"
    # per listener (Kafka's listener.name.<l>.ssl.client.auth): replication is mutual TLS, the
    # client listeners keep their own (SASL_SSL clients log in with SASL, send no certificate)
    assert out["listener.name.replication.ssl.client.auth"] == "required"
    assert out["listener.name.tls.ssl.client.auth"] == "none" and out["listener.name.open.ssl.client.auth"] == "none"
    assert out["ssl.client.auth"] == "requested"  # broker-wide, for brokers reading no per-listener key
    assert out["super.users"] == "User:CN=c-brokers;User:CN=c-operator"
    assert out["ssl.keystore.location"] == "/k.pem" and "advertised.listeners" not in out
    mtls = listeners.parse(spec_with({"name": "mtls", "port": 9094, "tls": True, "authentication": {"type": "tls"}},
                                     {"name": "scram", "port": 9095, "tls": True, "authentication": SCRAM}))
    mixed = listeners.broker_settings(None, mtls, "", tls)
    assert (mixed["listener.name.mtls.ssl.client.auth"], mixed["listener.name.scram.ssl.client.auth"],
            mixed["listener.name.replication.ssl.client.auth"]) == ("required", "none", "required")
    assert listeners.broker_settings(None, mtls[:1], "", tls)["ssl.client.auth"] == "required"
    parse_broker_settings(mixed)   # the broker's registry takes the per-listener keys


def nodeport_service(name, node_port):
    return {"metadata": {"name": name}, "spec": {"ports": [{"port": 9094, "nodePort": node_port}]}}


def test_external_nodeport_listener_services_table_and_init_container(tmp_path):
    spec = spec_with({"name": "tls", "port": 9093 + 1, "authentication": SCRAM},
                     {"name": "ext", "port": 9095, "type": "nodeport", "authentication": SCRAM})
    specs = listeners.validate(spec)
    services = builders.build_listener_services("c", NS, cluster_spec(spec))
    assert [(s["metadata"]["name"], s["spec"]["type"]) for s in services] == [
        ("c-ext-bootstrap", "NodePort"), ("c-brokers-0-ext", "NodePort"), ("c-brokers-1-ext", "NodePort"),
        ("c-brokers-2-ext", "NodePort")]
    assert services[2]["spec"]["selector"]["statefulset.kubernetes.io/pod-name"] == "c-brokers-1"
    live = {s["metadata"]["name"]: nodeport_service(s["metadata"]["name"], 31000 + i) for i, s in enumerate(services)}
    external = cluster_plan.external_addresses("c", specs, 3, live)
    assert external == {("ext", 0): "{host_ip}:31001", ("ext", 1): "{host_ip}:31002", ("ext", 2): "{host_ip}:31003"}
    children = planned("c", NS, spec, external=external)
    table = children[0]["data"][listeners.ADVERTISED_TABLE]
    assert json.loads(table)["1"] == ("REPLICATION://c-brokers-1.c-brokers.data.svc:9091,"
                                      "TLS://c-brokers-1.c-brokers.data.svc:9094,EXT://{host_ip}:31002")
    assert "advertised.listeners" not in broker_config(children)
    sts = children[-1]
    pod = sts["spec"]["template"]["spec"]
    assert "@/etc/odradek/advertised/broker.args" in pod["containers"][0]["args"]
    init = pod["initContainers"][0]
    assert init["args"][:2] == ["operator", "advertise"]
    assert {e["name"] for e in init["env"]} == {"BROKER_ID", "HOST_IP"}
    # the init container's program, then the broker's own argument parser reading the file
    (tmp_path / "table.json").write_text(table)
    out = tmp_path / "broker.args"
    assert listeners.main(["--ordinal", "2", "--host-ip", "10.231.0.2", "--table", str(tmp_path / "table.json"),
                           "--output", str(out)]) == 0
    from odradek.broker.cli import parse_args
    config = parse_args(["--id", "2", "--data-dir", str(tmp_path), "--zookeeper", "z:2181", f"@{out}",
                         "--config", "listeners=REPLICATION://0.0.0.0:9091,TLS://0.0.0.0:9094,EXT://0.0.0.0:9095",
                         "--config", "listener.security.protocol.map=REPLICATION:PLAINTEXT,TLS:SASL_PLAINTEXT,"
                                     "EXT:SASL_PLAINTEXT"])
    assert config.advertised_listeners.endswith("EXT://10.231.0.2:31003")
    assert listeners.main(["--ordinal", "7", "--host-ip", "1.2.3.4", "--table", str(tmp_path / "table.json"),
                           "--output", str(out)]) == 1


def test_load_balancer_address_or_the_service_name_until_known():
    li = listeners.parse(spec_with({"name": "lb", "port": 9095, "type": "loadbalancer"}))[0]
    pending = {"spec": {"ports": [{"port": 9095}]}, "status": {}}
    assert listeners.external_address(li, pending) is None
    ready = {"spec": {"ports": [{"port": 9095}]}, "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}}
    assert listeners.external_address(li, ready) == "203.0.113.7:9095"
    spec = spec_with({"name": "lb", "port": 9095, "type": "loadbalancer"})
    spec = cluster_spec(spec)
    table = json.loads(builders.build_config_map("c", NS, spec, {("lb", 0): "203.0.113.7:9095"})
                       ["data"][listeners.ADVERTISED_TABLE])
    assert table["0"].endswith("LB://203.0.113.7:9095")
    assert table["1"].endswith("LB://c-brokers-1-lb.data.svc:9095")
    # a load balancer's address reaching the brokers restarts them; node ports do not change
    assert builders.config_hash("c", NS, spec, {("lb", 0): "203.0.113.7:9095"}) != builders.config_hash("c", NS, spec)
    assert builders.config_hash("c", NS, spec, {("lb", 0): "{host_ip}:31000"}) == builders.config_hash("c", NS, spec)
    assert listeners.bootstrap_address("c", NS, li, ready, []) == "203.0.113.7:9095"
    node = listeners.parse(spec_with({"name": "np", "port": 9096, "type": "nodeport"}))[0]
    assert listeners.bootstrap_address("c", NS, node, nodeport_service("b", 30500), ["10.0.0.2", "10.0.0.1"]) == \
        "10.0.0.1:30500,10.0.0.2:30500"


def test_config_hash_of_a_cluster_without_listeners_is_unchanged():
    spec = {"brokers": {"config": {"retention.ms": 1}}}
    plain = builders.config_hash("c", NS, cluster_spec(spec))
    assert plain == builders.config_hash("c", NS, cluster_spec({**spec, "listeners": None}))
    assert plain != builders.config_hash("c", NS, cluster_spec({**spec, "listeners": [{"name": "a", "port": 9094}]}))


def test_gateway_uses_the_replication_listener():
    from odradek.gateway.settings import from_args
    spec = spec_with({"name": "scram", "port": 9094, "authentication": SCRAM}, gateway={"replicas": 1})
    dep = next(c for c in planned("c", NS, spec) if c["kind"] == "Deployment" and c["metadata"]["name"] == "c-gateway")
    settings, _ = from_args(dep["spec"]["template"]["spec"]["containers"][0]["args"][1:])
    assert settings.bootstrap_servers == "c-bootstrap.data.svc:9091"


def test_certificate_names_of_external_tls_listeners():
    specs = listeners.parse(spec_with({"name": "np", "port": 9094, "type": "nodeport", "tls": True},
                                      {"name": "lb", "port": 9095, "type": "loadbalancer", "tls": True},
                                      {"name": "plain", "port": 9096, "type": "nodeport"}))
    external = {("lb", 0): "203.0.113.7:9095", ("lb", 1): None}
    names = listeners.certificate_names(specs, 2, ["10.0.0.2", "10.0.0.1", "10.0.0.2"], external)
    # every node address on every broker (a bootstrap connection reaches any broker via any node)
    assert names == {0: ["10.0.0.1", "10.0.0.2", "203.0.113.7"], 1: ["10.0.0.1", "10.0.0.2"]}
    assert listeners.certificate_names(specs[2:], 2, ["10.0.0.1"], {}) == {}  # no TLS: no names


def test_scaling_changes_no_existing_brokers_revision_and_an_own_address_only_its_own():
    """The brokers' template: the shared hash and each broker's own (load balancer, certificate);
    adding broker 3 (its Service's address, its certificate) leaves brokers 0-2's untouched."""
    spec = cluster_spec(spec_with({"name": "lb", "port": 9095, "type": "loadbalancer", "tls": True}))
    versions = {**VERSIONS, **{certs.broker_version_key(i): f"cert-{i}" for i in range(4)}}
    plan = security(spec, versions=versions)
    addresses = {("lb", i): f"203.0.113.{i}:9095" for i in range(4)}

    def template(replicas, external):
        sts = next(o for o in builders.build_brokers("c", NS, spec, plan, replicas, external)
                   if o["kind"] == "StatefulSet")
        notes = sts["spec"]["template"]["metadata"]["annotations"]
        return notes[builders.CONFIG_HASH_ANNOTATION], json.loads(notes[revisions.BROKER_HASHES_ANNOTATION])

    shared, three = template(3, {k: v for k, v in addresses.items() if k[1] < 3})
    shared4, four = template(4, addresses)
    assert shared4 == shared and set(four) == {"0", "1", "2", "3"}
    assert {k: four[k] for k in three} == three
    # broker 1's load balancer moves (or gets its address after broker 1 started): only its entry
    _, moved = template(3, {**addresses, ("lb", 1): "198.51.100.1:9095"})
    assert [k for k in three if moved[k] != three[k]] == ["1"]
    _, pending = template(3, {**addresses, ("lb", 1): None})
    assert [k for k in three if pending[k] != three[k]] == ["1"]
    # a node port (the node's address filled in by each pod) is no address of its own to restart for
    assert template(3, {**addresses, ("lb", 1): "{host_ip}:31000"})[1] == pending
