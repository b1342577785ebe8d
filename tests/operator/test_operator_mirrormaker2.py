"""OdradekMirrorMaker2's pure builders (``mirrormaker2``): the spec, the ``mm2.properties`` it
writes (read back as Java reads a properties file, and compared with the migration configuration
the compat suite's MirrorMaker runs, docs/migration.md), the target user's ACLs, the Deployment.
No API server, no JVM."""

from __future__ import annotations

import re
import subprocess

import pytest

from odradek.operator import connect, mirrormaker2
from odradek.operator.spec import MirrorMaker2Spec, MirrorSource, SpecError
from tests.compat.test_mirror_maker import mm2_properties as compat_mm2_properties
from tests.operator.plans import cluster_spec
from tests.operator.test_operator_connect import SECURED, schema
from tests.operator.test_operator_spec import crd_defaults

SOURCE = {"alias": "kafka", "bootstrapServers": "kafka-0.example:9092"}
MIGRATION = {"source": SOURCE, "targetAlias": "odradek", "topicsPattern": "orders.*, payments.*",
             "groupsPattern": "orders-.*, payments-.*", "replicationPolicy": "identity",
             "checkpoints": {"syncGroupOffsets": True, "intervalSeconds": 10, "syncGroupOffsetsIntervalSeconds": 10},
             "config": {"offset.lag.max": 0, "kafka.consumer.isolation.level": "read_committed"}}


def java_properties(text: str) -> dict[str, str]:
    """A properties file as ``java.util.Properties.load`` reads this subset: ``#`` comments,
    ``key = value`` or ``key=value`` lines, backslash escapes; a key's last line wins."""
    out = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith(("#", "!")):
            continue
        key, i = [], 0
        while i < len(line) and line[i] not in "=:" and not (line[i] == " " and key):
            if line[i] == "\\":
                i += 1
            key.append(line[i])
            i += 1
        value = re.sub(r"^[ \t]*[=:]?[ \t]*", "", line[i:])
        out["".join(key).strip()] = re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), value)
    return out


def parsed(raw=None, cluster=None, name="c"):
    spec = mirrormaker2.parse_mirror_maker(raw or {"source": SOURCE}, name)
    return spec, connect.cluster_access(name, "data", cluster_spec(cluster or {}), spec)


def test_the_crds_defaults_are_the_models():
    defaults = crd_defaults(schema("odradekmirrormaker2s.odradek.dev.yaml"))
    spec = mirrormaker2.parse_mirror_maker({"source": {"bootstrapServers": "k:9092"}}, "c")
    attrs = {("source", "alias"): spec.source.alias, ("checkpoints", "enabled"): spec.emit_checkpoints,
             ("checkpoints", "intervalSeconds"): spec.emit_checkpoints_interval_seconds,
             ("checkpoints", "syncGroupOffsets"): spec.sync_group_offsets,
             ("checkpoints", "syncGroupOffsetsIntervalSeconds"): spec.sync_group_offsets_interval_seconds}
    assert len(defaults) == 12
    for path, value in defaults:
        got = attrs[path] if path in attrs else getattr(spec, re.sub(r"(?<!^)([A-Z])", r"_\1", path[0]).lower())
        assert got == value, path
    assert spec == MirrorMaker2Spec(source=MirrorSource("k:9092"), target_alias="c")


