"""The HTTP gateway as a Kafka principal: it reaches the secured cluster over SASL_SSL with its
own credentials, maps HTTP users (bearer tokens) to Kafka principals whose clients it keeps and
closes when idle, answers a refused login 401 (40101), keeps consumer instances to their
creator, lets the brokers' ACLs decide what each mapped user may do (403 with Confluent's
body), and the Spark data source reads through it with its token."""

from __future__ import annotations

import uuid

import httpx
import pytest
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
                                   ResourceType)

from odradek.dev.waiting import wait_until
from tests.security.conftest import PLAIN_USERS, Secured
from tests.support.gateway import V2, V2_BINARY, GatewayProcess, write_tokens

TOKENS = [
    {"token": "own-token", "name": "ops", "topics": {"*": "rw"}, "admin": True},        # the gateway's principal
    {"token": "paula-token", "name": "paula-http", "kafka_username": "paula", "kafka_password_file": "paula.pw"},
    {"token": "wrong-token", "name": "typo", "kafka_username": "paula", "kafka_password": "not-her-password"},
    {"token": "ana-token", "name": "ana-http", "kafka_username": "ana", "kafka_password": PLAIN_USERS["ana"]},
    {"token": "bert-token", "name": "bert-http", "kafka_username": "bert", "kafka_password": PLAIN_USERS["bert"]},
]
IDLE_MS = 3000


@pytest.fixture(scope="module")
def gateway(secured: Secured, tmp_path_factory) -> GatewayProcess:
    tmp = tmp_path_factory.mktemp("gw-principals")
    (tmp / "paula.pw").write_text(PLAIN_USERS["paula"] + "\n")
    (tmp / "admin.pw").write_text(PLAIN_USERS["admin"] + "\n")
    g = GatewayProcess(secured.bootstrap("SECURE"), tmp / "gateway.log", "--auth-file",
                       str(write_tokens(tmp / "tokens.json", TOKENS)),
                       "--kafka-security-protocol", "SASL_SSL", "--kafka-sasl-mechanism", "PLAIN",
                       "--kafka-sasl-username", "admin", "--kafka-sasl-password-file", str(tmp / "admin.pw"),
                       "--kafka-ssl-ca-location", secured.ca_file, "--principal-clients-idle-ms", str(IDLE_MS))
    yield g
    assert g.stop(), g.log.read_text()[-3000:]


def client(gateway: GatewayProcess, token: str) -> httpx.Client:
    return httpx.Client(base_url=gateway.url, timeout=60, headers={"authorization": f"Bearer {token}"})


def produce(c: httpx.Client, topic: str, values: list[bytes]) -> httpx.Response:
    import base64
    return c.post(f"/topics/{topic}", headers={"content-type": V2_BINARY},
                  json={"records": [{"value": base64.b64encode(v).decode()} for v in values]})


def _topic(secured: Secured) -> str:
    name = f"gw-{uuid.uuid4().hex[:8]}"
    secured.cluster.create_topic(name, partitions=1, replication_factor=3)
    return name


def broker_logins(secured: Secured, user: str) -> int:
    """How often the brokers logged a SASL login of ``user`` on the SECURE listener."""
    return sum(log.read_text().count(f"authenticated User:{user} on SECURE")
               for log in (secured.cluster.data_dir / "logs").glob("broker-*.log"))


def test_gateway_produces_and_consumes_over_sasl_ssl(secured: Secured, gateway: GatewayProcess):
    topic = _topic(secured)
    with client(gateway, "own-token") as c:
        answer = produce(c, topic, [b"a", b"b", b"c"])
        assert answer.status_code == 200, answer.text
        assert [o["offset"] for o in answer.json()["offsets"]] == [0, 1, 2]
        base = f"/consumers/g-{topic}"
        made = c.post(base, headers={"content-type": V2}, json={"format": "binary", "auto.offset.reset": "earliest"})
        assert made.status_code == 200, made.text
        instance = f"{base}/instances/{made.json()['instance_id']}"
        assert c.post(f"{instance}/subscription", headers={"content-type": V2},
                      json={"topics": [topic]}).status_code == 204
        got = []

        def fetched() -> bool:
            records = c.get(f"{instance}/records", headers={"accept": V2_BINARY}, params={"timeout": 500})
            assert records.status_code == 200, records.text
            got.extend(r["offset"] for r in records.json())
            return len(got) >= 3
        wait_until(fetched, 60, "the consumer instance to read the three records")
        assert got == [0, 1, 2]
        assert c.delete(instance).status_code == 204


