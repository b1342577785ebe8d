"""The controller's users admin (OdradekUser's credentials, ACLs, quotas) against a real
ZooKeeper: Kafka's znodes, idempotent syncs, the whole spec checked before any write."""

from __future__ import annotations

import json

import pytest

from odradek.broker.security.scram_store import ScramStore
from odradek.broker.zk.configs import EntityConfigs
from odradek.broker.zk.znodes import Znodes
from odradek.cluster.control_plane_users import ScramPassword, UserAcl, UserSpec
from odradek.errors import ErrorCode, KafkaError

ALICE = "User:alice"


def spec(**kw) -> UserSpec:
    base = dict(principal=ALICE, scram=ScramPassword("alice-secret"),
                acls=(UserAcl("topic", "orders", "literal", "Read"), UserAcl("Topic", "orders", "LITERAL", "WRITE"),
                      UserAcl("group", "app-", "prefix", "read")),
                quotas={"producer_byte_rate": 1048576})
    return UserSpec(**{**base, **kw})


def test_sync_writes_kafka_znodes_and_is_idempotent(stores, zk):
    store = stores()
    state = store.user_call(lambda u: u.sync("alice", spec()))
    assert set(state.changed) == {"scram", "acls", "quotas"}
    assert state.scram == {"SCRAM-SHA-512": 4096} and state.quotas == {"producer_byte_rate": 1048576.0}
    assert [(a.resource_type, a.name, a.pattern_type, a.operation) for a in state.acls] == [
        ("TOPIC", "orders", "LITERAL", "READ"), ("TOPIC", "orders", "LITERAL", "WRITE"),
        ("GROUP", "app-", "PREFIXED", "READ")]
    config = json.loads(zk.get("/config/users/alice")[0])["config"]
    assert config["producer_byte_rate"] == "1048576" and config["SCRAM-SHA-512"].endswith("iterations=4096")
    assert ScramStore(EntityConfigs(Znodes(lambda: zk))).verify("alice", "SCRAM-SHA-512", "alice-secret")
    acls = json.loads(zk.get("/kafka-acl/Topic/orders")[0])["acls"]
    assert {a["operation"] for a in acls} == {"Read", "Write"} and acls[0]["principal"] == ALICE
    assert json.loads(zk.get("/kafka-acl-extended/prefixed/Group/app-")[0])["acls"][0]["operation"] == "Read"
    assert zk.get_children("/kafka-acl-changes") and zk.get_children("/config/changes")

    again = store.user_call(lambda u: u.sync("alice", spec()))
    assert again.changed == ()

    # another principal's ACL on the same resource is left alone; dropped ACLs and quotas go
    store.user_call(lambda u: u.sync("bob", UserSpec("User:bob", acls=(UserAcl("topic", "orders", operation="Read"),))))
    state = store.user_call(lambda u: u.sync("alice", spec(acls=(UserAcl("topic", "orders", operation="Read"),),
                                                          quotas={}, scram=ScramPassword("new-secret"))))
    assert set(state.changed) == {"scram", "acls", "quotas"} and state.quotas == {}
    assert not zk.exists("/kafka-acl-extended/prefixed/Group/app-")
    principals = {(a["principal"], a["operation"]) for a in json.loads(zk.get("/kafka-acl/Topic/orders")[0])["acls"]}
    assert principals == {(ALICE, "Read"), ("User:bob", "Read")}
    assert ScramStore(EntityConfigs(Znodes(lambda: zk))).verify("alice", "SCRAM-SHA-512", "new-secret")

    gone = store.user_call(lambda u: u.delete("alice"))
    assert (gone.scram, gone.acls, gone.quotas) == ({}, (), {})
    assert json.loads(zk.get("/config/users/alice")[0])["config"] == {}   # Kafka keeps the znode too
    assert {a["principal"] for a in json.loads(zk.get("/kafka-acl/Topic/orders")[0])["acls"]} == {"User:bob"}


@pytest.mark.parametrize("bad, message", [
    (UserAcl("topic", "orders", operation="Fly"), "unknown ACL operation 'Fly'"),
    (UserAcl("queue", "orders", operation="Read"), "unknown ACL resource type 'queue'"),
    (UserAcl("group", "g", operation="Write"), "operation Write is not valid for a Group resource"),
    (UserAcl("cluster", "other", operation="Alter"), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (UserAcl("topic", "orders", pattern_type="match", operation="Read"), "unknown ACL pattern type 'match'"),
])
def test_a_bad_acl_changes_nothing(stores, zk, bad, message):
    store = stores()
    with pytest.raises(KafkaError) as e:
        store.user_call(lambda u: u.sync("carol", spec(principal="User:carol", acls=spec().acls + (bad,))))
    assert e.value.code == ErrorCode.invalid_request and message in e.value.message
    assert not zk.exists("/config/users/carol") and not zk.exists("/kafka-acl/Topic/orders")


def test_tls_user_names_are_sanitized_and_have_no_credential(stores, zk):
    store = stores()
    state = store.user_call(lambda u: u.sync("CN=dave", UserSpec("User:CN=dave", quotas={
        "request_percentage": 50, "controller_mutation_rate": 2})))
    assert state.scram == {} and state.quotas == {"request_percentage": 50.0, "controller_mutation_rate": 2.0}
    assert json.loads(zk.get("/config/users/CN%3Ddave")[0])["config"] == {"request_percentage": "50.0",
                                                                        "controller_mutation_rate": "2.0"}
    assert json.loads(zk.get("/config/changes/" + max(zk.get_children("/config/changes")))[0]) == {
        "version": 2, "entity_path": "users/CN%3Ddave"}
