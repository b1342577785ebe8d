"""``--require-auth`` without a cluster (the lifespan opens clients to nowhere; every refusal
here is answered before a request reaches Kafka): every route but the probes, /metrics and the
console's files answers 401 with ``WWW-Authenticate`` without a token; a token's rights bound
pattern subscriptions, offset commits and seeks, consumer groups and the inventory."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient

from odradek.gateway.app import create_app
from odradek.gateway.auth import OPEN_PATHS
from odradek.gateway.settings import GatewaySettings

V2 = {"content-type": "application/vnd.kafka.v2+json"}
TOKENS = [{"token": "orders-token", "name": "etl", "topics": {"orders-*": "rw"}, "groups": ["etl-*"]},
          {"token": "all-token", "name": "ops", "topics": {"*": "r"}}]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    path = tmp_path_factory.mktemp("auth") / "tokens.json"
    path.write_text(json.dumps({"tokens": TOKENS}))
    # the registry's routes are installed all the same (and checked below); its store is not started:
    # nothing here reads it, and its start, blocked on Kafka at nowhere, held the app's shutdown ~30 s
    app = create_app(GatewaySettings(bootstrap_servers="127.0.0.1:1", auth_file=str(path), require_auth=True,
                                     schema_registry=False))
    with TestClient(app) as c:
        yield c


def _closed_routes(app):
    """Every documented route (OpenAPI: the data routes), with its path parameters filled in."""
    for template, methods in app.openapi()["paths"].items():
        if template not in OPEN_PATHS:
            path = re.sub(r"\{(\w+)\}", lambda m: "0" if m.group(1) in ("partition", "broker_id") else "x", template)
            for method in methods:
                yield method.upper(), path
    yield "GET", "/openapi.json"


def test_every_route_but_the_probes_needs_a_token(client):
    routes = list(_closed_routes(client.app))
    assert len(routes) > 50 and ("DELETE", "/v3/clusters/x/topics/x") in routes and ("GET", "/topics") in routes
    for method, path in routes:
        answer = client.request(method, path, headers={"content-type": "application/json"}, content=b"{}")
        assert (answer.status_code, answer.json()["error_code"]) == (401, 40101), (method, path, answer.text)
        assert answer.headers["www-authenticate"] == "Bearer"
        wrong = client.request(method, path, headers={"authorization": "Bearer guessed"})
        assert wrong.status_code == 401, (method, path)
    assert client.get("/healthz").status_code == 200
    assert client.get("/console/").status_code == 200          # no data: it signs in with a token


def test_a_pattern_subscription_needs_every_topic(client):
    etl = {"authorization": "Bearer orders-token", **V2}
    made = client.post("/consumers/etl-1", headers=etl, json={"format": "binary"})
    assert made.status_code == 200, made.text
    instance = f"/consumers/etl-1/instances/{made.json()['instance_id']}"
    pattern = client.post(f"{instance}/subscription", headers=etl, json={"topic_pattern": "orders-.*"})
    assert (pattern.status_code, pattern.json()["error_code"]) == (403, 40301)
    commit = client.post(f"{instance}/offsets", headers=etl,
                         json={"offsets": [{"topic": "payroll", "partition": 0, "offset": 5}]})
    assert (commit.status_code, commit.json()["error_code"]) == (403, 40301), commit.text
    seek = client.post(f"{instance}/positions", headers=etl,
                       json={"offsets": [{"topic": "payroll", "partition": 0, "offset": 5}]})
    assert seek.status_code == 403
    assert client.delete(instance, headers=etl).status_code == 204


def test_groups_outside_the_tokens_are_refused(client):
    etl = {"authorization": "Bearer orders-token", **V2}
    other = client.post("/consumers/payroll-readers", headers=etl, json={"format": "binary"})
    assert (other.status_code, other.json()["error_code"]) == (403, 40301)
    assert "consumer group payroll-readers" in other.json()["message"]
    lag = client.get("/v3/clusters/x/consumer-groups/payroll-readers/lag-summary", headers=etl)
    assert lag.status_code == 403
