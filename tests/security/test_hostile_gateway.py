"""Issue 30, item 4 (the gateway was a super user), replayed against the shared secured dev
cluster (``dev_secured``: ``odradek dev up --security sasl_ssl`` with its gateway, HTTPS and
``--require-auth``):

- an unauthenticated ``DELETE /v3/clusters/<id>/topics/<t>`` answered 204: now 401 (with
  ``WWW-Authenticate``) and the topic stays, as do ``GET /topics``, ``/brokers``, ``/v3/clusters``;
- a token mapped to a Kafka user acts as that user: a produce outside its ACLs answers 403
  (40301, TOPIC_AUTHORIZATION_FAILED) and the broker's authorizer logs that user's principal;
  inside them 200;
- a token's topics bound ``topic_pattern`` subscriptions and offset commits (403).

The mapped users are added the way an operator does it: ``odradek users``/``odradek acls``,
and an entry in the gateway's tokens file (re-read when it changes, as a mounted Secret)."""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from odradek.dev.harness import Cluster
from odradek.dev.waiting import wait_until

USER, PASSWORD = "hostile-gw", "hostile-gw-secret"
ALLOWED, FORBIDDEN = "hostile-gw-allowed", "hostile-gw-forbidden"
V2_JSON = "application/vnd.kafka.json.v2+json"
V2 = "application/vnd.kafka.v2+json"


def odradek(cluster: Cluster, *args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "odradek.cli", *args, "--data-dir", str(cluster.data_dir)],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def mapped(dev_secured: Cluster):
    """The user ``hostile-gw`` (SCRAM) may write and describe ALLOWED and only describe
    FORBIDDEN; two tokens map to it: ``acl-token`` (its ACLs alone decide) and ``narrow-token``
    (the token's own rights: ALLOWED only, groups ``hostile-gw-*``)."""
    for topic in (ALLOWED, FORBIDDEN):
        dev_secured.create_topic(topic, partitions=1, replication_factor=3)
    odradek(dev_secured, "users", "add", USER, "--password", PASSWORD)
    odradek(dev_secured, "acls", "add", "--allow-principal", f"User:{USER}", "--operation", "Write",
            "--operation", "Describe", "--operation", "Read", "--topic", ALLOWED)
    odradek(dev_secured, "acls", "add", "--allow-principal", f"User:{USER}", "--operation", "Describe",
            "--topic", FORBIDDEN)
    tokens = Path(dev_secured.security["ca_file"]).parent / "gateway-tokens.json"
    original = tokens.read_text()
    doc = json.loads(original)
    login = {"kafka_username": USER, "kafka_password": PASSWORD}
    doc["tokens"] += [{"token": "acl-token", "name": "acl-http", **login},
                      {"token": "narrow-token", "name": "narrow-http", "topics": {ALLOWED: "rw"},
                       "groups": ["hostile-gw-*"], **login}]
    tokens.write_text(json.dumps(doc))
    yield dev_secured
    tokens.write_text(original)


def client(cluster: Cluster, token: str | None = None) -> httpx.Client:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=cluster.gateway, headers=headers, timeout=60,
                        verify=ssl.create_default_context(cafile=cluster.security["ca_file"]))


def produce(c: httpx.Client, topic: str) -> httpx.Response:
    return c.post(f"/topics/{topic}", headers={"content-type": V2_JSON}, json={"records": [{"value": {"n": 1}}]})


def test_unauthenticated_routes_answer_401_and_delete_nothing(dev_secured: Cluster):
    victim = "hostile-gw-victim"
    dev_secured.create_topic(victim, partitions=1, replication_factor=3)
    with client(dev_secured, dev_secured.security["gateway_token"]) as admin, client(dev_secured) as anonymous:
        cid = admin.get("/v3/clusters").json()["data"][0]["cluster_id"]
        for method, path in (("DELETE", f"/v3/clusters/{cid}/topics/{victim}"), ("GET", "/topics"),
                             ("GET", "/brokers"), ("GET", "/v3/clusters"), ("GET", f"/v3/clusters/{cid}/topics")):
            answer = anonymous.request(method, path)
            assert (answer.status_code, answer.json()["error_code"]) == (401, 40101), (method, path, answer.text)
            assert answer.headers["www-authenticate"] == "Bearer"
        assert victim in admin.get("/topics").json()        # the admin's token is served; the topic stays
    assert dev_secured.partition_leaders(victim)


# the broker authorizer's denial line (Kafka's format) for the mapped user's write
DENIED_WRITE = re.compile(rf"Principal = User:{USER} is Denied Operation = Write from host = \S+ "
                          rf"on resource = Topic:LITERAL:{FORBIDDEN}$", re.IGNORECASE | re.MULTILINE)


def denied_write_logged(cluster: Cluster) -> bool:
    return any(DENIED_WRITE.search(log.read_text(errors="replace"))
               for log in (cluster.data_dir / "logs").glob("broker-*.log"))


def test_a_mapped_user_is_held_to_its_acls(mapped: Cluster):
    with client(mapped, "acl-token") as c:
        wait_until(lambda: produce(c, ALLOWED).status_code == 200, 30, f"{USER}'s ACLs to reach the brokers")
        refused = produce(c, FORBIDDEN)
        assert (refused.status_code, refused.json()) == (
            403, {"error_code": 40301, "message": f"Not authorized to access topics: [{FORBIDDEN}]"})
    wait_until(lambda: denied_write_logged(mapped), 30, f"the authorizer to log User:{USER}'s denied write")


def test_a_tokens_topics_bound_patterns_and_commits(mapped: Cluster):
    with client(mapped, "narrow-token") as c:
        elsewhere = c.post("/consumers/payroll", headers={"content-type": V2}, json={"format": "json"})
        assert (elsewhere.status_code, elsewhere.json()["error_code"]) == (403, 40301)   # not its group
        made = c.post("/consumers/hostile-gw-g", headers={"content-type": V2}, json={"format": "json"})
        assert made.status_code == 200, made.text
        instance = f"/consumers/hostile-gw-g/instances/{made.json()['instance_id']}"
        pattern = c.post(f"{instance}/subscription", headers={"content-type": V2}, json={"topic_pattern": ".*"})
        assert (pattern.status_code, pattern.json()["error_code"]) == (403, 40301)
        commit = c.post(f"{instance}/offsets", headers={"content-type": V2},
                        json={"offsets": [{"topic": FORBIDDEN, "partition": 0, "offset": 0}]})
        assert (commit.status_code, commit.json()["error_code"]) == (403, 40301)
        assert c.post(f"{instance}/subscription", headers={"content-type": V2},
                      json={"topics": [ALLOWED]}).status_code == 204
        assert c.delete(instance).status_code == 204
        assert c.get("/topics").json() == [ALLOWED]          # the inventory: what the token may see
