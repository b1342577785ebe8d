"""REST Proxy v2 through the gateway with httpx, against a real dev cluster: metadata, produce
in the json and binary formats, consumer instances, and the error bodies the v2 documentation
gives (40401, 40402, 40403, 406/40601, 409/40902, 415, 422, 400)."""

from __future__ import annotations

import base64
import uuid

import pytest

from odradek.client import GatewayClient
from odradek.dev.waiting import wait_until
from tests.support.clients import confluent_consume
from tests.support.gateway import V2, V2_BINARY, V2_JSON
from tests.support.kafka_tools import CONSOLE_PRODUCER, Endpoint, require_kafka
from tests.support.keys import KEYS, java_partition


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def new_topic(c, partitions: int = 3, rf: int = 1) -> str:
    name = f"gw-{uuid.uuid4().hex[:8]}"
    c.create_topic(name, partitions=partitions, replication_factor=rf)
    return name


def error(resp, status: int, code: int) -> str:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["error_code"] == code and body["message"], body
    return body["message"]


def test_metadata_endpoints(gw_cluster, gw):
    topic = new_topic(gw_cluster, partitions=3, rf=3)
    assert topic in gw.get("/topics").json()
    t = gw.get(f"/topics/{topic}").json()
    assert t["name"] == topic and [p["partition"] for p in t["partitions"]] == [0, 1, 2]
    parts = gw.get(f"/topics/{topic}/partitions").json()
    assert all(len(p["replicas"]) == 3 and sum(r["leader"] for r in p["replicas"]) == 1 for p in parts)
    p1 = gw.get(f"/topics/{topic}/partitions/1").json()
    assert p1["partition"] == 1 and p1["leader"] in (1, 2, 3)
    assert gw.get(f"/topics/{topic}/partitions/1/offsets").json() == {"beginning_offset": 0, "end_offset": 0}
    assert gw.get("/brokers").json() == {"brokers": [1, 2, 3]}
    error(gw.get("/topics/no-such-topic"), 404, 40401)
    error(gw.get(f"/topics/{topic}/partitions/7"), 404, 40402)
    error(gw.get(f"/topics/{topic}/partitions/7/offsets"), 404, 40402)


@pytest.mark.parametrize("fmt", ["json", "binary"])
def test_produce_in_both_formats_reads_back_with_a_kafka_client(gw_cluster, gw, fmt):
    topic = new_topic(gw_cluster, partitions=3)
    if fmt == "json":
        records = [{"key": {"id": i}, "value": {"n": i, "tags": ["a", i]}} for i in range(30)]
        expect = [(b'{"id":%d}' % i, b'{"n":%d,"tags":["a",%d]}' % (i, i)) for i in range(30)]
        kind = V2_JSON
    else:
        records = [{"key": b64(b"k%d" % i), "value": b64(b"\x00\xffv%d" % i)} for i in range(30)]
        expect = [(b"k%d" % i, b"\x00\xffv%d" % i) for i in range(30)]
        kind = V2_BINARY
    resp = gw.post(f"/topics/{topic}", json={"records": records}, headers={"content-type": kind})
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith(V2)
    offsets = resp.json()["offsets"]
    assert len(offsets) == 30 and all(o["error_code"] is None and o["offset"] >= 0 for o in offsets)
    pinned = gw.post(f"/topics/{topic}/partitions/2", json={"records": [records[0]]}, headers={"content-type": kind})
    assert pinned.json()["offsets"][0]["partition"] == 2
    got, _ = confluent_consume(gw_cluster.bootstrap, topic, 3, 31)
    assert sorted((g.key, g.value) for g in got) == sorted(expect + [expect[0]])


def test_produce_errors(gw_cluster, gw):
    topic = new_topic(gw_cluster, partitions=1)
    ok = {"records": [{"value": b64(b"x")}]}
    error(gw.post("/topics/no-such-topic", json=ok, headers={"content-type": V2_BINARY}), 404, 40401)
    error(gw.post(f"/topics/{topic}/partitions/5", json=ok, headers={"content-type": V2_BINARY}), 404, 40402)
    error(gw.post(f"/topics/{topic}", content=b"x", headers={"content-type": "text/plain"}), 415, 415)
    error(gw.post(f"/topics/{topic}", content=b"{not json", headers={"content-type": V2_BINARY}), 400, 400)
    error(gw.post(f"/topics/{topic}", json={"recs": []}, headers={"content-type": V2_BINARY}), 422, 422)
    error(gw.post(f"/topics/{topic}", json={"records": [{"value": "***"}]},
                  headers={"content-type": V2_BINARY}), 422, 422)
    error(gw.post(f"/topics/{topic}", json={"records": [{"value": b64(b"x" * 1_100_000)}]},
                  headers={"content-type": V2_BINARY}), 413, 41301)
    assert gw.get(f"/topics/{topic}/partitions/0/offsets").json()["end_offset"] == 0, "a refused request wrote"


