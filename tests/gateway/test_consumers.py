"""Consumer instances beyond test_gateway_v2.py, on a real dev cluster with httpx: max_bytes
bounds a response without losing what was fetched past it, topic_pattern subscriptions, the
v2 error bodies for bad create/subscribe requests, client errors (a negative or unknown commit,
a topic too large) answered 4xx on a connection that stays open, an instance created on one
gateway replica asked for on another, and a graceful shutdown that commits nothing it was not
asked to."""

from __future__ import annotations

import time
import uuid

import httpx

from odradek.dev.waiting import wait_until
from odradek.gateway import v3
from tests.gateway.test_gateway_v2 import b64, error, new_topic
from tests.support.gateway import V2, V2_BINARY, GatewayProcess


def _create(client, group: str, **config) -> str:
    created = client.post(f"/consumers/{group}", json={"format": "binary", "auto.offset.reset": "earliest",
                                                       "auto.commit.enable": "false", **config},
                          headers={"content-type": V2})
    assert created.status_code == 200, created.text
    return created.json()["base_uri"]


def _committed(client, base: str, topic: str, partitions: int) -> list[int]:
    parts = {"partitions": [{"topic": topic, "partition": p} for p in range(partitions)]}
    resp = client.request("GET", f"{base}/offsets", json=parts, headers={"content-type": V2})
    assert resp.status_code == 200, resp.text
    return [o["offset"] for o in sorted(resp.json()["offsets"], key=lambda o: o["partition"])]


def test_max_bytes_bounds_each_response_and_loses_nothing(gw_cluster, gw):
    topic = new_topic(gw_cluster, partitions=1)
    records = [{"value": b64(bytes([i]) * 100)} for i in range(30)]
    assert gw.post(f"/topics/{topic}", json={"records": records}, headers={"content-type": V2_BINARY}).is_success
    base = _create(gw, f"g-{uuid.uuid4().hex[:6]}")
    gw.post(f"{base}/subscription", json={"topics": [topic]}, headers={"content-type": V2})
    offsets, sizes = [], []

    def read_more() -> bool:
        resp = gw.get(f"{base}/records", params={"timeout": 1000, "max_bytes": 250}, headers={"accept": V2_BINARY})
        assert resp.status_code == 200, resp.text
        sizes.append(len(resp.json()))
        offsets.extend(r["offset"] for r in resp.json())
        return len(offsets) >= 30
    wait_until(read_more, 120, "30 records in responses of at most 250 bytes", interval=0)
    assert max(sizes) <= 2, f"250 bytes hold two 100-byte records, got responses of {sizes}"
    assert offsets == list(range(30)), "every record once, in order"
    gw.delete(base)


def test_topic_pattern_subscription_reads_every_matching_topic(gw_cluster, gw):
    prefix = f"pat{uuid.uuid4().hex[:6]}"
    topics = [f"{prefix}-{i}" for i in range(2)]
    for t in topics:
        gw_cluster.create_topic(t, partitions=1, replication_factor=1)
        gw.post(f"/topics/{t}", json={"records": [{"value": b64(t.encode())}]}, headers={"content-type": V2_BINARY})
    base = _create(gw, f"g-{uuid.uuid4().hex[:6]}")
    pattern = {"topic_pattern": f"{prefix}-.*"}
    assert gw.post(f"{base}/subscription", json=pattern, headers={"content-type": V2}).status_code == 204
    assert gw.get(f"{base}/subscription").json()["topics"] in ([f"^{prefix}-.*"], [f"{prefix}-.*"], topics)
    seen: set[str] = set()

    def both() -> bool:
        resp = gw.get(f"{base}/records", params={"timeout": 1000}, headers={"accept": V2_BINARY})
        seen.update(r["topic"] for r in resp.json())
        return seen == set(topics)
    wait_until(both, 120, f"a record from each of {topics}", interval=0)
    gw.delete(base)


def test_bad_create_and_subscribe_requests(gw):
    group = f"g-{uuid.uuid4().hex[:6]}"
    resp = gw.post(f"/consumers/{group}", json={"format": "avro-ish"}, headers={"content-type": V2})
    assert resp.status_code == 422 and resp.json()["error_code"] == 422, resp.text   # as REST Proxy v2
    resp = gw.post(f"/consumers/{group}", content=b"{not json", headers={"content-type": V2})
    assert resp.status_code in (400, 422) and "error_code" in resp.json(), resp.text
    assert gw.post(f"/consumers/{group}", json={}, headers={"content-type": "text/plain"}).status_code == 415
    base = _create(gw, group)
    error(gw.post(f"{base}/subscription", json={"topics": ["a"], "topic_pattern": "b"},
                  headers={"content-type": V2}), 422, 422)
    error(gw.post(f"{base}/subscription", json={}, headers={"content-type": V2}), 422, 422)
    assert gw.delete(base).status_code == 204
    error(gw.delete(base), 404, 40403)


