"""ACLs on the shared secured cluster (conftest.py: authorizer on, ``User:admin`` super user),
with confluent-kafka as the client: CreateAcls / DescribeAcls / DeleteAcls and Kafka's ZooKeeper
layout; each denial's Kafka code; Metadata hiding undescribable topics; a PREFIXED ACL granting
a family of topics; an ACL change enforced by every broker within 1 s.

Every resource here starts with ``acl-`` and carries ACLs (``bert`` may do anything on the
``acl-`` prefix), so ``allow.everyone.if.no.acl.found`` does not apply to them: ``ana`` gets only
what is granted below. The module removes every ACL it made when done."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourcePatternType,
                                   ResourceType)
from kazoo.client import KazooClient
from kio.static.constants import EntityType

from odradek.broker.replication.client import KafkaClient
from odradek.broker.replication.connector import ClientSecurity
from odradek.errors import ErrorCode
from odradek.protocol.codec import Schemas, make
from tests.security.conftest import PLAIN_USERS, Secured

TOPICS = ("acl-ro", "acl-wo", "acl-cfg", "acl-hidden", "acl-fam-1", "acl-fam-2", "acl-late")
LIT, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
OP, ALLOW, DENY = AclOperation, AclPermissionType.ALLOW, AclPermissionType.DENY
GRANTS = [
    AclBinding(ResourceType.TOPIC, "acl-", PREFIXED, "User:bert", "*", OP.ALL, ALLOW),
    AclBinding(ResourceType.GROUP, "acl-", PREFIXED, "User:bert", "*", OP.ALL, ALLOW),
    AclBinding(ResourceType.BROKER, "kafka-cluster", LIT, "User:*", "*", OP.ALL, ALLOW),
    AclBinding(ResourceType.BROKER, "kafka-cluster", LIT, "User:ana", "*", OP.CREATE, DENY),
    AclBinding(ResourceType.TOPIC, "acl-ro", LIT, "User:ana", "*", OP.READ, ALLOW),
    AclBinding(ResourceType.TOPIC, "acl-wo", LIT, "User:ana", "*", OP.WRITE, ALLOW),
    AclBinding(ResourceType.TOPIC, "acl-cfg", LIT, "User:ana", "*", OP.DESCRIBE_CONFIGS, ALLOW),
    AclBinding(ResourceType.TOPIC, "acl-fam-", PREFIXED, "User:ana", "*", OP.WRITE, ALLOW),
    AclBinding(ResourceType.GROUP, "acl-join", LIT, "User:ana", "*", OP.DESCRIBE, ALLOW),
    AclBinding(ResourceType.GROUP, "acl-commit", LIT, "User:ana", "*", OP.READ, ALLOW),
]
EVERYTHING = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, OP.ANY,
                              AclPermissionType.ANY)


def _config(secured: Secured, user: str, **extra) -> dict:
    return {"bootstrap.servers": secured.bootstrap("SECURE"), "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "PLAIN", "sasl.username": user, "sasl.password": PLAIN_USERS[user],
            "ssl.ca.location": secured.ca_file, **extra}


def _wait_all(futures) -> list:
    return [f.result(timeout=60) for f in (futures.values() if isinstance(futures, dict) else futures)]


def _only(futures: dict):
    """The one future of a per-resource dict (the dict must stay as it is: the client resolves
    its futures through it)."""
    return next(iter(futures.values()))


def _code(future) -> int:
    error = future.exception(timeout=60)
    assert error is not None, "expected a refusal"
    return error.args[0].code()


@pytest.fixture(scope="module")
def admin(secured: Secured):
    admin = AdminClient(_config(secured, "admin"))
    _wait_all(admin.create_topics([NewTopic(t, 1, 3) for t in TOPICS]))
    _wait_all(admin.create_acls(GRANTS))
    yield admin
    _wait_all(admin.delete_acls([EVERYTHING]))


@pytest.fixture(scope="module")
def ana(secured: Secured, admin) -> AdminClient:
    return AdminClient(_config(secured, "ana"))


def test_create_describe_delete_acls_and_kafkas_zookeeper_layout(secured: Secured, admin):
    binding = AclBinding(ResourceType.TRANSACTIONAL_ID, "acl-tx", LIT, "User:ana", "10.1.2.3", OP.WRITE, DENY)
    _wait_all(admin.create_acls([binding]))
    only = AclBindingFilter(ResourceType.TRANSACTIONAL_ID, "acl-tx", ResourcePatternType.MATCH, None, None, OP.ANY,
                            AclPermissionType.ANY)
    assert admin.describe_acls(only).result(timeout=60) == [binding]
    described = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, "acl-fam-7", ResourcePatternType.MATCH,
                                                     "User:ana", None, OP.ANY, AclPermissionType.ANY))
    assert described.result(timeout=60) == [GRANTS[7]]  # PREFIXED acl-fam- matches acl-fam-7

    state = json.loads((Path(secured.cluster.data_dir) / "cluster.json").read_text())
    zk = KazooClient(hosts=state["zookeeper"])
    zk.start(timeout=30)
    try:
        root = f"/odradek/{zk.get_children('/odradek')[0]}"
        data, _ = zk.get(f"{root}/kafka-acl/TransactionalId/acl-tx")
        assert json.loads(data) == {"version": 1, "acls": [
            {"principal": "User:ana", "permissionType": "Deny", "operation": "Write", "host": "10.1.2.3"}]}
        data, _ = zk.get(f"{root}/kafka-acl-extended/prefixed/Topic/acl-fam-")
        assert json.loads(data)["acls"] == [
            {"principal": "User:ana", "permissionType": "Allow", "operation": "Write", "host": "*"}]
        changes = [zk.get(f"{root}/kafka-acl-changes/{c}")[0] for c in zk.get_children(f"{root}/kafka-acl-changes")]
        assert b"TRANSACTIONAL_ID:acl-tx" in changes
    finally:
        zk.stop()

    deleted = _wait_all(admin.delete_acls([only]))
    assert deleted == [[binding]]
    assert admin.describe_acls(only).result(timeout=60) == []


def test_each_denial_gets_kafkas_code(secured: Secured, ana):
    topic_denied, group_denied = KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED
    assert _code(ana.create_topics([NewTopic("acl-new", 1, 1)])["acl-new"]) == topic_denied
    assert _code(ana.delete_topics(["acl-ro"])["acl-ro"]) == topic_denied
    assert _code(_only(ana.describe_configs([ConfigResource("topic", "acl-wo")]))) == topic_denied
    assert _only(ana.describe_configs([ConfigResource("topic", "acl-cfg")])).result(timeout=60)
    alter = ConfigResource("topic", "acl-cfg", incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    assert _code(_only(ana.incremental_alter_configs([alter]))) == topic_denied

    errors = []
    producer = Producer(_config(secured, "ana", **{"message.timeout.ms": 20000}))
    producer.produce("acl-ro", b"x", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert errors and errors[0].code() == topic_denied

    assert _consumer_error(secured, "ana-fetch", assign=TopicPartition("acl-wo", 0, 0)) == topic_denied
    assert _consumer_error(secured, "acl-join", subscribe="acl-ro") == group_denied

    committer = Consumer(_config(secured, "ana", **{"group.id": "acl-commit", "enable.auto.commit": False}))
    try:
        committed = committer.commit(offsets=[TopicPartition("acl-wo", 0, 0)], asynchronous=False)
        error = committed[0].error
    except KafkaException as e:
        error = e.args[0]
    finally:
        committer.close()
    assert error is not None and error.code() == topic_denied


def _consumer_error(secured: Secured, group: str, assign: TopicPartition | None = None,
                    subscribe: str | None = None) -> int | None:
    """The first error of the wanted kind a consumer of ``ana`` meets within 30 s."""
    consumer = Consumer(_config(secured, "ana", **{"group.id": group, "enable.auto.commit": False,
                                                   "auto.offset.reset": "earliest"}))
    codes = (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)
    try:
        if assign is not None:
            consumer.assign([assign])
        else:
            consumer.subscribe([subscribe])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                msg = consumer.poll(0.5)
            except KafkaException as e:
                if e.args[0].code() in codes:
                    return e.args[0].code()
                continue
            if msg is not None and msg.error() is not None and msg.error().code() in codes:
                return msg.error().code()
        return None
    finally:
        consumer.close()


def test_metadata_hides_topics_ana_may_not_describe(ana):
    listed = ana.list_topics(timeout=30).topics
    assert {"acl-ro", "acl-wo", "acl-fam-1", "acl-fam-2"} <= set(listed)
    assert not {"acl-hidden", "acl-cfg", "acl-late"} & set(listed)  # DESCRIBE_CONFIGS does not imply DESCRIBE
    named = ana.list_topics(topic="acl-hidden", timeout=30).topics["acl-hidden"]
    assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_prefixed_acl_grants_a_family_of_topics(secured: Secured, ana):
    results = []
    producer = Producer(_config(secured, "ana", **{"enable.idempotence": True, "message.timeout.ms": 20000}))
    for topic in ("acl-fam-1", "acl-fam-2", "acl-hidden"):
        producer.produce(topic, b"x", on_delivery=lambda err, msg: results.append((msg.topic(), err)))
    producer.flush(30)
    outcome = {topic: err.code() if err else None for topic, err in results}
    assert outcome == {"acl-fam-1": None, "acl-fam-2": None, "acl-hidden": KafkaError.TOPIC_AUTHORIZATION_FAILED}


def test_an_acl_change_is_enforced_by_every_broker_within_a_second(secured: Secured, admin):
    grant = AclBinding(ResourceType.TOPIC, "acl-late", LIT, "User:ana", "*", OP.DESCRIBE, ALLOW)

    async def scenario() -> list[float]:
        clients = []
        for address in secured.endpoints["SECURE"]:
            host, port = address.rsplit(":", 1)
            clients.append(KafkaClient(host, int(port), client_id="acl-test", security=ClientSecurity(
                "SECURE", _tls(secured), "PLAIN", "ana", PLAIN_USERS["ana"])))
        assert {await _late_error(c) for c in clients} == {ErrorCode.topic_authorization_failed}
        await asyncio.to_thread(_wait_all, admin.create_acls([grant]))
        granted = time.monotonic()
        delays = await asyncio.gather(*(_until_described(c, granted) for c in clients))
        for c in clients:
            c.close()
        return delays

    delays = asyncio.run(scenario())
    assert max(delays) < 1.0, delays


def _tls(secured: Secured):
    import ssl
    return ssl.create_default_context(cafile=secured.ca_file)


async def _late_error(client: KafkaClient) -> int:
    s = Schemas(3, 9, EntityType.request)
    request = make(s.MetadataRequest, topics=(make(s.MetadataRequestTopic, name="acl-late"),),
                   allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                   include_topic_authorized_operations=False)
    return (await client.request(3, 9, request, timeout=10)).topics[0].error_code


async def _until_described(client: KafkaClient, since: float) -> float:
    deadline = since + 10
    while time.monotonic() < deadline:
        if await _late_error(client) == ErrorCode.none:
            return time.monotonic() - since
        await asyncio.sleep(0.02)
    return float("inf")


def test_authorized_operations_are_the_principals(ana):
    """include_authorized_operations (Metadata, DescribeCluster, DescribeGroups): what the
    authorizer allows this principal, implied operations included (READ implies DESCRIBE)."""
    from confluent_kafka import ConsumerGroupState, TopicCollection
    topic = _only(ana.describe_topics(TopicCollection(["acl-ro"]), include_authorized_operations=True))
    assert set(topic.result(timeout=60).authorized_operations) == {OP.READ, OP.DESCRIBE}
    cluster = ana.describe_cluster(include_authorized_operations=True).result(timeout=60)
    assert set(cluster.authorized_operations) == {OP.CLUSTER_ACTION, OP.DESCRIBE_CONFIGS, OP.ALTER_CONFIGS,
                                                  OP.IDEMPOTENT_WRITE, OP.ALTER, OP.DESCRIBE}  # CREATE denied
    group = _only(ana.describe_consumer_groups(["acl-join"], include_authorized_operations=True)).result(timeout=60)
    assert group.state in (ConsumerGroupState.DEAD, ConsumerGroupState.EMPTY, ConsumerGroupState.UNKNOWN)
    assert set(group.authorized_operations) == {OP.DESCRIBE}
