"""The pure part of OdradekUser (operator/odradek/operator/users.py): the spec in Kafka's terms,
the checks a schema cannot make, the Secret."""

from __future__ import annotations

import base64

import pytest

from odradek.cluster.control_plane_users import UserAcl
from odradek.operator import users
from odradek.operator.validation import SpecError


def test_spec_becomes_one_acl_per_operation_and_kafka_quota_keys():
    spec = {"authentication": {"type": "scram-sha-512"}, "authorization": {"type": "simple", "acls": [
        {"resource": {"type": "topic", "name": "orders-", "patternType": "prefix"}, "operations": ["Read", "Write"],
         "host": "10.0.0.1"},
        {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"], "type": "deny"}]},
        "quotas": {"producerByteRate": 1024, "consumerByteRate": 2048, "controllerMutationRate": 2.5}}
    req = users.user_request("alice", spec, "pw")
    assert req.principal == "User:alice" and req.scram.password == "pw" and req.scram.mechanism == "SCRAM-SHA-512"
    assert req.acls == (UserAcl("topic", "orders-", "PREFIXED", "Read", "10.0.0.1", "ALLOW"),
                        UserAcl("topic", "orders-", "PREFIXED", "Write", "10.0.0.1", "ALLOW"),
                        UserAcl("cluster", "kafka-cluster", "LITERAL", "IdempotentWrite", "*", "DENY"))
    assert req.quotas == {"producer_byte_rate": 1024, "consumer_byte_rate": 2048, "controller_mutation_rate": 2.5}


def test_tls_users_are_named_by_their_subject():
    assert users.identity("bob", {"authentication": {"type": "tls"}}) == ("CN=bob", "User:CN=bob")
    assert users.identity("bob", {}) == ("bob", "User:bob")
    assert users.user_request("bob", {"authentication": {"type": "tls"}}, None).scram is None


@pytest.mark.parametrize("spec, message", [
    ({"authentication": {"type": "tls", "password": {"valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}}},
     "authentication.password applies only to type scram-sha-512"),
    ({"authorization": {"type": "opa"}}, "authorization.type 'opa' is not supported"),
])
def test_invalid_specs(spec, message):
    with pytest.raises(SpecError, match=message):
        users.validate_user(spec)


@pytest.mark.parametrize("acl, message", [
    ({"resource": {"type": "topic"}, "operations": ["Read"]}, r"authorization.acls\[0\].resource.name is required"),
    ({"resource": {"type": "topic", "name": "t"}, "operations": []}, "name at least one operation"),
])
def test_incomplete_acls(acl, message):
    with pytest.raises(SpecError, match=message):
        users.user_request("a", {"authorization": {"type": "simple", "acls": [acl]}}, None)


def test_secret_and_jaas_config():
    jaas = users.jaas_config("alice", 'p"w\\')
    assert jaas == ('org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
                    'password="p\\"w\\\\";')
    secret = users.build_secret("alice", "ns", "prod", {"password": "pw", "sasl.jaas.config": jaas})
    assert secret["metadata"]["labels"]["odradek.dev/cluster"] == "prod"
    assert base64.b64decode(secret["data"]["password"]) == b"pw"
    assert len(users.generate_password()) == 32 and users.generate_password().isalnum()


def test_every_user_quota_key_has_its_spec_field_in_the_crd():
    """The quota fields map onto the registry's user quota keys (odradek.config.quotas), one
    each, and the CRD offers exactly those fields."""
    from pathlib import Path

    import yaml

    from odradek.config.quotas import USER_CLIENT_QUOTAS
    assert sorted(users.QUOTAS.values()) == sorted(USER_CLIENT_QUOTAS)
    crd = yaml.safe_load((Path(__file__).resolve().parents[2] / "crds/odradekusers.odradek.dev.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert sorted(spec["properties"]["quotas"]["properties"]) == sorted(users.QUOTAS)