def test_a_mapped_user_acts_as_its_own_principal(secured: Secured, gateway: GatewayProcess):
    topic = _topic(secured)
    before = broker_logins(secured, "paula")
    with client(gateway, "paula-token") as c:
        assert produce(c, topic, [b"from paula"]).status_code == 200
        read = c.get(f"/topics/{topic}/partitions/0/records", params={"offset": 0})
        assert read.status_code == 200 and [r["offset"] for r in read.json()] == [0], read.text
    assert broker_logins(secured, "paula") > before     # the gateway logged in to the brokers as paula
    assert "Kafka clients opened for principal User:paula (HTTP user paula-http)" in gateway.log.read_text()


def test_idle_principal_clients_are_closed_and_reopened(secured: Secured, gateway: GatewayProcess):
    topic = _topic(secured)
    with client(gateway, "paula-token") as c:
        assert produce(c, topic, [b"1"]).status_code == 200
        closed = gateway.log.read_text().count("Kafka clients of principal User:paula closed")
        wait_until(lambda: gateway.log.read_text().count("Kafka clients of principal User:paula closed") > closed,
                   IDLE_MS / 1000 + 30, "paula's idle clients to be closed")
        assert produce(c, topic, [b"2"]).json()["offsets"][0]["offset"] == 1


def test_refused_credentials_answer_401(secured: Secured, gateway: GatewayProcess):
    topic = _topic(secured)
    with client(gateway, "wrong-token") as c:
        answer = produce(c, topic, [b"x"])
    assert answer.status_code == 401
    assert answer.json() == {"error_code": 40101,
                             "message": "Authentication Error: Authentication failed: Invalid username or password"}


def test_a_consumer_instance_serves_only_its_creator(gateway: GatewayProcess):
    with client(gateway, "paula-token") as paula, client(gateway, "own-token") as ops:
        made = paula.post("/consumers/g-paula", headers={"content-type": V2}, json={"format": "binary"})
        assert made.status_code == 200, made.text
        instance = f"/consumers/g-paula/instances/{made.json()['instance_id']}"
        borrowed = ops.get(f"{instance}/records", headers={"accept": V2_BINARY})
        assert borrowed.status_code == 403 and borrowed.json()["error_code"] == 40301
        assert paula.delete(instance).status_code == 204


def test_spark_reads_through_the_secured_gateway_with_its_token(secured: Secured, gateway: GatewayProcess,
                                                                tmp_path_factory):
    from tests.support.spark import local_session
    topic = _topic(secured)
    with client(gateway, "paula-token") as c:
        assert produce(c, topic, [b"v%d" % i for i in range(5)]).status_code == 200
    with local_session(tmp_path_factory.mktemp("spark")) as spark:
        rows = (spark.read.format("odradek").option("gateway", gateway.url).option("token", "paula-token")
                .option("subscribe", topic).load().select("value", "offset").collect())
    assert sorted((bytes(r.value), r.offset) for r in rows) == [(b"v%d" % i, i) for i in range(5)]


@pytest.fixture(scope="module")
def acl_topic(secured: Secured):
    """A topic whose ACLs let paula write and describe it and ana only describe it; bert, whom
    they do not name, may do nothing with it (a resource with ACLs is closed to everyone else);
    the group of the same name is paula's alone."""
    name = f"gwacl-{uuid.uuid4().hex[:8]}"
    secured.cluster.create_topic(name, partitions=1, replication_factor=3)
    grants = [(ResourceType.TOPIC, "User:paula", AclOperation.WRITE), (ResourceType.TOPIC, "User:paula",
              AclOperation.DESCRIBE), (ResourceType.TOPIC, "User:ana", AclOperation.DESCRIBE),
              (ResourceType.GROUP, "User:paula", AclOperation.READ)]     # the group named as the topic
    admin = secured.cluster.admin()
    for future in admin.create_acls([AclBinding(kind, name, ResourcePatternType.LITERAL, who, "*", op,
                                                AclPermissionType.ALLOW) for kind, who, op in grants]).values():
        future.result(timeout=60)
    yield name
    every = [AclBindingFilter(kind, name, ResourcePatternType.LITERAL, None, None, AclOperation.ANY,
                              AclPermissionType.ANY) for kind in (ResourceType.TOPIC, ResourceType.GROUP)]
    for future in admin.delete_acls(every).values():
        future.result(timeout=60)


