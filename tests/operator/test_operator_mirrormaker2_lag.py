"""MirrorMaker 2's lag, pure (``mirrormaker2_lag``) and the run module's decisions around it
(``mirrormaker2_run``: when it is due, where the target is, what a check that cannot run says):
the offsets topic's records as Kafka 3.9's Connect herder writes them, the topics Kafka's
MirrorSourceConnector picks, the lag per partition, and MirrorMaker's own client settings made
into librdkafka's with the Secrets its pod mounts. No cluster: the real MirrorMaker's offsets
are read in tests/operator/test_operator_k8s_mirrormaker2.py."""

from __future__ import annotations

import base64
import datetime
import json

import pytest

from odradek.operator import mirrormaker2, mirrormaker2_lag as lag, mirrormaker2_run
from odradek.operator.mirrormaker2_lag import LagUnavailable, SourcePartition
from tests.operator.test_operator_connect import SECURED
from tests.operator.test_operator_mirrormaker2 import SOURCE, parsed

CA = "-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----"
LEAF = "-----BEGIN CERTIFICATE-----\nbGVhZg==\n-----END CERTIFICATE-----"
KEY = "-----BEGIN PRIVATE KEY-----\na2V5\n-----END PRIVATE KEY-----"


def record(topic: str, partition: int, offset: int | None, connector: str = "MirrorSourceConnector",
           cluster: str = "src") -> tuple[bytes, bytes | None]:
    """An offsets-topic record as Connect's JSON converter (no schemas) writes MirrorSourceTask's."""
    key = json.dumps([connector, {"cluster": cluster, "partition": partition, "topic": topic}],
                     separators=(",", ":")).encode()
    return key, None if offset is None else json.dumps({"offset": offset}).encode()


def test_the_offsets_topic_gives_the_last_offset_copied_per_source_partition():
    records = [record("t", 0, 3), record("t", 0, 9), record("t", 1, 4), record("t", 2, 5), record("t", 2, None),
               record("t", 3, 1, connector="MirrorCheckpointConnector"), record("t", 4, 1, cluster="other"),
               (b"not json", b"{}"), (None, b'{"offset": 1}'), (b'["MirrorSourceConnector", 7]', b'{"offset": 1}'),
               (record("u", 0, 0)[0], b'{"offset": "x"}'), (record("v", 0, 0)[0], b"garbage")]
    # the last write wins; a null value (an offset reset) and a non-numeric offset forget it
    assert lag.copied_offsets(records, "src") == {("t", 0): 9, ("t", 1): 4}
    # Jackson writes the partition map in any order
    assert lag.copied_offsets([(b'["MirrorSourceConnector",{"topic":"t","cluster":"src","partition":0}]',
                                b'{"offset":41}')], "src") == {("t", 0): 41}


@pytest.mark.parametrize("start, end, copied, expected", [
    (0, 20, None, 20),     # nothing copied yet: from the log start (auto.offset.reset=earliest)
    (5, 20, None, 15),
    (0, 20, -1, 20),       # a negative offset counts as none (MirrorSourceTask.isUncommitted)
    (0, 20, 19, 0),        # the last record copied: caught up
    (0, 20, 9, 10),
    (12, 20, 3, 8),        # records deleted before they were copied: from the log start
    (0, 20, 25, 20),       # beyond the log end (a recreated topic): out of range, from the log start
    (0, 0, None, 0),       # an empty partition
])
def test_partition_lag_counts_from_the_next_offset_mirrormaker_copies_to_the_log_end(start, end, copied, expected):
    assert lag.partition_lag(SourcePartition(start, end), copied) == expected


def test_the_mirror_lag_sums_partitions_and_names_the_topics_most_behind():
    source = {("a", 0): SourcePartition(0, 10), ("a", 1): SourcePartition(0, 10), ("b", 0): SourcePartition(0, 3),
              ("c", 0): SourcePartition(0, 5), **{(f"z{i:02}", 0): SourcePartition(0, 1) for i in range(12)}}
    copied = {("a", 0): 9, ("a", 1): 2, ("c", 0): 4, **{(f"z{i:02}", 0): 0 for i in range(12)}}
    result = lag.mirror_lag(source, copied)
    assert (result.topics, result.partitions, result.lag, result.partitions_behind, result.max_partition_lag) == (
        15, 16, 10, 2, 7)
    assert [(t.topic, t.lag, t.partitions_behind) for t in result.lagging] == [("a", 7, 1), ("b", 3, 1)]
    assert lag.mirror_lag({}, {}) == lag.MirrorLag(0, 0, 0, 0, 0, ())
    # the status entry shows at most LAGGING_TOPICS_SHOWN topics
    many = lag.mirror_lag({(f"t{i:02}", 0): SourcePartition(0, 100 - i) for i in range(15)}, {})
    spec, _ = parsed()
    entry = lag.status_entry(spec, "2026-01-01T00:00:00Z", many)
    assert entry["lag"] == sum(range(86, 101)) and entry["partitionsBehind"] == 15 and entry["maxPartitionLag"] == 100
    assert [t["topic"] for t in entry["laggingTopics"]] == [f"t{i:02}" for i in range(lag.LAGGING_TOPICS_SHOWN)]
    assert entry["laggingTopics"][0] == {"topic": "t00", "lag": 100, "partitionsBehind": 1}
    assert (entry["source"], entry["target"], entry["topics"], entry["partitions"]) == ("kafka", "c", 15, 15)
    assert lag.status_entry(spec, "2026-01-01T00:00:00Z", None) == {
        "source": "kafka", "target": "c", "lastChecked": "2026-01-01T00:00:00Z"}