def test_an_unacceptable_accept_header_answers_406(gw_cluster, gw):
    topic = new_topic(gw_cluster, partitions=1)
    error(gw.get("/topics", headers={"accept": "text/html"}), 406, 406)
    error(gw.get(f"/topics/{topic}/partitions/0/offsets", headers={"accept": "application/xml"}), 406, 406)
    for accept in (V2, "application/json", "*/*", "application/*", "text/html, application/json;q=0.5"):
        assert gw.get("/topics", headers={"accept": accept}).status_code == 200, accept


def _consume_all(gw, base: str, accept: str, expected: int) -> list[dict]:
    got: list[dict] = []
    def more():
        resp = gw.get(f"{base}/records", params={"timeout": 1000}, headers={"accept": accept})
        assert resp.status_code == 200, resp.text
        got.extend(resp.json())
        return len(got) >= expected
    wait_until(more, 60, f"{expected} records through the consumer instance", interval=0)
    return got


@pytest.mark.parametrize("fmt", ["json", "binary"])
def test_consumer_instance_subscribe_read_commit_and_delete(gw_cluster, gw, fmt):
    topic = new_topic(gw_cluster, partitions=3)
    kind = V2_JSON if fmt == "json" else V2_BINARY
    values = [{"n": i} for i in range(20)] if fmt == "json" else [b64(b"v%d" % i) for i in range(20)]
    gw.post(f"/topics/{topic}", json={"records": [{"value": v} for v in values]}, headers={"content-type": kind})
    group = f"g-{uuid.uuid4().hex[:6]}"
    created = gw.post(f"/consumers/{group}", json={"name": "c1", "format": fmt, "auto.offset.reset": "earliest",
                                                   "auto.commit.enable": "false"}, headers={"content-type": V2})
    assert created.status_code == 200, created.text
    base = created.json()["base_uri"]
    assert base.endswith(f"/consumers/{group}/instances/c1")
    error(gw.post(f"/consumers/{group}", json={"name": "c1"}, headers={"content-type": V2}), 409, 40902)
    assert gw.post(f"{base}/subscription", json={"topics": [topic]}, headers={"content-type": V2}).status_code == 204
    assert gw.get(f"{base}/subscription").json() == {"topics": [topic]}
    other = V2_BINARY if fmt == "json" else V2_JSON
    error(gw.get(f"{base}/records", headers={"accept": other}), 406, 40601)
    got = _consume_all(gw, base, kind, 20)
    assert sorted(map(str, (r["value"] for r in got))) == sorted(map(str, values))
    assert gw.post(f"{base}/offsets", headers={"content-type": V2}).status_code == 200   # all returned records
    parts = {"partitions": [{"topic": topic, "partition": p} for p in range(3)]}
    committed = gw.request("GET", f"{base}/offsets", json=parts, headers={"content-type": V2}).json()["offsets"]
    ends = [gw.get(f"/topics/{topic}/partitions/{p}/offsets").json()["end_offset"] for p in range(3)]
    assert [o["offset"] for o in sorted(committed, key=lambda o: o["partition"])] == [e or -1 for e in ends], \
        "committed = the log end where records were read, nothing (-1) where none were"
    assert gw.delete(f"{base}/subscription").status_code == 204
    assert gw.delete(base).status_code == 204
    error(gw.get(f"{base}/records", headers={"accept": kind}), 404, 40403)


