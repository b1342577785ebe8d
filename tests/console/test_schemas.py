"""The console and the schema registry, on the package's one dev cluster: an Avro record produced
through the gateway's v3 records route shows in the message browser decoded (the gateway's
``?schemas=true`` range read) with a "schema id N (subject vK)" badge and its raw bytes; the
Schemas view lists the subject with its version and compatibility level and shows the schema's
text; a record produced from the console's form in the AVRO format reads back decoded; the range
read decodes a JSON Schema key and a Protobuf value as well. Waits are Playwright's ``expect``,
never sleeps."""

from __future__ import annotations

import json
import re
import uuid

import httpx

try:
    from playwright.sync_api import expect
except ImportError:      # the browser fixture then skips, or fails under ODRADEK_REQUIRE_TOOLS=1, saying why
    expect = None

MEDIA = "application/vnd.schemaregistry.v1+json"
PERSON_JSON = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
PERSON_PROTO = 'syntax = "proto3";\npackage odradek.console;\nmessage Person {\n  string name = 1;\n  int32 age = 2;\n}\n'
ORDER = {"type": "record", "name": "Order", "namespace": "odradek.console",
         "fields": [{"name": "id", "type": "int"}, {"name": "item", "type": "string"}]}


def _registered(gateway: str, topic: str) -> int:
    """The topic's value subject with ORDER (compatibility FULL) and one Avro record written
    through the v3 records route; the schema's id."""
    subject = f"{topic}-value"
    with httpx.Client(base_url=gateway, timeout=30) as http:
        answer = http.post(f"/subjects/{subject}/versions", headers={"Content-Type": MEDIA},
                           json={"schema": json.dumps(ORDER)})
        assert answer.status_code == 200, answer.text
        http.put(f"/config/{subject}", headers={"Content-Type": MEDIA},
                 json={"compatibility": "FULL"}).raise_for_status()
        cluster = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
        produced = http.post(f"/v3/clusters/{cluster}/topics/{topic}/records",
                             json={"partition_id": 0, "value": {"type": "AVRO", "data": {"id": 7, "item": "tea"}}})
        assert produced.status_code == 200, produced.text
        assert produced.json()["offset"] == 0
        return answer.json()["id"]


def test_framed_records_decoded_subjects_listed_and_produced_with_a_schema(page, shot, console_cluster):
    topic = f"console-avro-{uuid.uuid4().hex[:8]}"
    console_cluster.create_topic(topic, partitions=1, replication_factor=3)
    schema_id = _registered(console_cluster.gateway, topic)
    badge = f"schema id {schema_id} ({topic}-value v1)"

    page.goto(f"/console/#/topics/{topic}/messages")
    browse = page.get_by_role("form", name="Browse messages")
    browse.get_by_label("Offset").fill("0")
    browse.get_by_role("button", name="Read").click()
    records = page.locator("#records")
    expect(page.locator("#browse-status")).to_contain_text("1 record(s) of partition 0 from offset 0")
    expect(records).to_contain_text('"item": "tea"')        # decoded on the server, shown as JSON
    expect(records).to_contain_text(badge)
    records.get_by_text("Raw bytes").first.click()
    framed = bytes([0]) + schema_id.to_bytes(4, "big") + bytes([0x0e, 0x06]) + b"tea"   # magic, id, Avro data
    expect(records).to_contain_text(framed.hex(" "))
    shot("decoded-avro")

    page.goto("/console/#/schemas")
    subjects = page.get_by_role("table", name=re.compile("subjects"))
    row = subjects.get_by_role("row", name=re.compile(f"^{topic}-value "))
    expect(row).to_contain_text("v1")
    expect(row).to_contain_text("FULL")
    row.get_by_role("link", name=f"{topic}-value").click()
    expect(page.get_by_role("heading", name=f"Subject {topic}-value")).to_be_visible()
    expect(page.locator("#subject-level")).to_have_text("FULL")
    versions = page.get_by_role("table", name="Versions")
    expect(versions).to_contain_text('"name": "Order"')
    expect(versions.locator("tbody tr")).to_have_count(1)
    shot("subject")

    page.goto(f"/console/#/topics/{topic}/messages")
    produce = page.get_by_role("form", name="Produce a record")
    produce.get_by_label("Format").select_option("AVRO")
    expect(produce.get_by_label("Subject")).to_have_value(f"{topic}-value")
    produce.get_by_label("Key").fill("k-8")
    produce.get_by_label("Value").fill('{"id": 8, "item": "coffee"}')
    produce.get_by_role("button", name="Produce").click()
    expect(page.locator("#produce-result")).to_contain_text("Produced to partition 0 at offset 1.")
    browse.get_by_label("Offset").fill("1")          # the form selected the new record's offset
    browse.get_by_role("button", name="Read").click()
    expect(page.locator("#browse-status")).to_contain_text("1 record(s) of partition 0 from offset 1")
    expect(records).to_contain_text('"item": "coffee"')
    expect(records).to_contain_text(badge)
    expect(records).to_contain_text("k-8")
    shot("produced-with-avro")

    # the range read's answer as the console gets it: the raw bytes, and the value decoded
    read = httpx.get(f"{console_cluster.gateway}/topics/{topic}/partitions/0/records",
                     params={"offset": 0, "schemas": "true"}, timeout=30).json()
    assert [r["value_schema"] for r in read] == [
        {"id": schema_id, "type": "AVRO", "subject": f"{topic}-value", "version": 1, "data": data}
        for data in ({"id": 7, "item": "tea"}, {"id": 8, "item": "coffee"})]
    assert "key_schema" not in read[1] and read[1]["key"] and read[1]["value"]   # a STRING key: not framed


def test_the_range_read_decodes_json_schema_and_protobuf_too(console_cluster):
    """A JSON Schema key and a Protobuf value, each written with its text (registered as new)."""
    topic = f"console-proto-{uuid.uuid4().hex[:8]}"
    console_cluster.create_topic(topic, partitions=1, replication_factor=3)
    with httpx.Client(base_url=console_cluster.gateway, timeout=30) as http:
        cluster = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
        produced = http.post(f"/v3/clusters/{cluster}/topics/{topic}/records", json={
            "key": {"type": "JSONSCHEMA", "schema": json.dumps(PERSON_JSON), "data": {"name": "ada"}},
            "value": {"type": "PROTOBUF", "schema": PERSON_PROTO, "data": {"name": "bo", "age": 3}}})
        assert produced.status_code == 200, produced.text
        key_id, value_id = produced.json()["key"]["schema_id"], produced.json()["value"]["schema_id"]
        [record] = http.get(f"/topics/{topic}/partitions/0/records", params={"offset": 0, "schemas": "true"}).json()
    assert record["key_schema"] == {"id": key_id, "type": "JSONSCHEMA", "subject": f"{topic}-key", "version": 1,
                                    "data": {"name": "ada"}}
    assert record["value_schema"] == {"id": value_id, "type": "PROTOBUF", "subject": f"{topic}-value", "version": 1,
                                      "data": {"name": "bo", "age": 3}}