def test_the_mirrored_topics_are_those_kafkas_mirror_source_connector_picks():
    picks = lag.TopicFilter.of(parsed({"source": SOURCE, "topicsPattern": "orders.*, audit",
                                       "targetAlias": "odradek"})[0])
    assert [t for t in ("orders", "orders.v2", "audit", "audit2", "payments") if picks(t)] == [
        "orders", "orders.v2", "audit"]
    # Kafka's exclude default and internal topics; heartbeats topics always; under the default
    # policy no topic that came from the target
    assert not any(map(picks, ("orders-internal", "orders.replica", "orders.internal", "__consumer_offsets",
                               ".orders", "odradek.orders", "x.odradek.orders", "odradek.heartbeats")))
    assert picks("heartbeats") and picks("other.heartbeats")
    everything = lag.TopicFilter.of(parsed({"source": SOURCE, "topicsExcludePattern": "tmp.*"})[0])
    assert everything("orders.replica") and not everything("tmp1") and everything("c1.orders")
    assert not everything("c.orders")   # the target's alias, c
    identity = lag.TopicFilter.of(parsed({"source": SOURCE, "replicationPolicy": "identity"})[0])
    assert identity("c.orders") and not identity("c.heartbeats")
    nothing = lag.TopicFilter.of(parsed({"source": SOURCE, "topicsPattern": " , "})[0])
    assert not nothing("orders") and nothing("heartbeats")
    with pytest.raises(LagUnavailable, match="regular expressions") as e:
        lag.TopicFilter.of(parsed({"source": SOURCE, "topicsPattern": "a++b(?<x"})[0])
    assert e.value.reason == "Unsupported"


def test_the_offsets_topic_is_kafkas_default_unless_configured():
    assert lag.offsets_topic(parsed()[0]) == "mm2-offsets.kafka.internal"
    assert lag.offsets_topic(parsed({"source": SOURCE, "config": {"c.offset.storage.topic": "t-offsets"}})[0]) == (
        "t-offsets")
    both = {"c.offset.storage.topic": "t-offsets", "offset.storage.topic": "top"}   # the top-level one wins
    assert lag.offsets_topic(parsed({"source": SOURCE, "config": both})[0]) == "top"


def secrets(**data: dict[str, str]) -> dict[str, dict]:
    return {name: {"data": {k: base64.b64encode(v.encode()).decode() for k, v in d.items()}}
            for name, d in data.items()}


class FakeKube:
    def __init__(self, objects: dict[str, dict]) -> None:
        self.objects = objects

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict | None:
        assert (api_version, kind, namespace) == ("v1", "Secret", "data")
        return self.objects.get(name)


SECURE_SOURCE = {**SOURCE, "config": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                                      "ssl.truststore.type": "PEM"},
                 "secretName": "kafka-creds", "secretConfig": {"sasl.jaas.config": "jaas",
                                                               "ssl.truststore.certificates": "ca.crt"}}
JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="mm2" password="p\\"w";'


def settings_of(raw: dict, cluster: dict, objects: dict) -> tuple[dict, dict]:
    """(target, source) librdkafka settings from what the operator writes and mounts."""
    spec, access = parsed(raw, cluster)
    properties = mirrormaker2.mm2_properties(spec, access)
    read = mirrormaker2_run._secret_reader(FakeKube(objects), "data", mirrormaker2.secret_mounts("m", spec, access))
    return tuple(lag.librdkafka_settings(lag.cluster_settings(properties, alias), read)
                 for alias in (spec.target_alias, spec.source.alias))