def test_manual_assignment_and_positions(gw_cluster, gw):
    topic = new_topic(gw_cluster, partitions=2)
    gw.post(f"/topics/{topic}/partitions/0", json={"records": [{"value": b64(b"%d" % i)} for i in range(10)]},
            headers={"content-type": V2_BINARY})
    group = f"g-{uuid.uuid4().hex[:6]}"
    base = gw.post(f"/consumers/{group}", json={"format": "binary"}, headers={"content-type": V2}).json()["base_uri"]
    assign = {"partitions": [{"topic": topic, "partition": 0}]}
    assert gw.post(f"{base}/assignments", json=assign, headers={"content-type": V2}).status_code == 204
    assert gw.get(f"{base}/assignments").json() == assign
    error(gw.post(f"{base}/subscription", json={"topics": [topic]}, headers={"content-type": V2}), 409, 40903)
    assert gw.post(f"{base}/positions/beginning", json=assign, headers={"content-type": V2}).status_code == 204
    assert [r["offset"] for r in _consume_all(gw, base, V2_BINARY, 10)] == list(range(10))
    seek = {"offsets": [{"topic": topic, "partition": 0, "offset": 7}]}
    assert gw.post(f"{base}/positions", json=seek, headers={"content-type": V2}).status_code == 204
    assert [r["offset"] for r in _consume_all(gw, base, V2_BINARY, 3)] == [7, 8, 9]
    commit = {"offsets": [{"topic": topic, "partition": 0, "offset": 4}]}
    assert gw.post(f"{base}/offsets", json=commit, headers={"content-type": V2}).status_code == 200
    committed = gw.request("GET", f"{base}/offsets", json=assign, headers={"content-type": V2}).json()
    assert committed["offsets"][0]["offset"] == 5, "the committed offset is the next to read (REST Proxy v2)"
    assert gw.post(f"{base}/positions/end", json=assign, headers={"content-type": V2}).status_code == 204
    assert gw.get(f"{base}/records", params={"timeout": 500}, headers={"accept": V2_BINARY}).json() == []
    error(gw.post(f"{base}/assignments", json={"partitions": [{"topic": "nope", "partition": 0}]},
                  headers={"content-type": V2}), 404, 40401)
    gw.delete(base)


def test_unknown_instances_say_where_they_live(gw):
    error(gw.get("/consumers/g/instances/nobody/records"), 404, 40403)
    msg = error(gw.get("/consumers/g/instances/rest-consumer-0badc0de-123456789abc/records"), 404, 40403)
    assert "another gateway replica" in msg


def test_produce_and_consume_commands_go_through_the_gateway(gw_cluster):
    import subprocess
    import sys
    topic = new_topic(gw_cluster, partitions=2)
    cli = [sys.executable, "-m", "odradek.cli"]
    produced = subprocess.run([*cli, "produce", topic, "--gateway", gw_cluster.gateway, "--key-separator", ":"],
                              input="k1:hello\nk2:world\nplain\n", capture_output=True, text=True, timeout=60)
    assert produced.returncode == 0 and "3 records written" in produced.stderr, produced.stderr
    consumed = subprocess.run([*cli, "consume", topic, "--gateway", gw_cluster.gateway, "--from-beginning",
                               "--max-records", "3", "--print-key"], capture_output=True, text=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.splitlines()) == sorted(["k1\thello", "k2\tworld", "\tplain"])
    missing = subprocess.run([*cli, "consume", "no-such-topic", "--gateway", gw_cluster.gateway],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode != 0 and "not found" in missing.stderr


def test_keys_land_where_kafkas_java_producer_puts_them(gw_cluster, gw):
    """A key lands on the same partition through v2 produce, through the streaming produce (the
    Spark sink's and ``odradek produce``'s path) and from Kafka's Java console producer: Java's
    default partitioner (murmur2 of the key bytes), not librdkafka's CRC32 default."""
    require_kafka()
    partitions = 6
    want = {k: java_partition(k, partitions) for k in KEYS}
    assert len(set(want.values())) == partitions   # every partition gets keys
    v2, stream, java = (new_topic(gw_cluster, partitions) for _ in range(3))
    resp = gw.post(f"/topics/{v2}", json={"records": [{"key": b64(k), "value": b64(b"v")} for k in KEYS]},
                   headers={"content-type": V2_BINARY})
    assert resp.status_code == 200, resp.text
    assert dict(zip(KEYS, (o["partition"] for o in resp.json()["offsets"]))) == want
    with GatewayClient(gw_cluster.gateway) as client:
        produced = client.produce(stream, [{"key": k, "value": b"v"} for k in KEYS])
    assert dict(zip(KEYS, (p.partition for p in produced))) == want
    sent = Endpoint("odradek", gw_cluster.bootstrap).tool(
        CONSOLE_PRODUCER, "--topic", java, "--property", "parse.key=true",
        input="".join(f"{k.decode()}\tv\n" for k in KEYS))
    assert sent.returncode == 0, sent.stderr[-3000:]
    got, _ = confluent_consume(gw_cluster.bootstrap, java, partitions, len(KEYS))
    assert {g.key: g.partition for g in got} == want
