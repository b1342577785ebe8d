"""The schema registry under the brokers' ACLs (docs/schema-registry.md, "Rights"): a token mapped
to a Kafka principal without rights of its own is decided as Confluent's topic-based authorizer
decides, from that principal's operations on the subject's topic as the brokers report them
(READ to read, WRITE to register or delete); refusals answer 403 with 40301; lists show only what
it may read; a revoked ACL takes effect once the gateway's short cache of those answers expires.
On the security tests' shared secured cluster, with a gateway of its own tokens."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
                                   ResourceType)

from odradek.dev.waiting import wait_until
from odradek.gateway.registry.kafka_rights import TTL_S
from tests.security.conftest import PLAIN_USERS, Secured
from tests.support.gateway import GatewayProcess, write_tokens

TOKENS = [
    {"token": "ops-token", "name": "ops", "topics": {"*": "rw"}, "admin": True},   # the gateway's principal
    {"token": "paula-token", "name": "paula-http", "kafka_username": "paula", "kafka_password": PLAIN_USERS["paula"]},
]


AVRO = "application/vnd.kafka.avro.v2+json"


def _acl(topic: str, who: str, op) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, who, "*", op, AclPermissionType.ALLOW)


def _on_cluster(who: str, op, permission) -> AclBinding:
    return AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, who, "*", op, permission)


def _filter(binding: AclBinding) -> AclBindingFilter:
    return AclBindingFilter(binding.restype, binding.name, binding.resource_pattern_type, binding.principal,
                            binding.host, binding.operation, binding.permission_type)


@pytest.fixture(scope="module")
def topics(secured: Secured):
    """Topic A, which paula may read and write; topic B, whose ACLs name only ana (so paula,
    whom they do not name, may do nothing with it); the cluster open to all but paula's
    ALTER_CONFIGS (she is no super user), for this module's time only."""
    a, b = f"sra-{uuid.uuid4().hex[:8]}", f"srb-{uuid.uuid4().hex[:8]}"
    for name in (a, b):
        secured.cluster.create_topic(name, partitions=1, replication_factor=3)
    admin = secured.cluster.admin()
    grants = [_acl(a, "User:paula", AclOperation.READ), _acl(a, "User:paula", AclOperation.WRITE),
              _acl(b, "User:ana", AclOperation.WRITE),
              _on_cluster("User:*", AclOperation.ALL, AclPermissionType.ALLOW),
              _on_cluster("User:paula", AclOperation.ALTER_CONFIGS, AclPermissionType.DENY)]
    for future in admin.create_acls(grants).values():
        future.result(timeout=60)
    yield a, b
    for future in admin.delete_acls([_filter(g) for g in grants]).values():
        future.result(timeout=60)


@pytest.fixture(scope="module")
def gateway(secured: Secured, tmp_path_factory) -> GatewayProcess:
    tmp = tmp_path_factory.mktemp("gw-registry-acls")
    (tmp / "admin.pw").write_text(PLAIN_USERS["admin"] + "\n")
    g = GatewayProcess(secured.bootstrap("SECURE"), tmp / "gateway.log", "--auth-file",
                       str(write_tokens(tmp / "tokens.json", TOKENS)),
                       "--kafka-security-protocol", "SASL_SSL", "--kafka-sasl-mechanism", "PLAIN",
                       "--kafka-sasl-username", "admin", "--kafka-sasl-password-file", str(tmp / "admin.pw"),
                       "--kafka-ssl-ca-location", secured.ca_file)
    yield g
    assert g.stop(), g.log.read_text()[-3000:]


def _client(gateway: GatewayProcess, token: str) -> httpx.Client:
    return httpx.Client(base_url=gateway.url, timeout=60, headers={"authorization": f"Bearer {token}"})


def _schema(name: str) -> dict:
    return {"schema": json.dumps({"type": "record", "name": name, "fields": [{"name": "f", "type": "long"}]})}


def _ok(answer: httpx.Response) -> httpx.Response | None:
    return answer if answer.status_code == 200 else None


def _denied(op: str, subject: str) -> tuple:
    return 403, {"error_code": 40301, "message": f"User is denied operation {op} on Subject: {subject}"}


def test_a_mapped_user_registers_and_reads_only_the_subjects_of_its_topics(gateway, topics):
    a, b = topics
    with _client(gateway, "paula-token") as paula, _client(gateway, "ops-token") as ops:
        b_id = ops.post(f"/subjects/{b}-value/versions", json=_schema("OnB")).json()["id"]   # ops: token rights
        registered = wait_until(lambda: _ok(paula.post(f"/subjects/{a}-value/versions", json=_schema("OnA"))),
                                30 + TTL_S, "the brokers to let paula register on A", interval=0.5)
        assert paula.get(f"/subjects/{a}-value/versions").json() == [1]
        assert paula.get(f"/schemas/ids/{registered.json()['id']}").status_code == 200
        for topic, status in ((a, 200), (b, 403)):   # the REST Proxy's avro format: the same rights
            produced = paula.post(f"/topics/{topic}", headers={"content-type": AVRO}, json={
                "value_schema": _schema("OnA")["schema"], "records": [{"value": {"f": 1}}]})
            assert produced.status_code == status, produced.text
        assert produced.json()["error_code"] == 40301      # the brokers refuse B before its subject is looked at

        refused = paula.post(f"/subjects/{b}-value/versions", json=_schema("OnB2"))
        assert (refused.status_code, refused.json()) == _denied("Write", f"{b}-value")
        unread = paula.get(f"/subjects/{b}-value/versions")
        assert (unread.status_code, unread.json()) == _denied("Read", f"{b}-value")
        assert paula.get(f"/schemas/ids/{b_id}").json()["error_code"] == 40301    # B's schema, by id
        assert paula.delete(f"/subjects/{b}-value").json()["error_code"] == 40301

        listed = paula.get("/subjects").json()
        assert f"{a}-value" in listed and f"{b}-value" not in listed
        assert f"{b}-value" in ops.get("/subjects").json()
        assert paula.get(f"/schemas/ids/{b_id}/subjects").json() == []
        # what concerns no topic is the super user's (ALTER_CONFIGS on the cluster): paula is none
        assert paula.put("/config", json={"compatibility": "NONE"}).json()["error_code"] == 40301
        record_named = paula.post("/subjects/com.example.Thing/versions", json=_schema("Thing"))
        assert (record_named.status_code, record_named.json()) == _denied("Write", "com.example.Thing")


def test_a_revoked_acl_takes_effect_once_the_cache_expires(secured: Secured, gateway, topics):
    a, _ = topics
    with _client(gateway, "paula-token") as paula:
        wait_until(lambda: paula.get(f"/subjects/{a}-key/versions").status_code == 404, 30 + TTL_S,
                   "paula to be let read A's subjects (none under -key: 40401)", interval=0.5)
        admin = secured.cluster.admin()
        revoke = AclBindingFilter(ResourceType.TOPIC, a, ResourcePatternType.LITERAL, "User:paula", "*",
                                  AclOperation.READ, AclPermissionType.ALLOW)
        for future in admin.delete_acls([revoke]).values():
            future.result(timeout=60)
        wait_until(lambda: paula.get(f"/subjects/{a}-key/versions").status_code == 403, 30 + TTL_S,
                   "the revoked READ to refuse paula", interval=0.5)
        assert paula.get(f"/subjects/{a}-key/versions").json() == _denied("Read", f"{a}-key")[1]
        assert f"{a}-value" not in paula.get("/subjects").json()
