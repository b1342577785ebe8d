"""The config registry (``odradek.config``): one statement per key, used everywhere.

The README's configuration tables are generated from it (drift fails here), and its users
agree with it: the broker CLI, LogConfig, GroupConfig, the operator's validation and
DescribeConfigs' synonyms.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.config import (BROKER_CONFIGS, GROUP_CONFIGS, LONG_MAX, TOPIC_CONFIGS, parse_broker_settings, settings_of,
                            topic_defaults, validate_topic_configs)
from odradek.config.keys import connection_overrides
from odradek.config.describe import ConfigSource, describe_broker, describe_topic
from odradek.config.dynamic import DYNAMIC_BROKER_KEYS, BrokerLayers, validate_dynamic
from odradek.config.reference import main as reference_main
from odradek.errors import KafkaError

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_tables_match_the_registry():
    assert reference_main([str(README), "--check"]) == 0, \
        "README.md's configuration reference drifted: run `python -m odradek.config.reference README.md`"


def test_every_default_passes_its_own_validator():
    for key in [*TOPIC_CONFIGS.values(), *BROKER_CONFIGS.values(), *GROUP_CONFIGS.values()]:
        key.parse(key.default)
        assert key.doc and "\n" not in key.doc


def test_no_key_or_synonym_is_stated_twice():
    names = [*TOPIC_CONFIGS, *BROKER_CONFIGS, *GROUP_CONFIGS]
    assert len(names) == len(set(names))
    synonyms = [s.name for k in TOPIC_CONFIGS.values() for s in k.synonyms]
    assert len(synonyms) == len(set(synonyms))
    assert not set(synonyms) & (set(BROKER_CONFIGS) | set(GROUP_CONFIGS))


def test_broker_settings_split_and_convert_units():
    s = parse_broker_settings({"log.retention.hours": "2", "log.roll.hours": "1", "message.max.bytes": "2000",
                               "cleanup.policy": "compact", "replica.lag.time.max.ms": "500",
                               "group.initial.rebalance.delay.ms": "0"})
    assert s.topic_defaults == {"retention.ms": "7200000", "segment.ms": "3600000", "max.message.bytes": "2000",
                                "cleanup.policy": "compact"}
    assert s.broker == {"replica.lag.time.max.ms": "500"}
    assert s.group == {"group.initial.rebalance.delay.ms": "0"}


@pytest.mark.parametrize("settings, message", [
    ({"bogus": "1"}, "Unknown topic config name: bogus"),
    ({"log.retention.hours": "x"}, "Invalid value x for configuration log.retention.hours"),
    ({"socket.request.max.bytes": "0"}, "Invalid value 0 for configuration socket.request.max.bytes"),
    ({"offsets.topic.num.partitions": "0"}, "Invalid value 0 for configuration offsets.topic.num.partitions"),
])
def test_bad_broker_settings_are_invalid_config(settings, message):
    with pytest.raises(KafkaError, match=message):
        parse_broker_settings(settings)


def test_the_broker_cli_builds_its_settings_from_the_registry(tmp_path):
    from odradek.broker.cli import parse_args
    cfg = parse_args(["--id", "1", "--data-dir", str(tmp_path), "--zookeeper", "z:2181",
                      "--config", "log.retention.minutes=1", "--config", "auto.create.topics.enable=false",
                      "--config", "offsets.retention.minutes=1", "--config", "controlled.shutdown.max.retries=7",
                      "--replica-lag-time-max-ms", "1234"])
    assert cfg.topic_defaults == {"retention.ms": "60000"}
    assert (cfg.auto_create_topics, cfg.replica_lag_time_max_ms, cfg.controlled_shutdown_max_retries,
            cfg.socket_request_max_bytes) == (False, 1234, 7, 104857600)
    assert cfg.group_settings == {"offsets.retention.minutes": "1"}
    assert settings_of(cfg)["auto.create.topics.enable"] == "false"
    with pytest.raises(SystemExit):
        parse_args(["--id", "1", "--data-dir", str(tmp_path), "--zookeeper", "z:2181", "--config", "nope=1"])


def test_typed_settings_take_their_defaults_from_the_registry():
    from odradek.broker.group.config import GroupConfig
    from odradek.broker.storage.config import LogConfig
    log = LogConfig()
    for name in ("segment.bytes", "retention.ms", "max.message.bytes", "cleanup.policy", "preallocate"):
        assert getattr(log, name.replace(".", "_")) == TOPIC_CONFIGS[name].typed_default
    assert GroupConfig().offsets_retention_ms == int(GROUP_CONFIGS["offsets.retention.minutes"].default) * 60_000
    assert GroupConfig.from_settings({"offsets.retention.minutes": "2"}).offsets_retention_ms == 120_000
    assert settings_of(GroupConfig())["offsets.retention.minutes"] == "10080"


def test_describe_reports_kafkas_synonym_chain():
    by_name = {d.name: d for d in describe_topic({"retention.ms": "1000"}, {"retention.ms": "3600000",
                                                                            "segment.bytes": "1048576"})}
    assert by_name["retention.ms"].synonyms == (("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
                                                ("log.retention.ms", "3600000", ConfigSource.STATIC_BROKER_CONFIG))
    assert by_name["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert by_name["segment.bytes"].synonyms[-1] == ("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG)
    assert by_name["flush.ms"].synonyms == (("log.flush.scheduler.interval.ms", "9223372036854775807",
                                             ConfigSource.DEFAULT_CONFIG),)
    layers = BrokerLayers(3, {"auto.create.topics.enable": "true"}, {"retention.ms": "60000", "max.message.bytes": "5"})
    broker = {d.name: d for d in describe_broker(layers)}
    assert {n: broker[n].value for n in ("broker.id", "auto.create.topics.enable", "log.retention.ms",
                                         "message.max.bytes", "log.retention.hours")} == {
        "broker.id": "3", "auto.create.topics.enable": "true", "log.retention.ms": "60000",
        "message.max.bytes": "5", "log.retention.hours": "168"}
    assert broker["log.retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert broker["log.segment.bytes"].source == ConfigSource.DEFAULT_CONFIG
    assert broker["log.retention.minutes"].value is None


def test_dynamic_layers_as_kafka_reports_them():
    layers = BrokerLayers(1, {}, {"retention.ms": "60000"}, dynamic_default={"log.retention.ms": "5000"},
                          dynamic_broker={"max.connections": "100"})
    assert layers.topic_defaults()["retention.ms"] == "5000"
    broker = {d.name: d for d in describe_broker(layers)}
    assert broker["log.retention.ms"].synonyms == (
        ("log.retention.ms", "5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.ms", "60000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG))
    assert broker["max.connections"].source == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert not broker["max.connections"].read_only and broker["auto.create.topics.enable"].read_only
    default = describe_broker(layers, per_broker=False)
    assert [(d.name, d.value, d.source) for d in default] == [
        ("log.retention.ms", "5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
    topic = {d.name: d for d in describe_topic({}, layers)}
    assert topic["retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    with pytest.raises(KafkaError, match="Cannot update these configs dynamically: Set\\(auto.create.topics.enable\\)"):
        validate_dynamic({"auto.create.topics.enable": "false"}, "1")
    with pytest.raises(KafkaError, match="Invalid value x for configuration log.retention.ms"):
        validate_dynamic({"log.retention.ms": "x"}, "")


def test_timestamp_limits_are_served_with_kafkas_synonyms_and_derived_values():
    """Kafka 3.9: a broker's log.message.timestamp.difference.max.ms stands for its before/after
    limits left at Long.MAX, and a topic describes the derived value under the synonym's source."""
    layers = BrokerLayers(1, {}, topic_defaults({"log.message.timestamp.difference.max.ms": "1000",
                                                 "log.message.timestamp.after.max.ms": "50"}))
    topic = {d.name: d for d in describe_topic({"message.timestamp.after.max.ms": "7"}, layers)}
    assert (topic["message.timestamp.before.max.ms"].value, topic["message.timestamp.before.max.ms"].synonyms) == (
        "1000", (("log.message.timestamp.before.max.ms", str(LONG_MAX), ConfigSource.DEFAULT_CONFIG),))
    assert topic["message.timestamp.after.max.ms"].synonyms == (
        ("message.timestamp.after.max.ms", "7", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.message.timestamp.after.max.ms", "50", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.message.timestamp.after.max.ms", str(LONG_MAX), ConfigSource.DEFAULT_CONFIG))
    assert topic["message.timestamp.difference.max.ms"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert "log.message.timestamp.before.max.ms" in DYNAMIC_BROKER_KEYS
    with pytest.raises(KafkaError, match="Invalid value -1 for configuration message.timestamp.before.max.ms"):
        validate_topic_configs({"message.timestamp.before.max.ms": "-1"})


def test_the_operator_validates_with_the_registry_without_the_broker_package():
    import subprocess
    import sys
    code = ("import sys; from odradek.operator.validation import validate_broker_config; "
            "validate_broker_config({'log.retention.hours': 1, 'offsets.retention.minutes': 5}); "
            "assert not [m for m in sys.modules if m.startswith('odradek.broker')], 'imported the broker'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_topic_validation_keeps_kafkas_messages():
    with pytest.raises(KafkaError, match="Unknown topic config name: x"):
        validate_topic_configs({"x": "1"})
    with pytest.raises(KafkaError, match="Null value not supported for topic config: retention.ms"):
        validate_topic_configs({"retention.ms": None})


@pytest.mark.parametrize("configs, name, kafka_type", [
    (TOPIC_CONFIGS, "segment.bytes", "INT"), (TOPIC_CONFIGS, "min.insync.replicas", "INT"),
    (TOPIC_CONFIGS, "retention.ms", "LONG"), (TOPIC_CONFIGS, "retention.bytes", "LONG"),
    (BROKER_CONFIGS, "replica.lag.time.max.ms", "LONG"), (BROKER_CONFIGS, "zookeeper.session.timeout.ms", "INT"),
    (GROUP_CONFIGS, "offsets.topic.replication.factor", "SHORT"),
])
def test_describe_configs_reports_the_type_kafka_declares(configs, name, kafka_type):
    assert configs[name].type.code.name == kafka_type


def test_per_ip_overrides_are_checked_and_resolved():
    assert parse_broker_settings({"max.connections.per.ip.overrides": "localhost:5, 10.0.0.7:0"})
    with pytest.raises(KafkaError, match="max.connections.per.ip.overrides"):
        parse_broker_settings({"max.connections.per.ip.overrides": "10.0.0.7"})
    assert connection_overrides("localhost:5,[::1]:2") == {"127.0.0.1": 5, "::1": 2}