def test_the_migration_file_parses_and_says_what_the_compat_suites_mirror_maker_runs():
    spec, acc = parsed(MIGRATION, name="prod")
    props = java_properties(connect.properties_text(mirrormaker2.mm2_properties(spec, acc)))
    assert props["clusters"] == "kafka, odradek" and props["odradek.bootstrap.servers"] == "prod-bootstrap.data.svc:9092"
    assert props["kafka.bootstrap.servers"] == "kafka-0.example:9092"
    # what tests/compat/test_mirror_maker.py runs (docs/migration.md's file), setting by setting
    compat = java_properties(compat_mm2_properties("kafka-0.example:9092", "127.0.0.1:9092"))
    for key in ("kafka->odradek.enabled", "replication.policy.class", "emit.checkpoints.enabled",
                "sync.group.offsets.enabled", "offset.lag.max", "kafka.consumer.isolation.level",
                "sync.topic.acls.enabled"):
        assert props[key] == compat[key], key
    assert props["kafka->odradek.topics"] == "orders.*, payments.*"
    assert props["kafka->odradek.groups"] == "orders-.*, payments-.*"
    assert props["emit.checkpoints.interval.seconds"] == props["sync.group.offsets.interval.seconds"] == "10"
    # Kafka's defaults within the target's 3 brokers, not -1 (its default.replication.factor may be 1)
    assert props["replication.factor"] == "2" and props["checkpoints.topic.replication.factor"] == "3"
    assert props["dedicated.mode.enable.internal.rest"] == "true"
    assert not any(k.startswith("odradek.security") for k in props)   # an open listener


def test_a_secured_target_and_a_source_secret_are_read_by_the_config_provider():
    source = {**SOURCE, "config": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                                   "ssl.truststore.type": "PEM"},
              "secretName": "kafka-creds", "secretConfig": {"sasl.jaas.config": "jaas",
                                                            "ssl.truststore.certificates": "ca.crt"}}
    spec, acc = parsed({"source": source}, SECURED)
    text = connect.properties_text(mirrormaker2.mm2_properties(spec, acc))
    props = java_properties(text)
    assert props["c.security.protocol"] == "SASL_SSL" and props["c.sasl.mechanism"] == "SCRAM-SHA-512"
    assert props["c.sasl.jaas.config"] == "${dir:/etc/odradek/mm2/user:sasl.jaas.config}"
    assert props["c.ssl.truststore.location"] == "/etc/odradek/mm2/cluster-ca/ca.crt"
    assert props["kafka.sasl.jaas.config"] == "${dir:/etc/odradek/mm2/source:jaas}"
    assert props["kafka.ssl.truststore.certificates"] == "${dir:/etc/odradek/mm2/source:ca.crt}"
    assert props["kafka.security.protocol"] == "SASL_SSL"
    assert props["config.providers.dir.class"] == "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
    assert "password" not in text.lower()
    objects = mirrormaker2.build_mirror_maker("m", "data", spec, acc)
    assert [o["kind"] for o in objects] == ["OdradekUser", "ConfigMap", "Deployment"]
    pod = objects[-1]["spec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert mounts == {"config": "/etc/odradek/mm2/config", "cluster-ca": "/etc/odradek/mm2/cluster-ca",
                      "user": "/etc/odradek/mm2/user", "source": "/etc/odradek/mm2/source",
                      "writable-tmp": "/tmp"}   # the only writable directory
    assert {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v} == {
        "c-cluster-ca-cert", "m-mirrormaker2", "kafka-creds"}
    command = pod["containers"][0]["command"][-1]
    assert command.endswith("/opt/kafka/bin/connect-mirror-maker.sh /tmp/mm2.properties --clusters c")
    assert pod["containers"][0]["image"] == "odradek/connect:3.9.2"   # OdradekConnect's image
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"]


# MirrorMaker's herders' lines, as Kafka 3.9 writes them (MirrorHerder's and DistributedHerder's
# format strings; tests/operator/test_operator_k8s_mirrormaker2.py reads the real ones)
NOT_YET = ["[Worker clientId=c-1, groupId=src-mm2] Joined group at generation 1",
           "This node 10.0.0.5:8080 is now a leader for src->c. Configuring connectors...",
           "Failed to configure MirrorSourceConnector connector for src->c",
           "This node lost leadership for src->c while trying to update the connector configuration for "
           "MirrorSourceConnector. Using existing connector configuration.",
           "[Worker clientId=c-1, groupId=src-mm2] Finished starting connectors and tasks"]
READY = ["MirrorSourceConnector connector configured for src->c.",
         "This node is a leader for src->c and configuration for MirrorHeartbeatConnector is already up to date.",
         "[Worker clientId=c-1, groupId=src-mm2] Starting connector MirrorCheckpointConnector",
         "[Worker clientId=c-1, groupId=src-mm2] Starting task MirrorHeartbeatConnector-0"]