def _local_port(resp: httpx.Response) -> int:
    """The client-side port of the connection that carried ``resp`` (same port: same connection)."""
    return resp.extensions["network_stream"].get_extra_info("client_addr")[1]


def test_client_errors_answer_4xx_and_keep_the_connection(gw_cluster, gw):
    """Issue 15, finding 3: each was a 500 (the first one also reset the keep-alive connection)."""
    topic = new_topic(gw_cluster, partitions=1)
    base = _create(gw, f"g-{uuid.uuid4().hex[:6]}")
    port = _local_port(gw.get(f"{base}/subscription"))

    def commit(offset: int, topic: str = topic, partition: int = 0) -> httpx.Response:
        return gw.post(f"{base}/offsets", json={"offsets": [{"topic": topic, "partition": partition, "offset": offset}]},
                       headers={"content-type": V2})
    refused = [(commit(-100), 422, 422),                                  # a body that does not validate
               (commit(5, topic="no-such-topic"), 404, 40401),
               (commit(5, partition=7), 404, 40402)]
    cluster_id = gw.get("/v3/clusters").json()["data"][0]["cluster_id"]
    started = time.monotonic()
    huge = gw.post(f"/v3/clusters/{cluster_id}/topics", json={"topic_name": f"huge-{uuid.uuid4().hex[:6]}",
                                                              "partitions_count": 100_000})
    refused.append((huge, 400, 40002))                                    # Kafka's POLICY_VIOLATION
    # well inside the gateway's wait for the cluster: refused by the policy, not timed out
    assert time.monotonic() - started < v3.TIMEOUT_S / 2, "answered at once, not after a timeout"
    for resp, status, code in refused:
        error(resp, status, code)
        assert _local_port(resp) == port, f"{resp.request.url} was not answered on the kept-alive connection"
    assert "Excessively large number of partitions" in huge.json()["message"]
    assert commit(0).status_code == 200 and _committed(gw, base, topic, 1) == [1]
    assert gw.delete(base).status_code == 204


def test_an_instance_asked_for_on_another_replica_gets_a_clear_error(gw_cluster, gw, tmp_path):
    other = GatewayProcess(gw_cluster.bootstrap, tmp_path / "replica-b.log")
    try:
        base = _create(gw, f"g-{uuid.uuid4().hex[:6]}")
        path = base.split("/consumers/", 1)[1]
        msg = error(httpx.get(f"{other.url}/consumers/{path}/records", headers={"accept": V2_BINARY}, timeout=60),
                    404, 40403)
        assert "another gateway replica" in msg
        assert gw.get(f"{base}/records", headers={"accept": V2_BINARY}).status_code == 200, \
            "the owning replica still serves it: the other did not create a silent new instance"
    finally:
        other.stop()


def test_graceful_shutdown_commits_only_what_was_asked(gw_cluster, tmp_path):
    topic = new_topic(gw_cluster, partitions=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    replica = GatewayProcess(gw_cluster.bootstrap, tmp_path / "shutdown.log")
    try:
        with httpx.Client(base_url=replica.url, timeout=60) as c:
            c.post(f"/topics/{topic}", json={"records": [{"value": b64(b"%d" % i)} for i in range(10)]},
                   headers={"content-type": V2_BINARY})
            base = _create(c, group)
            c.post(f"{base}/subscription", json={"topics": [topic]}, headers={"content-type": V2})
            got: list[int] = []
            wait_until(lambda: got.extend(r["offset"] for r in c.get(f"{base}/records", params={"timeout": 1000},
                       headers={"accept": V2_BINARY}).json()) or len(got) >= 10, 120, "10 records", interval=0)
            commit = {"offsets": [{"topic": topic, "partition": 0, "offset": 3}]}
            assert c.post(f"{base}/offsets", json=commit, headers={"content-type": V2}).status_code == 200
    finally:
        assert replica.stop(), "the gateway did not shut down gracefully"
    with httpx.Client(base_url=gw_cluster.gateway, timeout=60) as gw:
        base = _create(gw, group)
        assert _committed(gw, base, topic, 1) == [4], "only the asked commit (offset 3, next 4), not the 10 read"
        gw.delete(base)
