"""The gateway's error seam without a cluster: every domain error has one HTTP status and one
Confluent code (one meaning per code), Kafka's errors become domain errors below the routes, and
the handlers app.py registers answer ``{"error_code", "message"}``."""

from __future__ import annotations

import inspect

from confluent_kafka import KafkaError
from fastapi.testclient import TestClient

from odradek.gateway import admin, edge, errors, kafka
from odradek.gateway.app import create_app
from odradek.gateway.settings import GatewaySettings

DOMAIN_ERRORS = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.GatewayError)]


def test_each_code_has_one_meaning():
    codes = [code for _, code in edge.ANSWERS.values()]
    assert len(codes) == len(set(codes)), f"a code answers two meanings: {sorted(codes)}"
    assert set(code for _, code in edge.ANSWERS.values()) | {edge.ErrorCode.INTERNAL_ERROR} == set(edge.ErrorCode)


def test_every_domain_error_answers_as_itself_or_its_parent():
    for kind in DOMAIN_ERRORS:
        if kind is not errors.GatewayError:
            assert any(k in edge.ANSWERS for k in kind.__mro__), f"{kind.__name__} has no answer"
    assert edge.answer(errors.TopicNotFound("t")) == (404, 40401)
    assert edge.answer(errors.PartitionNotFound("t", 3)) == (404, 40402)
    assert edge.answer(errors.ConsumerInstanceNotFound("g", "i")) == (404, 40403)
    assert edge.answer(errors.UndecodableRecord()) == (500, 50002)


def test_kafka_errors_become_domain_errors():
    unknown = admin._kafka_error(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART), "orders")
    assert isinstance(unknown, errors.TopicNotFound) and edge.answer(unknown) == (404, 40401)
    exists = admin._kafka_error(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS), "orders")
    assert edge.answer(exists) == (400, 40002)
    moved = KafkaError(KafkaError.LEADER_NOT_AVAILABLE, retriable=True)
    assert edge.answer(errors.KafkaFailure.of(moved)) == (503, 50003)
    too_large = kafka.Delivery(error=KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)).failure()
    assert edge.body(too_large)["error_code"] == 41301
    keyless = kafka.Delivery(error=KafkaError(KafkaError.INVALID_RECORD, "Broker: Invalid record")).failure()
    assert edge.answer(keyless) == (400, 40002) and "cleanup.policy includes compact" in keyless.message


def test_broker_refusals_answer_as_confluents_proxy():
    """The brokers' ACL refusals answer 403 (40301) with Kafka's exception message, a refused
    SASL login of a mapped user 401 (40101), as Confluent's REST Proxy answers them."""
    denied = errors.KafkaFailure.of(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), topics="orders")
    assert edge.response(denied).status_code == 403
    assert edge.body(denied) == {"error_code": 40301, "message": "Not authorized to access topics: [orders]"}
    group = errors.KafkaFailure.of(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED), group="etl")
    assert edge.body(group) == {"error_code": 40301, "message": "Not authorized to access group: etl"}
    cluster = errors.KafkaFailure.of(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED))
    assert edge.answer(cluster) == (403, 40301) and edge.body(cluster)["message"] == "Cluster authorization failed."
    for code in (KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._AUTHENTICATION):
        refused = errors.KafkaFailure.of(KafkaError(code))
        assert edge.answer(refused) == (401, 40101) and refused.message.startswith("Authentication Error: ")


def test_the_app_answers_confluent_bodies():
    # without the registry's store: its start, blocked on Kafka at nowhere, held the app's shutdown ~30 s
    app = create_app(GatewaySettings(bootstrap_servers="127.0.0.1:1", replica_id="0badcafe", schema_registry=False))
    with TestClient(app) as client:   # the lifespan opens a bridge to nowhere: no request reaches Kafka
        gone = client.get("/consumers/g/instances/rest-consumer-12345678-abc/records")
        assert gone.status_code == 404 and gone.json()["error_code"] == 40403
        assert "12345678" in gone.json()["message"]            # names the owning replica
        wrong_type = client.post("/topics/t/records", content=b"{}", headers={"content-type": "text/plain"})
        assert wrong_type.status_code == 415 and wrong_type.json()["error_code"] == 415
        bad = client.post("/consumers/g", json={"format": "xml"}, headers={"content-type": "application/json"})
        assert bad.status_code == 422 and bad.json()["error_code"] == 422
        malformed = client.post("/consumers/g", content=b"{", headers={"content-type": "application/json"})
        assert malformed.status_code == 400 and malformed.json()["error_code"] == 400
        assert client.get("/no/such/path").json()["error_code"] == 404