def test_the_acls_decide_what_each_mapped_user_may_do(gateway: GatewayProcess, acl_topic: str):
    denied = {"error_code": 40301, "message": f"Not authorized to access topics: [{acl_topic}]"}
    with client(gateway, "paula-token") as paula, client(gateway, "ana-token") as ana, \
            client(gateway, "bert-token") as bert:
        wait_until(lambda: produce(paula, acl_topic, [b"by paula"]).status_code == 200, 10,
                   "the brokers to enforce the new ACLs")
        refused = produce(ana, acl_topic, [b"by ana"])          # may describe, not write: the produce fails
        assert (refused.status_code, refused.json()) == (403, denied)
        unread = ana.get(f"/topics/{acl_topic}/partitions/0/records", params={"offset": 0})   # no READ either
        assert (unread.status_code, unread.json()) == (403, denied)
        hidden = produce(bert, acl_topic, [b"by bert"])         # may not even describe it: Metadata hides it
        assert (hidden.status_code, hidden.json()) == (403, denied)
        assert bert.get(f"/topics/{acl_topic}").status_code == 403
        assert bert.get("/topics/no-such-topic-here").status_code == 404   # a topic that does not exist stays 404


def test_the_acls_decide_for_a_users_consumer_instance(gateway: GatewayProcess, acl_topic: str):
    with client(gateway, "ana-token") as ana:
        made = ana.post(f"/consumers/{acl_topic}", headers={"content-type": V2}, json={"format": "binary"})
        instance = f"/consumers/{acl_topic}/instances/{made.json()['instance_id']}"
        assert ana.post(f"{instance}/subscription", headers={"content-type": V2},
                        json={"topics": [acl_topic]}).status_code == 204
        answers = []

        def refused() -> bool:
            answers.append(ana.get(f"{instance}/records", headers={"accept": V2_BINARY}, params={"timeout": 500}))
            return answers[-1].status_code != 200
        wait_until(refused, 30, "ana's consumer to be refused the group")
        assert (answers[-1].status_code, answers[-1].json()) == (
            403, {"error_code": 40301, "message": f"Not authorized to access group: {acl_topic}"})
        assert ana.delete(instance).status_code == 204


def test_the_acls_decide_for_the_v3_cluster_and_group_views(gateway: GatewayProcess, acl_topic: str):
    """The console's v3 views act as the mapped user's principal: a group it may not describe
    and a topic Metadata hides from it answer 403, an offset reset without READ on the topic too."""
    with client(gateway, "ana-token") as ana, client(gateway, "bert-token") as bert, \
            client(gateway, "paula-token") as paula:
        c = f"/v3/clusters/{ana.get('/v3/clusters').json()['data'][0]['cluster_id']}"
        assert [b["broker_id"] for b in bert.get(c + "/brokers").json()["data"]] == [1, 2, 3]
        group = ana.get(c + f"/consumer-groups/{acl_topic}")
        assert (group.status_code, group.json()) == (
            403, {"error_code": 40301, "message": f"Not authorized to access group: {acl_topic}"})
        hidden = bert.get(c + f"/topics/{acl_topic}/partitions")
        assert (hidden.status_code, hidden.json()["error_code"]) == (403, 40301), hidden.text
        assert ana.get(c + f"/topics/{acl_topic}/partitions").status_code == 200   # ana may describe it
        reset = paula.post(c + f"/consumer-groups/{acl_topic}/offsets:reset",
                           json={"topic_name": acl_topic, "to": "earliest"})   # paula: WRITE, not READ
        assert (reset.status_code, reset.json()) == (
            403, {"error_code": 40301, "message": f"Not authorized to access topics: [{acl_topic}]"})