def test_the_clients_log_in_with_mirrormakers_own_settings_and_secrets():
    objects = secrets(**{"c-cluster-ca-cert": {"ca.crt": CA},
                         "m-mirrormaker2": {"password": "x", "sasl.jaas.config": JAAS.replace("mm2", "m-mirrormaker2")},
                         "kafka-creds": {"jaas": JAAS, "ca.crt": CA}})
    target, source = settings_of({"source": SECURE_SOURCE}, SECURED, objects)
    assert target == {"bootstrap.servers": "c-bootstrap.data.svc:9092", "security.protocol": "SASL_SSL",
                      "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "m-mirrormaker2", "sasl.password": 'p"w',
                      "ssl.ca.pem": CA, "ssl.endpoint.identification.algorithm": "https"}
    assert source == {**target, "bootstrap.servers": "kafka-0.example:9092", "sasl.mechanism": "SCRAM-SHA-256",
                      "sasl.username": "mm2"}
    # an open target, a source with mutual TLS from a PEM keystore file and no hostname check
    raw = {"source": {**SOURCE, "config": {"security.protocol": "SSL", "ssl.keystore.type": "PEM",
                                           "ssl.keystore.location": "/etc/odradek/mm2/source/key.pem",
                                           "ssl.truststore.type": "PEM", "ssl.endpoint.identification.algorithm": ""},
                      "secretName": "kafka-creds", "secretConfig": {"ssl.truststore.certificates": "ca.crt"}}}
    target, source = settings_of(raw, {}, secrets(**{"kafka-creds": {"ca.crt": CA, "key.pem": f"{KEY}\n{LEAF}\n{CA}"}}))
    assert target == {"bootstrap.servers": "c-bootstrap.data.svc:9092", "security.protocol": "PLAINTEXT"}
    assert source == {"bootstrap.servers": "kafka-0.example:9092", "security.protocol": "SSL", "ssl.ca.pem": CA,
                      "ssl.endpoint.identification.algorithm": "none", "ssl.certificate.pem": f"{LEAF}\n{CA}",
                      "ssl.key.pem": KEY}


@pytest.mark.parametrize("config, secret, reason, message", [
    ({"security.protocol": "SASL_SSL"}, {}, "Unsupported", "sasl.mechanism GSSAPI"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}, {}, "Unsupported", "OAUTHBEARER"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/opt/certs/ca.jks"}, {}, "Unsupported",
     "file of MirrorMaker's image"),
    ({"security.protocol": "SSL"}, {"ssl.truststore.certificates": "ca.crt"}, "Unsupported", "JKS: the operator reads PEM"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, {"sasl.jaas.config": "missing"},
     "CredentialsMissing", "Secret data/kafka-creds has no missing"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, {"sasl.jaas.config": "token"},
     "Unsupported", "no username and password"),
])
def test_a_source_the_operator_cannot_log_in_to_says_why(config, secret, reason, message):
    raw = {"source": {**SOURCE, "config": config, "secretName": "kafka-creds", "secretConfig": secret}}
    with pytest.raises(LagUnavailable, match=message) as e:
        settings_of(raw, {}, secrets(**{"kafka-creds": {"ca.crt": CA, "token": "Module required token=x;"}}))
    assert e.value.reason == reason


def test_a_check_that_cannot_log_in_reports_it_without_a_client():
    """No Secret for MirrorMaker's user yet: the LagChecked condition says so; nothing connects."""
    spec, access = parsed({"source": SOURCE}, SECURED)
    meta = {"name": "m", "namespace": "data"}
    entry, condition = mirrormaker2_run.check_lag(FakeKube({}), meta, spec, access, ())
    assert condition == (False, "CredentialsMissing", "Secret data/m-mirrormaker2 has no sasl.jaas.config (yet)")
    assert set(entry) == {"source", "target", "lastChecked"}


def test_the_target_is_mirrormakers_address_unless_an_annotation_names_trusted_hosts():
    _, access = parsed()
    trusted = ("http://127.0.0.1", "https://dev.example")

    def where(annotation: str | None) -> str:
        meta = {"annotations": {mirrormaker2_run.TARGET_BOOTSTRAP_ANNOTATION: annotation} if annotation else {}}
        return mirrormaker2_run.target_bootstrap(meta, access, trusted)
    assert where(None) == "c-bootstrap.data.svc:9092"
    assert where("127.0.0.1:9093,dev.example:9092") == "127.0.0.1:9093,dev.example:9092"
    assert where("127.0.0.1:9093,evil.example:9092") == "c-bootstrap.data.svc:9092"   # one untrusted host voids it
    assert mirrormaker2_run.target_bootstrap({"annotations": {mirrormaker2_run.TARGET_BOOTSTRAP_ANNOTATION: "x:1"}},
                                             access, ()) == "c-bootstrap.data.svc:9092"


def test_the_lag_is_checked_every_interval_and_after_a_spec_change():
    def ago(seconds: float) -> str:
        at = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=seconds)
        return at.strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = {"generation": 3}
    assert mirrormaker2_run.lag_due(meta, {}, 30)
    assert not mirrormaker2_run.lag_due(meta, {"observedGeneration": 3, "mirrors": [{"lastChecked": ago(5)}]}, 30)
    assert mirrormaker2_run.lag_due(meta, {"observedGeneration": 3, "mirrors": [{"lastChecked": ago(40)}]}, 30)
    assert mirrormaker2_run.lag_due(meta, {"observedGeneration": 2, "mirrors": [{"lastChecked": ago(5)}]}, 30)