def test_a_pod_is_ready_once_its_herder_has_the_connectors_not_when_its_port_opens(tmp_path):
    spec, acc = parsed()
    config_map, deployment = mirrormaker2.build_mirror_maker("m", "data", spec, acc)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["tcpSocket"] == {"port": mirrormaker2.REST_PORT}   # the JVM is up
    command = container["readinessProbe"]["exec"]["command"]
    assert command[-1] == mirrormaker2.STATE_LOG == "/tmp/mm2-herder.log"
    # the herders log into that file too; a restarted container starts it afresh
    log4j = config_map["data"][mirrormaker2.LOG4J_FILE]
    assert f"log4j.appender.herder.File={mirrormaker2.STATE_LOG}" in log4j.splitlines()
    assert "log4j.logger.org.apache.kafka.connect.mirror.MirrorHerder=INFO, herder" in log4j.splitlines()
    script = container["command"][-1]
    assert script.startswith(f": > {mirrormaker2.STATE_LOG} && ")
    assert f"KAFKA_LOG4J_OPTS=-Dlog4j.configuration=file:/etc/odradek/mm2/config/{mirrormaker2.LOG4J_FILE}" in script
    log = tmp_path / "herder.log"

    def probe(lines) -> int:
        log.write_text("".join(f"{line}\n" for line in lines))
        return subprocess.run([*command[:-1], str(log)], check=False).returncode
    assert probe(NOT_YET) == 1
    for line in READY:
        assert probe([*NOT_YET, line]) == 0, line
    log.unlink()
    assert subprocess.run([*command[:-1], str(log)], check=False, stderr=subprocess.DEVNULL).returncode != 0


def acls_of(spec: MirrorMaker2Spec) -> dict:
    return {(a["resource"]["type"], a["resource"]["name"], a["resource"].get("patternType", "literal")):
            a["operations"] for a in mirrormaker2.user_acls(spec)}


def test_the_target_user_has_least_privilege():
    spec, acc = parsed(MIGRATION, SECURED, name="prod")
    (user,) = mirrormaker2.build_user("m", "data", spec, acc)
    assert user["metadata"]["name"] == "m-mirrormaker2" and user["spec"]["authentication"] == {"type": "scram-sha-512"}
    topic_ops = ["Create", "Write", "Describe", "DescribeConfigs", "AlterConfigs", "Alter", "Read"]
    internal = ["Read", "Write", "Describe", "Create", "DescribeConfigs"]
    assert acls_of(spec) == {
        ("topic", "orders", "prefix"): topic_ops, ("topic", "payments", "prefix"): topic_ops,
        **{("topic", t, "literal"): internal for t in (
            "mm2-configs.kafka.internal", "mm2-offsets.kafka.internal", "mm2-status.kafka.internal",
            "kafka.checkpoints.internal", "heartbeats", "kafka.heartbeats")},
        ("group", "kafka-mm2", "literal"): ["Read", "Describe"],
        ("group", "orders-", "prefix"): ["Read", "Describe"], ("group", "payments-", "prefix"): ["Read", "Describe"]}
    # the default policy names the copies <alias>.<topic>; no offset sync: no group but the herder's, no Read
    plain = mirrormaker2.parse_mirror_maker({"source": SOURCE, "topicsPattern": "audit|orders\\.v[0-9]+",
                                             "offsetSyncsTopicLocation": "target"}, "c")
    acls = acls_of(plain)
    assert acls[("topic", "kafka.audit", "literal")] == acls[("topic", "kafka.orders.v", "prefix")] == topic_ops[:-1]
    # kept on the target, the offset syncs topic is named for the source (Kafka's MirrorSourceConfig)
    assert ("topic", "mm2-offset-syncs.kafka.internal", "literal") in acls
    assert ("topic", "mm2-offset-syncs.c.internal", "literal") not in acls
    assert [k for k in acls if k[0] == "group"] == [("group", "kafka-mm2", "literal")]
    assert mirrormaker2.build_user("m", "data", plain, parsed()[1]) == []   # an open listener: no user


