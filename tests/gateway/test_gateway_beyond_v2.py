"""Beyond REST Proxy v2: the range read (JSON and Arrow) and NDJSON streaming produce Spark
uses, v3 topic admin, auth, operability endpoints, and a consume loop that survives a broker
kill — all against a real dev cluster."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import threading
import time
import uuid

import httpx
import pyarrow as pa
import pytest

from odradek.dev.waiting import wait_until
from tests.gateway.test_gateway_v2 import b64, error, new_topic
from tests.gateway.test_v3_cluster import cluster_path
from tests.support.clients import confluent_consume
from tests.support.gateway import ARROW, V2, V2_BINARY, GatewayProcess, write_tokens


def ndjson(records: list[dict]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def stream_produce(gw, topic: str, records: list[dict]) -> list[dict]:
    resp = gw.post(f"/topics/{topic}/records", content=ndjson(records), headers={"content-type": "application/x-ndjson"})
    assert resp.status_code == 200, resp.text
    return [json.loads(line) for line in resp.text.splitlines()]


def read_all_arrow(gw, topic: str, partition: int, offset: int = 0, end: int | None = None,
                   max_bytes: int = 100_000) -> pa.Table:
    batches, requests = [], 0
    stop = end if end is not None else gw.get(f"/topics/{topic}/partitions/{partition}/offsets").json()["end_offset"]
    while offset < stop:
        resp = gw.get(f"/topics/{topic}/partitions/{partition}/records",
                      params={"offset": offset, "end": stop, "max_bytes": max_bytes}, headers={"accept": ARROW})
        assert resp.status_code == 200 and resp.headers["content-type"] == ARROW, resp.text
        batches.append(pa.ipc.open_stream(resp.content).read_all())
        offset, requests = int(resp.headers["odradek-next-offset"]), requests + 1
    assert requests > 1 or stop - offset < 10, "max_bytes did not split the range"
    return pa.concat_tables(batches)


def test_streaming_produce_then_arrow_range_read_equals_a_kafka_client(gw_cluster, gw):
    topic = new_topic(gw_cluster, partitions=2)
    t0 = int(time.time() * 1000) - 60_000   # recent: older records would be retention's to delete
    records = [{"value": b64(b"v%05d" % i + b"x" * 200), "key": b64(b"k%d" % (i % 50)), "partition": i % 2,
                "headers": [{"key": "n", "value": b64(b"%d" % i)}] if i % 3 == 0 else None, "timestamp": t0 + i}
               for i in range(3000)]
    results = stream_produce(gw, topic, records)
    assert len(results) == 3000 and all("offset" in r for r in results)
    assert [r["partition"] for r in results] == [i % 2 for i in range(3000)]
    got, _ = confluent_consume(gw_cluster.bootstrap, topic, 2, 3000)
    for p in (0, 1):
        table = read_all_arrow(gw, topic, p)
        assert table.schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
        assert table.schema.field("partition").type == pa.int32()
        rows = table.to_pylist()
        kafka = sorted((g for g in got if g.partition == p), key=lambda g: g.offset)
        assert [(r["offset"], r["key"], r["value"]) for r in rows] == [(g.offset, g.key, g.value) for g in kafka]
        assert all(r["topic"] == topic and r["partition"] == p and r["timestampType"] == 0 for r in rows)
        first = rows[0]
        assert first["headers"] == [{"key": "n", "value": b"%d" % (p if p == 0 else 3)}] or p == 1
        assert int(first["timestamp"].timestamp() * 1000) == t0 + p
    part = read_all_arrow(gw, topic, 0, offset=100, end=250, max_bytes=10_000)
    assert part.column("offset").to_pylist() == list(range(100, 250)), "a range selects exactly its offsets"
    as_json = gw.get(f"/topics/{topic}/partitions/1/records", params={"offset": 5, "end": 8}).json()
    assert [r["offset"] for r in as_json] == [5, 6, 7]
    assert base64.b64decode(as_json[0]["value"]).startswith(b"v00011")


def test_range_reads_in_any_order_answer_exactly_their_offsets(gw_cluster, gw):
    """Range readers stay positioned where a read stopped; a read from anywhere else (again from
    the start, backwards, another partition in between) must still answer exactly its offsets."""
    topic = new_topic(gw_cluster, partitions=2)
    for p in (0, 1):
        stream_produce(gw, topic, [{"value": b64(b"%d-%04d" % (p, i) + b"x" * 500), "partition": p}
                                   for i in range(2000)])

    def chunk(p: int, offset: int, end: int = 2000) -> tuple[list[int], int]:
        resp = gw.get(f"/topics/{topic}/partitions/{p}/records", headers={"accept": ARROW},
                      params={"offset": offset, "end": end, "max_bytes": 50_000})
        table = pa.ipc.open_stream(resp.content).read_all()
        values = table.column("value").to_pylist()
        assert all(v.startswith(b"%d-%04d" % (p, o)) for v, o in zip(values, table.column("offset").to_pylist()))
        return table.column("offset").to_pylist(), int(resp.headers["odradek-next-offset"])

    first, nxt = chunk(0, 0)
    assert first == list(range(0, nxt)) and 0 < nxt < 2000
    assert chunk(0, 0) == (first, nxt), "reading the same chunk again"
    other, _ = chunk(1, nxt)
    assert other[0] == nxt
    offsets, after = chunk(0, nxt)
    assert offsets == list(range(nxt, after))
    assert chunk(0, 7, 12)[0] == [7, 8, 9, 10, 11], "backwards, with an end"
    assert chunk(0, after)[0][0] == after


def test_a_read_continuing_from_the_end_answers_records_produced_since(gw_cluster, gw):
    """A read that stopped at the partition's end leaves its reader positioned there; the next
    read from that offset, after a record was produced, answers it (not an old end notice)."""
    topic = new_topic(gw_cluster, partitions=1)
    for i in range(3):
        stream_produce(gw, topic, [{"value": b64(b"v%d" % i)}])
        resp = gw.get(f"/topics/{topic}/partitions/0/records", params={"offset": i})
        assert resp.status_code == 200, resp.text
        assert [base64.b64decode(r["value"]) for r in resp.json()] == [b"v%d" % i], (i, resp.text)
        assert resp.headers["odradek-next-offset"] == str(i + 1)


def test_range_read_and_stream_errors(gw_cluster, gw):
    topic = new_topic(gw_cluster, partitions=1)
    error(gw.get("/topics/nope/partitions/0/records", params={"offset": 0}), 404, 40401)
    error(gw.get(f"/topics/{topic}/partitions/3/records", params={"offset": 0}), 404, 40402)
    empty = gw.get(f"/topics/{topic}/partitions/0/records", params={"offset": 0}, headers={"accept": ARROW})
    assert pa.ipc.open_stream(empty.content).read_all().num_rows == 0 and empty.headers["odradek-next-offset"] == "0"
    bad = gw.post(f"/topics/{topic}/records", content=b'{"value": "aGk="}\n{"value": 5}\n',
                  headers={"content-type": "application/x-ndjson"})
    error(bad, 422, 422)
    error(gw.post(f"/topics/{topic}/records", content=ndjson([{"value": "aGk=", "partition": 9}]),
                  headers={"content-type": "application/x-ndjson"}), 404, 40402)
    assert gw.get(f"/topics/{topic}/partitions/0/offsets").json()["end_offset"] == 0, "a refused stream wrote"


def test_a_topic_max_message_bytes_refusal_is_a_41301_line(gw_cluster, gw):
    topic = f"gw-{uuid.uuid4().hex[:8]}"
    cid = gw.get("/v3/clusters").json()["data"][0]["cluster_id"]
    create = {"topic_name": topic, "partitions_count": 1, "configs": [{"name": "max.message.bytes", "value": "2000"}]}
    assert gw.post(f"/v3/clusters/{cid}/topics", json=create).status_code == 201
    big, small = {"value": b64(b"x" * 5000)}, {"value": b64(b"y")}
    assert stream_produce(gw, topic, [small]) == [{"partition": 0, "offset": 0}]
    [line] = stream_produce(gw, topic, [big])   # (a batch holding it would be refused whole, as in Kafka)
    assert line["error_code"] == 41301, line
    v2 = gw.post(f"/topics/{topic}", json={"records": [big]}, headers={"content-type": V2_BINARY}).json()
    assert v2["offsets"][0]["error_code"] == 1 and v2["offsets"][0]["offset"] is None, v2


def test_a_record_without_a_key_on_a_compacted_topic_answers_400(gw_cluster, gw):
    """The brokers refuse it INVALID_RECORD (docs/compaction.md): a client error naming the cause, not a 500."""
    topic = f"gw-{uuid.uuid4().hex[:8]}"
    cid = gw.get("/v3/clusters").json()["data"][0]["cluster_id"]
    create = {"topic_name": topic, "partitions_count": 1, "configs": [{"name": "cleanup.policy", "value": "compact"}]}
    assert gw.post(f"/v3/clusters/{cid}/topics", json=create).status_code == 201
    records = f"/v3/clusters/{cid}/topics/{topic}/records"
    assert gw.post(records, json={"key": {"type": "STRING", "data": "k"}, "value": {"type": "STRING", "data": "v"}}
                   ).json()["error_code"] == 200
    message = error(gw.post(records, json={"value": {"type": "STRING", "data": "v"}}), 400, 40002)
    assert "cleanup.policy includes compact" in message and "key" in message
    assert gw.get(f"/topics/{topic}/partitions/0/offsets").json()["end_offset"] == 1


def test_a_chunked_body_above_the_request_limit_answers_413(gw_cluster, tmp_path):
    topic = new_topic(gw_cluster, partitions=1)
    g = GatewayProcess(gw_cluster.bootstrap, tmp_path / "gw-limit.log", "--max-request-bytes", "10000")
    try:
        chunks = lambda n: (ndjson([{"value": b64(b"z" * 1000)}] * 5) for _ in range(n))  # noqa: E731
        with httpx.Client(base_url=g.url, timeout=30) as c:
            headers = {"content-type": "application/x-ndjson"}
            assert c.post(f"/topics/{topic}/records", content=chunks(1), headers=headers).status_code == 200
            error(c.post(f"/topics/{topic}/records", content=chunks(5), headers=headers), 413, 413)
            error(c.post(f"/topics/{topic}/records", content=b"x" * 20000, headers=headers), 413, 413)
            assert c.get(f"/topics/{topic}/partitions/0/offsets").json()["end_offset"] == 5, "a refused body wrote"
    finally:
        assert g.stop()


def self_signed_cert(directory) -> tuple[str, str]:
    """A certificate for 127.0.0.1 (its own CA) and its key, made by openssl."""
    cert, key = directory / "gw.crt", directory / "gw.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return str(cert), str(key)


def test_tls_serves_https_that_verifies_and_refuses_plain_http(gw_cluster, tmp_path):
    cert, key = self_signed_cert(tmp_path)
    trusted = ssl.create_default_context(cafile=cert)
    g = GatewayProcess(gw_cluster.bootstrap, tmp_path / "gw-tls.log", "--ssl-certfile", cert, "--ssl-keyfile", key,
                       verify=trusted)
    try:
        assert g.url.startswith("https://")
        with httpx.Client(base_url=g.url, verify=trusted, timeout=60) as c:
            topic = new_topic(gw_cluster, partitions=1)
            assert stream_produce(c, topic, [{"value": b64(b"over tls")}]) == [{"partition": 0, "offset": 0}]
            table = read_all_arrow(c, topic, 0)
            assert table.column("value").to_pylist() == [b"over tls"]
        cli = [sys.executable, "-m", "odradek.cli"]
        produced = subprocess.run([*cli, "produce", topic, "--gateway", g.url, "--gateway-ca", cert],
                                  input="second\n", capture_output=True, text=True, timeout=60)
        assert produced.returncode == 0, produced.stderr
        consumed = subprocess.run([*cli, "consume", topic, "--gateway", g.url, "--gateway-ca", cert,
                                   "--from-beginning", "--max-records", "2"], capture_output=True, text=True, timeout=60)
        assert consumed.stdout.splitlines() == ["over tls", "second"], consumed.stderr
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(g.url + "/healthz", timeout=10)          # the system CAs do not know it
        with pytest.raises(httpx.HTTPError):
            httpx.get(g.url.replace("https", "http") + "/healthz", timeout=10)
    finally:
        assert g.stop()


def test_offsets_by_timestamp(gw_cluster, gw):
    topic = new_topic(gw_cluster, partitions=1)
    t0 = int(time.time() * 1000) - 60_000
    stream_produce(gw, topic, [{"value": b64(b"%d" % i), "timestamp": t0 + 10 * i} for i in range(10)])
    at = lambda ts: gw.get(f"/topics/{topic}/partitions/0/offsets", params={"timestamp": ts}).json()  # noqa: E731
    assert at(t0) == {"timestamp": t0, "offset": 0}
    assert at(t0 + 41)["offset"] == 5
    assert at(t0 + 50_000)["offset"] is None


def test_v3_topic_admin(gw_cluster, gw):
    cluster_id = gw.get("/v3/clusters").json()["data"][0]["cluster_id"]
    base = f"/v3/clusters/{cluster_id}/topics"
    name = f"admin-{uuid.uuid4().hex[:6]}"
    created = gw.post(base, json={"topic_name": name, "partitions_count": 2, "replication_factor": 3,
                                  "configs": [{"name": "retention.ms", "value": "3600000"}]})
    assert created.status_code == 201, created.text
    assert created.json()["partitions_count"] == 2 and created.json()["replication_factor"] == 3
    error(gw.post(base, json={"topic_name": name, "partitions_count": 1}), 400, 40002)
    assert name in [t["topic_name"] for t in gw.get(base).json()["data"]]
    configs = {c["name"]: c for c in gw.get(f"{base}/{name}/configs").json()["data"]}
    assert configs["retention.ms"]["value"] == "3600000" and not configs["retention.ms"]["is_default"]
    alter = gw.post(f"{base}/{name}/configs:alter", json={"data": [{"name": "retention.ms", "value": "7200000"}]})
    assert alter.status_code == 204, alter.text
    wait_until(lambda: {c["name"]: c["value"] for c in gw.get(f"{base}/{name}/configs").json()["data"]}
               ["retention.ms"] == "7200000", 30, "the altered config to reach the brokers")
    assert gw.patch(f"{base}/{name}", json={"partitions_count": 4}).json()["partitions_count"] == 4
    error(gw.patch(f"{base}/{name}", json={"partitions_count": 2}), 400, 40002)
    assert gw.delete(f"{base}/{name}").status_code == 204
    wait_until(lambda: gw.get(f"{base}/{name}").status_code == 404, 30, "the deleted topic to disappear")
    error(gw.get(f"{base}/{name}"), 404, 40401)      # Confluent's "topic not found" (40403: consumer instance)
    error(gw.get("/v3/clusters/not-this-one/topics"), 404, 404)


def test_auth_tokens_and_rights(gw_cluster, gw, tmp_path):
    topic, secret = new_topic(gw_cluster, partitions=1), new_topic(gw_cluster, partitions=1)
    tokens = write_tokens(tmp_path / "tokens.json", [
        {"token": "writer-token", "name": "writer", "topics": {topic: "rw"}},
        {"token": "reader-token", "name": "reader", "topics": {"*": "r"}},
        {"token": "admin-token", "name": "ops", "admin": True}])
    g = GatewayProcess(gw_cluster.bootstrap, tmp_path / "gw-auth.log", "--auth-file", str(tokens))
    try:
        with httpx.Client(base_url=g.url, timeout=30) as c:
            body = {"records": [{"value": b64(b"x")}]}
            post = lambda t, token: c.post(f"/topics/{t}", json=body, headers={  # noqa: E731
                "content-type": V2_BINARY, **({"authorization": f"Bearer {token}"} if token else {})})
            error(post(topic, None), 401, 40101)
            error(post(topic, "wrong"), 401, 40101)
            assert post(topic, "writer-token").status_code == 200
            error(post(secret, "writer-token"), 403, 40301)
            error(post(topic, "reader-token"), 403, 40301)
            read = c.get(f"/topics/{secret}/partitions/0/records", params={"offset": 0},
                         headers={"authorization": "Bearer reader-token"})
            assert read.status_code == 200
            error(c.get(f"/topics/{secret}/partitions/0/records", params={"offset": 0},
                        headers={"authorization": "Bearer writer-token"}), 403, 40301)
            cid = c.get("/v3/clusters", headers={"authorization": "Bearer reader-token"}).json()["data"][0]["cluster_id"]
            new = {"topic_name": f"auth-{uuid.uuid4().hex[:6]}", "partitions_count": 1}
            error(c.post(f"/v3/clusters/{cid}/topics", json=new, headers={"authorization": "Bearer reader-token"}),
                  403, 40301)
            assert c.post(f"/v3/clusters/{cid}/topics", json=new,
                          headers={"authorization": "Bearer admin-token"}).status_code == 201
            _v3_views_rights(c, f"/v3/clusters/{cid}", topic, secret)
    finally:
        assert g.stop(), "the gateway did not shut down cleanly"


def _v3_views_rights(c: httpx.Client, cluster: str, topic: str, secret: str) -> None:
    """The console's v3 views behind tokens: each needs one, a topic's views its read right,
    group changes the admin right; this gateway has no --broker-metrics-urls: no throughput
    nor sizes, said so."""
    writer, ops = ({"authorization": f"Bearer {t}"} for t in ("writer-token", "admin-token"))
    for path in ("/brokers", "/overview", "/consumer-groups", f"/topics/{topic}/partitions"):
        error(c.get(cluster + path), 401, 40101)
        assert c.get(cluster + path, headers=writer).status_code == 200, path
    error(c.get(cluster + f"/topics/{secret}/partitions", headers=writer), 403, 40301)
    reset, body = cluster + f"/consumer-groups/rights-{uuid.uuid4().hex[:6]}", {"topic_name": topic, "to": "earliest"}
    error(c.post(reset + "/offsets:reset", json=body, headers=writer), 403, 40301)
    assert c.post(reset + "/offsets:reset", json=body, headers=ops).status_code == 200
    error(c.delete(reset, headers=writer), 403, 40301)
    assert c.delete(reset, headers=ops).status_code == 204
    feed = c.get(cluster + "/throughput", headers=writer).json()
    assert (feed["metrics_configured"], feed["data"], feed["bytes_in_total"]) == (False, [], 0)
    assert c.get(cluster + f"/topics/{topic}/offsets", headers=writer).json()["data"][0]["size_bytes"] is None


def test_instances_expire_and_release_their_partitions(gw_cluster, tmp_path):
    topic = new_topic(gw_cluster, partitions=1)
    g = GatewayProcess(gw_cluster.bootstrap, tmp_path / "gw-expiry.log", "--consumer-instance-timeout-ms", "1500")
    try:
        with httpx.Client(base_url=g.url, timeout=30) as c:
            group = f"g-{uuid.uuid4().hex[:6]}"
            base = c.post(f"/consumers/{group}", json={"format": "binary"}, headers={"content-type": V2}).json()["base_uri"]
            c.post(f"{base}/subscription", json={"topics": [topic]}, headers={"content-type": V2})
            c.get(f"{base}/records", params={"timeout": 500}, headers={"accept": V2_BINARY})
            assert "odradek_gateway_consumer_instances 1.0" in c.get("/metrics").text
            wait_until(lambda: "odradek_gateway_consumer_instances 0.0" in c.get("/metrics").text, 30,
                       "the idle instance to expire")   # (polling the instance itself would keep it alive)
            error(c.get(f"{base}/records"), 404, 40403)
    finally:
        assert g.stop()


def test_operability_endpoints(gw):
    assert gw.get("/healthz").json() == {"status": "ok"}
    ready = gw.get("/readyz").json()
    assert ready["status"] == "ready" and ready["brokers"] == 3
    spec = gw.get("/openapi.json").json()
    assert "/topics/{topic}/partitions/{partition}/records" in spec["paths"]
    assert gw.get("/docs").status_code == 200
    metrics = gw.get("/metrics").text
    assert 'odradek_gateway_requests_total{method="GET",route="/healthz",status="200"}' in metrics
    assert "odradek_gateway_request_seconds_bucket" in metrics


def test_a_consume_loop_through_the_gateway_survives_a_broker_kill(gw_cluster, gw):
    topic = new_topic(gw_cluster, partitions=3, rf=3)
    expected = 3000
    sent = stream_produce(gw, topic, [{"value": b64(b"%d" % i)} for i in range(expected // 2)])
    assert all("offset" in r for r in sent)
    group = f"g-{uuid.uuid4().hex[:6]}"
    base = gw.post(f"/consumers/{group}", json={"format": "binary", "auto.offset.reset": "earliest"},
                   headers={"content-type": V2}).json()["base_uri"]
    gw.post(f"{base}/subscription", json={"topics": [topic]}, headers={"content-type": V2})
    seen: set[bytes] = set()
    victim = gw_cluster.leader_id(topic, 0)
    killed = threading.Event()

    def loop():
        resp = gw.get(f"{base}/records", params={"timeout": 1000}, headers={"accept": V2_BINARY})
        assert resp.status_code == 200, resp.text
        seen.update(base64.b64decode(r["value"]) for r in resp.json())
        if len(seen) >= expected // 4 and not killed.is_set():
            gw_cluster.run("kill", str(victim))
            killed.set()
        return len(seen) >= expected // 2
    try:
        wait_until(loop, 120, "the first half through the gateway", interval=0)
        assert killed.is_set()
        more = stream_produce(gw, topic, [{"value": b64(b"%d" % i)} for i in range(expected // 2, expected)])
        assert all("offset" in r for r in more), [r for r in more if "offset" not in r][:3]
        wait_until(lambda: loop() and len(seen) >= expected, 120, "every record after the broker kill", interval=0)
    finally:
        gw_cluster.run("start", str(victim))
        gw.delete(base)
    assert seen == {b"%d" % i for i in range(expected)}


def test_partitions_added_later_are_served_at_once(gw_cluster, gw):
    """librdkafka learns of new partitions only at its periodic metadata refresh: the gateway
    must not answer 500 or 40402 for a partition added meanwhile."""
    from confluent_kafka.admin import NewPartitions
    topic = new_topic(gw_cluster, partitions=1)
    assert stream_produce(gw, topic, [{"value": b64(b"first")}])[0]["offset"] == 0   # clients now cache 1 partition
    assert gw.get(f"/topics/{topic}/partitions/0/offsets").status_code == 200
    admin = gw_cluster.admin()
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=60)
    gw_cluster.wait_for_leaders(topic, 3)
    assert gw.get(f"/topics/{topic}/partitions/2/offsets").json() == {"beginning_offset": 0, "end_offset": 0}
    assert stream_produce(gw, topic, [{"value": b64(b"new"), "partition": 2}]) == [{"partition": 2, "offset": 0}]
    rows = gw.get(f"/topics/{topic}/partitions/2/records", params={"offset": 0}).json()
    assert [base64.b64decode(r["value"]) for r in rows] == [b"new"]


def test_overview_counts_urp_and_offline_partitions_as_metadata_shows_them(gw_cluster, gw):
    """A broker stops (replicas out of sync, a partition without leader) and comes back; the v3
    overview says what librdkafka's Metadata says, then clears. Here, not in test_v3_cluster.py:
    this module's cluster already restarts a broker (a restarted cluster's teardown is slow)."""
    c = cluster_path(gw)
    replicated, single = new_topic(gw_cluster, partitions=1, rf=3), new_topic(gw_cluster, partitions=3)
    victim = gw_cluster.partition_leaders(single)[0]
    admin = gw_cluster.admin()

    def kafka_view() -> tuple[list, list]:
        topics = admin.list_topics(timeout=30).topics
        parts = [(t, p) for t in sorted(topics) for p in sorted(topics[t].partitions)]
        return ([{"topic_name": t, "partition_id": p} for t, p in parts
                 if len(topics[t].partitions[p].isrs) < len(topics[t].partitions[p].replicas)],
                [{"topic_name": t, "partition_id": p} for t, p in parts if topics[t].partitions[p].leader < 0])

    def agree(urp_expected: bool):
        urp, offline = kafka_view()
        ov = gw.get(c + "/overview").json()
        mine = (ov["under_replicated_partitions"], ov["offline_partitions"])
        hit = {"topic_name": replicated, "partition_id": 0} in urp and {"topic_name": single, "partition_id": 0} in offline
        return mine == (urp, offline) and (hit if urp_expected else not urp and not offline) and ov
    gw_cluster.run("kill", "--graceful", str(victim))
    try:
        ov = wait_until(lambda: agree(True), 60, "the overview to show the URP and offline partitions")
        assert ov["offline_partitions_count"] == len(ov["offline_partitions"]) >= 1
        replicas = gw.get(c + f"/topics/{replicated}/partitions/0/replicas").json()["data"]
        assert [r["is_in_sync"] for r in replicas if r["broker_id"] == victim] == [False]
        assert gw.get(c + f"/topics/{single}/partitions/0").json()["leader"] is None
    finally:
        gw_cluster.run("start", str(victim))
    wait_until(lambda: agree(False), 90, "the URP and offline partitions to clear")
