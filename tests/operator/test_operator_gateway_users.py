"""The gateway is never a super user: ``gateway.users`` maps its generated tokens to OdradekUsers
(tls), whose certificates it logs in with on the replication listener (gateway_security)."""

from __future__ import annotations

import base64
import json

import pytest

from odradek.gateway.auth import Tokens
from odradek.operator import cluster_plan, gateway_security
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
