"""The gateway is never a super user: ``gateway.users`` maps its generated tokens to OdradekUsers
(tls), whose certificates it logs in with on the replication listener (gateway_security); its own
principal gets exactly the schema registry's ACLs on a cluster with authorization (gateway_acls)."""

from __future__ import annotations

import base64
import json

import pytest

from odradek.cluster.control_plane_users import UserAcl
from odradek.gateway.auth import Tokens
from odradek.gateway.settings import GatewaySettings
from odradek.operator import admin, cluster_plan, gateway_acls, gateway_security
from odradek.operator.rolling import ScaleDecision
from odradek.operator.validation import SpecError
from tests.operator.plans import VERSIONS, cluster_spec
from tests.operator.test_operator_listeners import broker_config

NS = "data"
TLS_LISTENER = {"listeners": [{"name": "tls", "port": 9092, "tls": True, "authentication": {"type": "scram-sha-512"}}],
                "authorization": {"type": "simple"}}


def raw(users):
    return {**TLS_LISTENER, "gateway": {"replicas": 1, "users": users}}


def user(name, kind="tls", cluster="c", ready=True):
    return {"metadata": {"name": name, "namespace": NS},
            "spec": {"cluster": cluster, "authentication": {"type": kind}},
            "status": {"secret": name} if ready else {}}


def plan(spec_raw, found, tokens=None):
    spec = cluster_spec(spec_raw)
    observed = cluster_plan.Observed(ScaleDecision(spec.brokers.replicas, True, ""), gateway_users=found,
                                     gateway_tokens=tokens)
    first = cluster_plan.plan_prerequisites("c", NS, spec, observed)
    return first, cluster_plan.plan_children("c", NS, spec, observed, VERSIONS, {})


def tokens_of(first):
    secret = next(s for s in first.secrets if s["metadata"]["name"] == "c-gateway-tokens")
    return secret, json.loads(base64.b64decode(secret["data"]["credentials"]))["tokens"]


def deployment(second):
    return next(o for o in second.children if o["kind"] == "Deployment" and o["metadata"]["name"] == "c-gateway")


def test_the_gateways_principal_is_no_super_user():
    _, second = plan(raw(["alice"]), {"alice": user("alice")})
    supers = broker_config(second.children)["super.users"].split(";")
    assert supers == ["User:CN=c-broker,O=odradek", "User:CN=c-operator,O=odradek"]


def test_one_token_per_mapped_user_on_its_certificate_kept_across_reconciles(tmp_path):
    found = {"alice": user("alice"), "bob": user("bob")}
    first, second = plan(raw(["bob", "alice"]), found)
    secret, tokens = tokens_of(first)
    assert [(t["name"], t["kafka_ssl_certificate_location"], t["kafka_ssl_key_location"]) for t in tokens] == [
        ("alice", "/etc/odradek/gateway-users/alice/user.crt", "/etc/odradek/gateway-users/alice/user.key"),
        ("bob", "/etc/odradek/gateway-users/bob/user.crt", "/etc/odradek/gateway-users/bob/user.key")]
    assert not any(t.get("admin") for t in tokens) and all(len(t["token"]) >= 32 for t in tokens)
    # the gateway's own parser takes the file under the protocol it connects with (SSL to 9091)
    path = tmp_path / "credentials"
    path.write_bytes(base64.b64decode(secret["data"]["credentials"]))
    mapped = Tokens(str(path), "SSL").principal(tokens[0]["token"])
    assert mapped.name == "alice" and mapped.kafka.certificate == "/etc/odradek/gateway-users/alice/user.crt"
    # each user's Secret is mounted where its token points
    pod = deployment(second)["spec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert {secrets[n]: mounts[n] for n in mounts if mounts[n].startswith("/etc/odradek/gateway-users/")} == {
        "alice": "/etc/odradek/gateway-users/alice", "bob": "/etc/odradek/gateway-users/bob"}
    assert "--kafka-security-protocol" in pod["containers"][0]["args"]
    assert second.gateway_refused is None
    # stable: a reconcile over the applied Secret keeps every token; a user dropped loses its own
    again, _ = plan(raw(["alice", "bob"]), found, tokens=secret)
    assert tokens_of(again)[0]["data"] == secret["data"]
    fewer, _ = plan(raw(["alice"]), found, tokens=secret)
    assert tokens_of(fewer)[1] == tokens[:1]


