"""The schema registry in the gateway, against Confluent's own Python client and serializers
(``confluent_kafka.schema_registry``): register, evolve, refuse an incompatible change with 409,
records written with Avro, JSON Schema and Protobuf serializers read back, by Kafka consumers and
through the gateway's avro/jsonschema/protobuf consumers; records produced through the gateway's
v2 schema formats and v3 AVRO data read with the deserializers, and a record not matching its
schema refused (42203) with nothing written; v3 BINARY and JSON data written as their bytes; a
subject's own compatibility level (``/config/{subject}``) over the global one until deleted; two
gateway replicas registering at once never reuse an id, a replica started afresh has every schema,
and after every broker restarted the registry answers every schema and gives the next id."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.dev.waiting import wait_until
from tests.support.gateway import V2, GatewayProcess, write_tokens

MEDIA = "application/vnd.schemaregistry.v1+json"
USER_V1 = {"type": "record", "name": "User", "namespace": "odradek.test",
           "fields": [{"name": "name", "type": "string"}]}
USER_V2 = {**USER_V1, "fields": USER_V1["fields"] + [{"name": "age", "type": "int", "default": 0}]}
USER_BAD = {**USER_V1, "fields": USER_V1["fields"] + [{"name": "email", "type": "string"}]}   # no default
PERSON_JSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
               "required": ["name"]}
PERSON_PROTO = 'syntax = "proto3";\npackage odradek.test;\nmessage Person {\n  string name = 1;\n  int32 age = 2;\n}\n'


def _subject() -> str:
    return f"t{uuid.uuid4().hex[:10]}-value"


@pytest.fixture
def registry(gw_cluster) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": gw_cluster.gateway})


def test_the_confluent_client_registers_evolves_and_is_refused_an_incompatible_change(gw_cluster, registry, gw):
    assert gw_cluster.status()["schema_registry"] == gw_cluster.gateway
    subject = _subject()
    first = registry.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
    assert registry.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO")) == first   # idempotent
    assert registry.get_compatibility(subject_name=None) == "BACKWARD"
    assert registry.test_compatibility(subject, Schema(json.dumps(USER_V2), "AVRO"))
    second = registry.register_schema(subject, Schema(json.dumps(USER_V2), "AVRO"))
    assert second != first and registry.get_versions(subject) == [1, 2]
    with pytest.raises(SchemaRegistryError) as refused:
        registry.register_schema(subject, Schema(json.dumps(USER_BAD), "AVRO"))
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    latest = registry.get_latest_version(subject)
    assert (latest.version, latest.schema_id) == (2, second)
    assert registry.lookup_schema(subject, Schema(json.dumps(USER_V1), "AVRO")).version == 1
    assert json.loads(registry.get_schema(first).schema_str) == USER_V1

    verbose = gw.post(f"/compatibility/subjects/{subject}/versions/latest?verbose=true",
                      json={"schema": json.dumps(USER_BAD)}).json()
    assert verbose["is_compatible"] is False and "READER_FIELD_MISSING_DEFAULT_VALUE" in verbose["messages"][0]
    registry.set_compatibility(subject, "NONE")
    assert registry.get_compatibility(subject) == "NONE"
    assert registry.register_schema(subject, Schema(json.dumps(USER_BAD), "AVRO")) not in (first, second)

    assert gw.get(f"/schemas/ids/{first}/versions").json() == [{"subject": subject, "version": 1}]
    answer = gw.get(f"/subjects/{subject}/versions/1")
    assert answer.headers["content-type"] == MEDIA and answer.json()["id"] == first
    assert gw.get(f"/subjects/{subject}/versions/9").json()["error_code"] == 40402
    assert gw.get("/subjects/nothing-here/versions").json()["error_code"] == 40401
    assert gw.get("/schemas/ids/999999").json()["error_code"] == 40403
    assert gw.post(f"/subjects/{subject}/versions", json={"schema": "{nope"}).json()["error_code"] == 42201
    assert gw.get(f"/subjects/{subject}/versions/zero").json()["error_code"] == 42202
    assert gw.put("/config", json={"compatibility": "SIDEWAYS"}).json()["error_code"] == 42203
    assert sorted(gw.get("/schemas/types").json()) == ["AVRO", "JSON", "PROTOBUF"]

    # soft delete, then permanent: the versions go, the ids stay readable until no subject uses them
    assert registry.delete_version(subject, 1) == 1
    assert registry.get_versions(subject) == [2, 3]
    assert gw.delete(f"/subjects/{subject}/versions/2?permanent=true").json()["error_code"] == 40407
    assert registry.delete_subject(subject) == [2, 3]
    assert subject not in registry.get_subjects()
    assert registry.delete_subject(subject, permanent=True) == [1, 2, 3]
    assert gw.get(f"/subjects/{subject}/versions?deleted=true").json()["error_code"] == 40401


def test_references_and_modes(registry, gw):
    address, user = _subject(), _subject()
    address_schema = {"type": "record", "name": "Address", "namespace": "odradek.test",
                      "fields": [{"name": "city", "type": "string"}]}
    registry.register_schema(address, Schema(json.dumps(address_schema), "AVRO"))
    with_ref = {"type": "record", "name": "Customer", "namespace": "odradek.test",
                "fields": [{"name": "home", "type": "odradek.test.Address"}]}
    body = {"schema": json.dumps(with_ref),
            "references": [{"name": "odradek.test.Address", "subject": address, "version": 1}]}
    schema_id = gw.post(f"/subjects/{user}/versions", json=body).json()["id"]
    assert gw.get(f"/subjects/{address}/versions/1/referencedby").json() == [schema_id]
    assert gw.delete(f"/subjects/{address}/versions/1").json()["error_code"] == 42206
    assert gw.post(f"/subjects/{user}/versions", json={**body, "references": [
        {"name": "odradek.test.Address", "subject": address, "version": 7}]}).json()["error_code"] == 42201

    assert gw.put(f"/mode/{user}", json={"mode": "READONLY"}).json() == {"mode": "READONLY"}
    refused = gw.post(f"/subjects/{user}/versions", json={"schema": json.dumps(address_schema)}).json()
    assert refused["error_code"] == 42205
    assert gw.delete(f"/mode/{user}").json() == {"mode": "READONLY"}
    assert gw.get(f"/mode/{user}").json()["error_code"] == 40409
    assert gw.get(f"/mode/{user}?defaultToGlobal=true").json() == {"mode": "READWRITE"}
    assert gw.put("/mode", json={"mode": "SIDEWAYS"}).json()["error_code"] == 42204



def test_a_subject_level_overrides_the_global_one_until_deleted(gw):
    subject, unset = _subject(), _subject()
    # drops "name" and adds "nick" with a default: BACKWARD (reads v1's data), not FORWARD (v1 needs name)
    renamed = {"schema": json.dumps({**USER_V1, "fields": [{"name": "nick", "type": "string", "default": ""}]})}
    assert gw.post(f"/subjects/{subject}/versions", json={"schema": json.dumps(USER_V1)}).status_code == 200
    global_level = gw.get("/config").json()["compatibilityLevel"]
    assert global_level == "BACKWARD"
    assert gw.put(f"/config/{subject}", json={"compatibility": "FORWARD"}).json() == {"compatibility": "FORWARD"}
    assert gw.get(f"/config/{subject}").json() == {"compatibilityLevel": "FORWARD"}
    refused = gw.post(f"/subjects/{subject}/versions", json=renamed)
    assert (refused.status_code, refused.json()["error_code"]) == (409, 409), refused.text
    assert gw.get("/config").json() == {"compatibilityLevel": global_level}   # the global level untouched
    assert gw.get(f"/config/{unset}").json()["error_code"] == 40408
    assert gw.get(f"/config/{unset}?defaultToGlobal=true").json() == {"compatibilityLevel": global_level}

    assert gw.delete(f"/config/{subject}").json() == {"compatibilityLevel": "FORWARD"}   # the level deleted
    assert gw.get(f"/config/{subject}").json()["error_code"] == 40408
    assert gw.get(f"/config/{subject}?defaultToGlobal=true").json() == {"compatibilityLevel": global_level}
    allowed = gw.post(f"/subjects/{subject}/versions", json=renamed)
    assert allowed.status_code == 200, allowed.text
    assert gw.get(f"/subjects/{subject}/versions").json() == [1, 2]


def test_import_mode_keeps_the_ids_and_versions_it_is_given(gw):
    """IMPORT, as Confluent's migration tools use it: only an empty subject (unless forced), and
    the schema keeps the id and version given; other modes refuse a given id (42205)."""
    subject, schema_id = _subject(), 1_000_000 + uuid.uuid4().int % 1_000_000
    schema = json.dumps({"type": "record", "name": "Imported", "namespace": "odradek.test",
                         "fields": [{"name": "n", "type": "long"}]})
    assert gw.put(f"/mode/{subject}", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
    imported = gw.post(f"/subjects/{subject}/versions", json={"schema": schema, "id": schema_id, "version": 3})
    assert imported.json() == {"id": schema_id}, imported.text
    assert gw.get(f"/subjects/{subject}/versions/3").json()["id"] == schema_id
    assert json.loads(gw.get(f"/schemas/ids/{schema_id}").json()["schema"])["name"] == "Imported"
    assert gw.put(f"/mode/{subject}", json={"mode": "IMPORT"}).json()["error_code"] == 42205   # not empty
    assert gw.put(f"/mode/{subject}?force=true", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
    assert gw.put(f"/mode/{subject}", json={"mode": "READWRITE"}).json() == {"mode": "READWRITE"}
    given = gw.post(f"/subjects/{subject}/versions", json={"schema": schema, "id": schema_id + 1})
    assert given.json()["error_code"] == 42205

def _proto_class(tmp_path):
    (tmp_path / "person.proto").write_text(PERSON_PROTO)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp_path}", f"--python_out={tmp_path}",
                    "person.proto"], check=True)
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module("person_pb2").Person
    finally:
        sys.path.remove(str(tmp_path))


def _round_trip(gw_cluster, topic: str, serialize, deserialize, values: list) -> list:
    producer = Producer({"bootstrap.servers": gw_cluster.bootstrap})
    for value in values:
        producer.produce(topic, value=serialize(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": gw_cluster.bootstrap, "group.id": f"{topic}-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []
    try:
        while len(got) < len(values):
            msg = consumer.poll(30)
            assert msg is not None and msg.error() is None, msg and msg.error()
            assert msg.value()[0] == 0     # the Confluent wire format: magic byte, then the schema id
            got.append(deserialize(msg.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    return got


def test_records_written_with_the_serializers_read_back(gw_cluster, registry, gw, tmp_path):
    people = [{"name": "ada", "age": 36}, {"name": "alan", "age": 41}]
    avro_topic, json_topic, proto_topic = (f"sr-{kind}-{uuid.uuid4().hex[:6]}" for kind in ("avro", "json", "proto"))
    for topic in (avro_topic, json_topic, proto_topic):
        gw_cluster.create_topic(topic, partitions=1, replication_factor=1)

    avro = json.dumps({"type": "record", "name": "Person", "fields": [
        {"name": "name", "type": "string"}, {"name": "age", "type": "int"}]})
    got = _round_trip(gw_cluster, avro_topic, AvroSerializer(registry, avro), AvroDeserializer(registry), people)
    assert got == people

    got = _round_trip(gw_cluster, json_topic, JSONSerializer(json.dumps(PERSON_JSON), registry),
                      JSONDeserializer(None, schema_registry_client=registry), people)
    assert got == people

    person = _proto_class(tmp_path)
    got = _round_trip(gw_cluster, proto_topic, ProtobufSerializer(person, registry, {"use.deprecated.format": False}),
                      ProtobufDeserializer(person, {"use.deprecated.format": False}),
                      [person(name=p["name"], age=p["age"]) for p in people])
    assert [(p.name, p.age) for p in got] == [(p["name"], p["age"]) for p in people]
    for topic, kind in ((json_topic, "JSON"), (proto_topic, "PROTOBUF")):
        assert registry.get_latest_version(f"{topic}-value").schema.schema_type == kind

    # the same records through the gateway's consumers of each schema format: decoded by the registry
    for topic, fmt in ((avro_topic, "avro"), (json_topic, "jsonschema"), (proto_topic, "protobuf")):
        got = _gateway_consume(gw, topic, fmt, len(people))
        assert [r["value"] for r in got] == people, fmt
        assert [r["key"] for r in got] == [None] * len(people)


def _gateway_consume(gw, topic: str, fmt: str, expected: int) -> list[dict]:
    """Every record of ``topic`` (partition 0) through a v2 consumer instance of format ``fmt``."""
    created = gw.post(f"/consumers/{topic}-{fmt}", json={"format": fmt, "auto.offset.reset": "earliest"},
                      headers={"content-type": V2})
    assert created.status_code == 200, created.text
    base = created.json()["base_uri"]
    try:
        assert gw.post(f"{base}/assignments", json={"partitions": [{"topic": topic, "partition": 0}]},
                       headers={"content-type": V2}).status_code == 204
        got: list[dict] = []

        def more() -> bool:
            answer = gw.get(f"{base}/records", params={"timeout": 1000},
                            headers={"accept": f"application/vnd.kafka.{fmt}.v2+json"})
            assert answer.status_code == 200, answer.text
            assert answer.headers["content-type"] == f"application/vnd.kafka.{fmt}.v2+json"
            got.extend(answer.json())
            return len(got) >= expected
        wait_until(more, 60, f"{expected} {fmt} records through the gateway", interval=0)
        return got
    finally:
        gw.delete(base)


def _kafka_read(gw_cluster, topic: str, deserialize_key, deserialize_value, expected: int) -> list[tuple]:
    """(key, value) of ``topic``'s records, read by a Kafka consumer with Confluent's deserializers."""
    consumer = Consumer({"bootstrap.servers": gw_cluster.bootstrap, "group.id": f"{topic}-kafka",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []
    try:
        while len(got) < expected:
            msg = consumer.poll(30)
            assert msg is not None and msg.error() is None, msg and msg.error()
            key_ctx = SerializationContext(topic, MessageField.KEY)
            value_ctx = SerializationContext(topic, MessageField.VALUE)
            got.append((deserialize_key(msg.key(), key_ctx) if msg.key() is not None else None,
                        deserialize_value(msg.value(), value_ctx)))
    finally:
        consumer.close()
    return got


def _cluster_id(gw) -> str:
    return gw.get("/v3/clusters").json()["data"][0]["cluster_id"]


def _post(gw, path: str, fmt: str, body: dict) -> httpx.Response:
    return gw.post(path, json=body, headers={"content-type": f"application/vnd.kafka.{fmt}.v2+json",
                                             "accept": V2})


def test_records_produced_through_the_gateway_are_read_with_the_deserializers(gw_cluster, gw, registry, tmp_path):
    topics = {kind: f"gw-{kind}-{uuid.uuid4().hex[:6]}" for kind in ("avro", "jsonschema", "protobuf", "v3")}
    for topic in topics.values():
        gw_cluster.create_topic(topic, partitions=1, replication_factor=1)
    people = [{"name": "ada", "age": 36}, {"name": "alan", "age": 41}]
    person = json.dumps({"type": "record", "name": "Person", "namespace": "odradek.test", "fields": [
        {"name": "name", "type": "string"}, {"name": "age", "type": "int"}]})

    # v2 avro: schemas by text (registered under <topic>-key / -value), then by the ids answered
    first = _post(gw, f"/topics/{topics['avro']}", "avro", {
        "key_schema": '"string"', "value_schema": person, "records": [{"key": "k0", "value": people[0]}]})
    assert first.status_code == 200, first.text
    ids = first.json()
    assert ids["value_schema_id"] == registry.get_latest_version(f"{topics['avro']}-value").schema_id
    again = _post(gw, f"/topics/{topics['avro']}/partitions/0", "avro", {
        "key_schema_id": ids["key_schema_id"], "value_schema_id": ids["value_schema_id"],
        "records": [{"key": "k1", "value": people[1]}]}).json()
    assert (again["key_schema_id"], again["value_schema_id"], again["offsets"][0]["offset"]) == \
        (ids["key_schema_id"], ids["value_schema_id"], 1)
    avro = AvroDeserializer(registry)
    assert _kafka_read(gw_cluster, topics["avro"], avro, avro, 2) == [("k0", people[0]), ("k1", people[1])]

    answer = _post(gw, f"/topics/{topics['jsonschema']}", "jsonschema", {
        "value_schema": json.dumps(PERSON_JSON), "records": [{"value": p} for p in people]})
    assert answer.status_code == 200 and answer.json()["key_schema_id"] is None, answer.text
    reader = JSONDeserializer(None, schema_registry_client=registry)
    assert [v for _, v in _kafka_read(gw_cluster, topics["jsonschema"], reader, reader, 2)] == people

    answer = _post(gw, f"/topics/{topics['protobuf']}", "protobuf", {
        "value_schema": PERSON_PROTO, "records": [{"value": p} for p in people]})
    assert answer.status_code == 200, answer.text
    cls = _proto_class(tmp_path)
    reader = ProtobufDeserializer(cls, {"use.deprecated.format": False})
    got = _kafka_read(gw_cluster, topics["protobuf"], reader, reader, 2)
    assert [(p.name, p.age) for _, p in got] == [(p["name"], p["age"]) for p in people]

    # v3: AVRO data by the subject's schema text, then by its id; the answer names the schema
    v3 = f"/v3/clusters/{_cluster_id(gw)}/topics/{topics['v3']}/records"
    answer = gw.post(v3, json={"key": {"type": "STRING", "data": "k0"},
                               "value": {"type": "AVRO", "schema": person, "data": people[0]}})
    assert answer.status_code == 200, answer.text
    value = answer.json()["value"]
    assert (value["type"], value["subject"], value["schema_version"]) == ("AVRO", f"{topics['v3']}-value", 1)
    stream = "\n".join(json.dumps({"value": {"schema_id": value["schema_id"], "data": p}}) for p in people[1:] * 2)
    streamed = gw.post(v3, content=stream, headers={"content-type": "application/json"})
    assert [json.loads(line).get("offset") for line in streamed.text.splitlines()] == [1, 2], streamed.text
    got = _kafka_read(gw_cluster, topics["v3"], lambda b, _: b.decode(), avro, 3)
    assert got == [("k0", people[0]), (None, people[1]), (None, people[1])]


def test_v3_records_carry_binary_and_json_data_as_their_bytes(gw_cluster, gw):
    topic = f"v3-plain-{uuid.uuid4().hex[:6]}"
    gw_cluster.create_topic(topic, partitions=1, replication_factor=1)
    path = f"/v3/clusters/{_cluster_id(gw)}/topics/{topic}/records"
    binary = gw.post(path, json={"key": {"type": "BINARY", "data": "AP8="},
                                 "value": {"type": "JSON", "data": {"name": "ada", "tags": [1, None]}}})
    assert binary.status_code == 200, binary.text
    answer = binary.json()
    assert (answer["offset"], answer["key"], answer["value"]["type"]) == (0, {"type": "BINARY", "size": 2}, "JSON")
    got = _kafka_read(gw_cluster, topic, lambda b, _: b, lambda b, _: json.loads(b), 1)
    assert got == [(b"\x00\xff", {"name": "ada", "tags": [1, None]})]


def test_a_record_not_matching_its_schema_is_refused_and_nothing_is_written(gw_cluster, gw):
    topic = f"gw-bad-{uuid.uuid4().hex[:6]}"
    gw_cluster.create_topic(topic, partitions=1, replication_factor=1)
    person = json.dumps({"type": "record", "name": "Person", "fields": [{"name": "name", "type": "string"}]})
    refused = _post(gw, f"/topics/{topic}", "avro", {"value_schema": person, "records": [
        {"value": {"name": "ada"}}, {"value": {"name": 7}}]})
    assert (refused.status_code, refused.json()["error_code"]) == (422, 42203), refused.text
    assert "records.1.value" in refused.json()["message"]
    for fmt, schema, value in (("jsonschema", json.dumps(PERSON_JSON), {"age": 3}),
                               ("protobuf", PERSON_PROTO, {"name": "ada", "height": 2})):
        other = f"{topic}-{fmt}"
        gw_cluster.create_topic(other, partitions=1, replication_factor=1)
        refused = _post(gw, f"/topics/{other}", fmt, {"value_schema": schema, "records": [{"value": value}]})
        assert refused.json()["error_code"] == 42203, (fmt, refused.text)
        assert gw.get(f"/topics/{other}/partitions/0/offsets").json()["end_offset"] == 0
    # a schema the subject's level refuses (another type than its AVRO versions): 40801
    refused = _post(gw, f"/topics/{topic}", "jsonschema", {"value_schema": json.dumps(PERSON_JSON),
                                                           "records": [{"value": {"name": "x"}}]})
    assert (refused.status_code, refused.json()["error_code"]) == (408, 40801), refused.text
    assert _post(gw, f"/topics/{topic}", "avro", {"records": [{"value": {"name": "x"}}]}).json()["error_code"] == 42202
    assert _post(gw, f"/topics/{topic}", "avro", {"value_schema": person, "records": [
        {"key": "k", "value": {"name": "x"}}]}).json()["error_code"] == 42201
    assert _post(gw, f"/topics/{topic}", "avro", {"value_schema": "{nope", "records": [
        {"value": 1}]}).json()["error_code"] == 42205
    missing = _post(gw, f"/topics/{topic}", "avro", {"value_schema_id": 999999, "records": [{"value": 1}]})
    assert (missing.status_code, missing.json()["error_code"]) == (408, 40801)
    v3 = f"/v3/clusters/{_cluster_id(gw)}/topics/{topic}/records"
    refused = gw.post(v3, json={"value": {"type": "AVRO", "schema": person, "data": {"name": 7}}})
    assert (refused.status_code, refused.json()["error_code"]) == (422, 42203), refused.text
    assert gw.get(f"/topics/{topic}/partitions/0/offsets").json()["end_offset"] == 0


def test_two_replicas_registering_at_once_never_reuse_an_id_and_a_new_replica_has_every_schema(gw_cluster, tmp_path):
    other = GatewayProcess(gw_cluster.bootstrap, tmp_path / "registry-b.log")
    try:
        urls = [gw_cluster.gateway, other.url]
        prefix = uuid.uuid4().hex[:8]

        def register(i: int) -> tuple[str, int]:
            schema = {"type": "record", "name": f"R{prefix}{i}", "fields": [{"name": "f", "type": "long"}]}
            subject = f"c{prefix}-{i}-value"
            answer = httpx.post(f"{urls[i % 2]}/subjects/{subject}/versions", json={"schema": json.dumps(schema)},
                                headers={"content-type": MEDIA}, timeout=60)
            assert answer.status_code == 200, answer.text
            return subject, answer.json()["id"]

        with ThreadPoolExecutor(8) as pool:
            registered = list(pool.map(register, range(24)))
        ids = [schema_id for _, schema_id in registered]
        assert len(set(ids)) == len(ids), f"an id was given twice: {sorted(ids)}"
        for url in urls:   # both replicas answer every schema under its id
            for subject, schema_id in registered:
                assert httpx.get(f"{url}/subjects/{subject}/versions/1", timeout=30).json()["id"] == schema_id
        for i, url in enumerate(urls):   # a produce's new schema: registered on the primary, from either replica
            topic = f"fw-{prefix}-{i}"
            gw_cluster.create_topic(topic, partitions=1, replication_factor=1)
            schema = {"type": "record", "name": f"F{prefix}{i}", "fields": [{"name": "f", "type": "long"}]}
            answer = httpx.post(f"{url}/topics/{topic}", json={"value_schema": json.dumps(schema), "records": [
                {"value": {"f": i}}]}, headers={"content-type": "application/vnd.kafka.avro.v2+json"}, timeout=60)
            assert answer.status_code == 200, answer.text
            for other_url in urls:
                found = httpx.get(f"{other_url}/subjects/{topic}-value/versions/1", timeout=30).json()
                assert found["id"] == answer.json()["value_schema_id"]
    finally:
        other.stop()

    fresh = GatewayProcess(gw_cluster.bootstrap, tmp_path / "registry-c.log")
    try:   # a replica started afresh reads _schemas to its end before it serves
        for subject, schema_id in registered:
            assert httpx.get(f"{fresh.url}/subjects/{subject}/versions/1", timeout=30).json()["id"] == schema_id
    finally:
        fresh.stop()


def test_subjects_are_under_the_tokens_rights_on_their_topics(gw_cluster, tmp_path):
    tokens = write_tokens(tmp_path / "tokens.json", [
        {"token": "etl-token", "name": "etl", "topics": {"orders": "rw"}},
        {"token": "reader-token", "name": "reader", "topics": {"orders": "r"}}])
    guarded = GatewayProcess(gw_cluster.bootstrap, tmp_path / "registry-auth.log", "--auth-file", str(tokens))
    schema = {"schema": json.dumps({"type": "string"})}
    try:
        def call(method: str, path: str, token: str | None, body=None) -> httpx.Response:
            headers = {"authorization": f"Bearer {token}"} if token else {}
            return httpx.request(method, guarded.url + path, json=body, headers=headers, timeout=60)

        for path in ("/subjects", "/config", "/mode", "/schemas/ids/1/versions"):
            assert call("GET", path, None).status_code == 401, path
        assert call("POST", "/subjects/orders-value/versions", "reader-token", schema).json()["error_code"] == 40301
        assert call("POST", "/subjects/orders-value/versions", "etl-token", schema).status_code == 200
        assert call("POST", "/subjects/payments-value/versions", "etl-token", schema).json()["error_code"] == 40301
        assert call("GET", "/subjects/orders-value/versions", "reader-token").json() == [1]
        assert "orders-value" in call("GET", "/subjects", "reader-token").json()
        assert all(s in ("orders-value", "orders-key") or not s.endswith(("-value", "-key"))
                   for s in call("GET", "/subjects", "reader-token").json())
        assert call("PUT", "/config", "etl-token", {"compatibility": "NONE"}).json()["error_code"] == 40301
    finally:
        guarded.stop()


def test_every_broker_restarted_the_registry_keeps_every_schema_and_the_next_id(gw_cluster, gw, registry):
    # last in the module: it restarts every broker of the module's cluster. Schemas of their own
    # (a record name and a title no other test uses): an id is new, not one an earlier test was given
    subject, other, tag = _subject(), _subject(), uuid.uuid4().hex[:8]
    user_v1, user_v2 = ({**schema, "name": f"User{tag}"} for schema in (USER_V1, USER_V2))
    person = {**PERSON_JSON, "title": f"Person{tag}"}
    ids = [registry.register_schema(subject, Schema(json.dumps(s), "AVRO")) for s in (user_v1, user_v2)]
    ids.append(registry.register_schema(other, Schema(json.dumps(person), "JSON")))
    for broker in sorted(gw_cluster.brokers):
        gw_cluster.run("kill", str(broker))
    for broker in sorted(gw_cluster.brokers):
        gw_cluster.run("start", str(broker))

    def register_v3():
        answer = gw.post(f"/subjects/{subject}/versions", json={"schema": json.dumps(
            {**user_v2, "fields": user_v2["fields"] + [{"name": "city", "type": "string", "default": ""}]})})
        return answer.json() if answer.status_code == 200 else None
    new_id = wait_until(register_v3, 180, "the registry to register after every broker restarted",
                        interval=0.5)["id"]
    assert [*ids, new_id] == list(range(ids[0], ids[0] + 4))   # each the next id: none reused
    assert [gw.get(f"/subjects/{subject}/versions/{v}").json()["id"] for v in (1, 2, 3)] == [*ids[:2], new_id]
    assert json.loads(gw.get(f"/schemas/ids/{ids[2]}").json()["schema"]) == person