@pytest.mark.parametrize("patterns, prefix, names", [
    (".*", "", [("*", "literal")]), (".*", "kafka.", [("kafka.", "prefix")]),
    ("orders", "", [("orders", "literal")]), ("^orders$", "", [("orders", "literal")]),
    ("orders.*", "", [("orders", "prefix")]), ("orders-?x", "", [("orders", "prefix")]),
    ("a\\.b.*, c(d|e)", "", [("a.b", "prefix"), ("c", "prefix")]), ("x|(y|z)", "", [("*", "literal")])])
def test_acl_names_cover_every_match_of_kafkas_patterns(patterns, prefix, names):
    assert mirrormaker2.acl_names(patterns, prefix) == names


def test_owned_and_invalid_settings_are_refused():
    for config in ({"clusters": "a, b"}, {"kafka->c.topics": "x"}, {"c.security.protocol": "SSL"},
                   {"sync.topic.acls.enabled": True}, {"replication.policy.class": "x"}, {"listeners": "x"},
                   {"kafka.bootstrap.servers": "x"}):
        with pytest.raises(SpecError, match="set by the operator"):
            mirrormaker2.parse_mirror_maker({"source": SOURCE, "config": config}, "c")
    mirrormaker2.parse_mirror_maker({"source": SOURCE, "config": {"c.offset.flush.interval.ms": 1000,
                                                                  "refresh.topics.interval.seconds": 5}}, "c")
    for raw, match in (({"source": {}}, "bootstrapServers"), ({"source": {**SOURCE, "alias": "c"}}, "also the target"),
                       ({"source": SOURCE, "replicationPolicy": "mine"}, "not one of"),
                       ({"source": {**SOURCE, "secretConfig": {"sasl.jaas.config": "j"}}}, "secretName"),
                       ({"source": {**SOURCE, "alias": "a.b"}}, "letters")):
        with pytest.raises(SpecError, match=match):
            mirrormaker2.parse_mirror_maker(raw, "c")


def test_replication_factors_are_kafkas_capped_at_the_targets_brokers_unless_the_user_sets_them():
    def factors(brokers, config=None):
        spec, acc = parsed({"source": SOURCE, "config": config or {}}, {"brokers": {"replicas": brokers}})
        props = mirrormaker2.mm2_properties(spec, acc)
        return {k: props[k] for k in mirrormaker2.REPLICATION_DEFAULTS}
    internal = [k for k in mirrormaker2.REPLICATION_DEFAULTS if k != "replication.factor"]
    assert len(internal) == 6 and {k.split(".")[0] for k in internal} == {
        "offset-syncs", "checkpoints", "heartbeats", "config", "offset", "status"}
    assert factors(5) == {"replication.factor": "2", **dict.fromkeys(internal, "3")}
    assert factors(2) == {"replication.factor": "2", **dict.fromkeys(internal, "2")}
    assert factors(1) == {"replication.factor": "1", **dict.fromkeys(internal, "1")}
    assert factors(5, {"replication.factor": 4, "heartbeats.topic.replication.factor": -1}) == {
        "replication.factor": "4", **dict.fromkeys(internal, "3"), "heartbeats.topic.replication.factor": "-1"}
    with pytest.raises(SpecError, match="checkpoints.topic.replication.factor"):
        mirrormaker2.parse_mirror_maker({"source": SOURCE, "config": {"checkpoints.topic.replication.factor": 0}}, "c")


def test_a_config_change_rolls_the_deployment():
    def digest(interval):
        spec, acc = parsed({"source": SOURCE, "checkpoints": {"intervalSeconds": interval}})
        dep = mirrormaker2.build_mirror_maker("m", "data", spec, acc)[-1]
        return dep["spec"]["template"]["metadata"]["annotations"][connect.CONFIG_HASH_ANNOTATION]
    assert digest(10) != digest(20) and digest(10) == digest(10)