def test_a_mapping_that_cannot_work_is_left_out_with_its_reason():
    found = {"alice": user("alice"), "sam": user("sam", kind="scram-sha-512"), "other": user("other", cluster="d"),
             "new": user("new", ready=False), "ghost": None}
    first, second = plan(raw(["alice", "sam", "other", "new", "ghost"]), found)
    assert [t["name"] for t in tokens_of(first)[1]] == ["alice"]
    pod = deployment(second)["spec"]["template"]["spec"]
    assert {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v} >= {"alice"}
    assert not {"sam", "other", "new", "ghost"} & {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    why = second.gateway_refused
    assert "OdradekUser ghost does not exist" in why and "sam has no tls authentication" in why
    assert "other belongs to cluster 'd'" in why and "new is not Ready yet" in why
    assert second.gateway_pending == ("new",)   # the one refusal that passes by itself
    assert plan(raw(["alice", "ghost"]), found)[1].gateway_pending == ()
    # every user refused: no token at all (never a fallback admin token)
    first, _ = plan(raw(["sam"]), found)
    assert tokens_of(first)[1] == []


@pytest.mark.parametrize("spec_raw, message", [
    ({"gateway": {"replicas": 1, "users": ["alice"]}}, "needs a TLS listener"),
    ({**TLS_LISTENER, "gateway": {"replicas": 1, "users": ["alice"], "authSecret": "mine"}}, "no authSecret"),
    ({**TLS_LISTENER, "gateway": {"replicas": 1, "users": ["alice", "alice"]}}, "named twice"),
])
def test_gateway_users_the_spec_cannot_carry_are_invalid(spec_raw, message):
    with pytest.raises(SpecError, match=message):
        cluster_spec(spec_raw)


def test_without_users_the_admin_token_is_the_gateways_own_unprivileged_principal():
    first, second = plan({**TLS_LISTENER, "gateway": {"replicas": 1}}, {})
    assert [(t["name"], t["admin"]) for t in tokens_of(first)[1]] == [("admin", True)]
    assert "gateway" not in broker_config(second.children)["super.users"]
    assert gateway_security.refusal({}) is None


# -- the schema registry's rights (gateway_acls) ---------------------------------------------------
class UsersRoute:
    """The controller's users route as the operator sees it: a whole-user sync per name."""

    def __init__(self, acls=(), quotas=None):
        self.users = {}
        self.puts = 0
        self.start = ([a.to_json() for a in acls], quotas or {})

    def describe_user(self, name, principal=None):
        acls, quotas = self.users.get(name, self.start)
        return {"name": name, "principal": principal, "scram": {}, "acls": acls, "quotas": quotas}

    def put_user(self, name, spec):
        self.puts += 1
        self.users[name] = ([a.to_json() for a in spec.acls], dict(spec.quotas))
        return {"changed": ["acls"]}


def _acls(route, name="CN=c-gateway,O=odradek"):
    return {UserAcl(**a) for a in route.describe_user(name)["acls"]}


def test_the_registry_topic_and_group_are_the_gateways_defaults():
    assert (gateway_acls.REGISTRY_TOPIC, gateway_acls.REGISTRY_GROUP) == (
        GatewaySettings.schema_registry_topic, GatewaySettings.schema_registry_group)
    assert gateway_acls.user_name("c") == "CN=c-gateway,O=odradek"


def test_the_gateways_principal_gets_the_registrys_acls_once_and_keeps_an_administrators_own():
    theirs = UserAcl("TOPIC", "audit", "LITERAL", "READ")
    route = UsersRoute([theirs], {"producer_byte_rate": 1024.0})
    granted = gateway_acls.sync(lambda: route, "c", cluster_spec(raw([])), {})
    assert granted == gateway_acls.GrantOutcome("CN=c-gateway,O=odradek")
    assert _acls(route) == {theirs, *gateway_acls.registry_acls()}
    assert route.describe_user("CN=c-gateway,O=odradek")["quotas"] == {"producer_byte_rate": 1024.0}
    assert {(a.resource_type, a.name) for a in gateway_acls.registry_acls()} == {
        ("TOPIC", "_schemas"), ("GROUP", "schema-registry"), ("GROUP", "schema-registry-reader")}
    gateway_acls.sync(lambda: route, "c", cluster_spec(raw([])), {gateway_acls.GRANTED: granted.granted})
    assert route.puts == 1     # already granted: nothing written


def test_the_registrys_acls_go_with_the_gateway_and_none_are_asked_for_without_authorization():
    theirs = UserAcl("TOPIC", "audit", "LITERAL", "READ")
    route = UsersRoute([theirs, *gateway_acls.registry_acls()])
    off = {**raw([]), "gateway": {"replicas": 0}}
    gone = gateway_acls.sync(lambda: route, "c", cluster_spec(off), {gateway_acls.GRANTED: "CN=c-gateway,O=odradek"})
    assert gone == gateway_acls.GrantOutcome("") and _acls(route) == {theirs}

    def unreachable():
        raise AssertionError("the controller is not called")
    no_acls = {"gateway": {"replicas": 1}}
    assert gateway_acls.sync(unreachable, "c", cluster_spec(no_acls), {}) == gateway_acls.GrantOutcome(None)


def test_a_controller_not_reachable_yet_is_a_problem_to_look_at_again():
    def unreachable():
        raise admin.Unreachable("no active controller (no controller endpoints)")
    outcome = gateway_acls.sync(unreachable, "c", cluster_spec(raw([])), {})
    assert outcome.granted is None and "no active controller" in outcome.problem
