"""Kafka's admin tools for records, log directories and broker configs do the same against
Odradek as against Apache Kafka: ``kafka-delete-records`` (then ``kafka-get-offsets --time
earliest-local|latest-tiered``: ListOffsets v8/v9), ``kafka-log-dirs --describe``,
``kafka-transactions describe-producers``, ``kafka-configs --entity-type brokers`` (one
broker, ``--entity-default``; describe, alter, delete) and ``kafka-reassign-partitions
--execute --throttle`` then ``--verify`` (the throttle configs it sets, then removes; a real
move under a throttle is tests/replication/test_cluster_replication.py's). What legitimately differs (broker ids, log directory paths, byte sizes) is normalized.
"""

from __future__ import annotations

import json
import re

from odradek.dev.waiting import wait_until
from tests.support.kafka_tools import CONFIG_COMMAND, CONSOLE_CONSUMER, CONSOLE_PRODUCER

DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
NO_IDEMPOTENCE = ("--producer-property", "enable.idempotence=false")


def ok(proc) -> str:
    assert proc.returncode == 0, f"exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc.stdout


def _fill(e, topic: str, n: int) -> None:
    e.create_topic(topic, 1)
    ok(e.tool(CONSOLE_PRODUCER, "--topic", topic, *NO_IDEMPOTENCE, input="".join(f"m{i}\n" for i in range(n))))


def _broker_id(e) -> str:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": e.bootstrap})
    return str(next(iter(admin.list_topics(timeout=30).brokers)))


def test_delete_records_tool_then_a_consumer_starts_there(both, topic, tmp_path):
    out, first = {}, {}
    for e in both:
        _fill(e, topic, 100)
        spec = tmp_path / f"{e.name}.json"
        spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 40}]}))
        out[e.name] = ok(e.tool(DELETE_RECORDS, "--offset-json-file", str(spec)))
        first[e.name] = ok(e.tool(CONSOLE_CONSUMER, "--topic", topic, "--partition", "0", "--offset", "earliest",
                                  "--max-messages", "1", "--timeout-ms", "30000", "--property", "print.offset=true"))
    assert f"partition: {topic}-0\tlow_watermark: 40" in out["kafka"], out["kafka"]
    assert out["odradek"] == out["kafka"]
    assert first["kafka"].startswith("Offset:40\t") and first["odradek"] == first["kafka"]
    # ListOffsets v8/v9 (Admin's OffsetSpec.earliestLocal / latestTiered), no tiered storage on either:
    # the local log starts at the log start offset; nothing is tiered (offset -1: the tool prints no line)
    shown = {(e.name, spec): ok(e.tool(GET_OFFSETS, "--topic", topic, "--time", spec))
             for e in both for spec in ("earliest-local", "latest-tiered")}
    assert shown["kafka", "earliest-local"] == f"{topic}:0:40\n" and shown["kafka", "latest-tiered"] == "", shown
    assert all(shown["odradek", spec] == shown["kafka", spec] for spec in ("earliest-local", "latest-tiered")), shown


def test_delete_records_tool_past_the_high_watermark(both, topic, tmp_path):
    """OFFSET_OUT_OF_RANGE, as the tool prints it."""
    out = {}
    for e in both:
        _fill(e, topic, 30)
        spec = tmp_path / f"{e.name}.json"
        spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 31}]}))
        proc = e.tool(DELETE_RECORDS, "--offset-json-file", str(spec))
        out[e.name] = (proc.returncode, proc.stdout)
    assert "OffsetOutOfRangeException" in out["kafka"][1], out["kafka"]
    assert out["odradek"] == out["kafka"]


def _log_dirs(text: str) -> dict:
    doc = json.loads(next(line for line in text.splitlines() if line.startswith("{")))
    for broker in doc["brokers"]:
        broker["broker"] = "<id>"
        for d in broker["logDirs"]:
            d["logDir"] = "<dir>"
            for p in d["partitions"]:
                assert p["size"] > 0, p
                p["size"] = "<size>"
    return doc


def test_log_dirs_tool_describe(both, topic):
    out = {}
    for e in both:
        _fill(e, topic, 50)
        text = ok(e.tool(LOG_DIRS, "--describe", "--topic-list", topic))
        out[e.name] = text
    assert re.sub(r"brokers \S+", "brokers <id>", out["odradek"].split("{")[0]) == \
        re.sub(r"brokers \S+", "brokers <id>", out["kafka"].split("{")[0])
    assert _log_dirs(out["odradek"]) == _log_dirs(out["kafka"])
    assert _log_dirs(out["kafka"])["brokers"][0]["logDirs"][0]["partitions"] == [
        {"partition": f"{topic}-0", "size": "<size>", "offsetLag": 0, "isFuture": False}]


def _configs(e, *args: str) -> str:
    return ok(e.tool(CONFIG_COMMAND, "--entity-type", "brokers", *args))


def _described(e, entity: tuple[str, ...], done) -> str:
    """``--describe`` once ``done(output)`` (Kafka applies a change asynchronously)."""
    def output():
        text = _configs(e, *entity, "--describe")
        return text if done(text) else None
    return wait_until(output, 30, f"{' '.join(entity)} described on {e.name}", interval=0.5)


def _same_ids(text: str, broker: str) -> str:
    return text.replace(f"broker {broker} ", "broker <id> ").replace(f"broker {broker}.", "broker <id>.")


def test_config_command_brokers_default_and_one_broker(both):
    """--entity-default and --entity-name <id>: alter, describe (dynamic configs with their
    synonyms), delete: the same lines from both."""
    default = ("--entity-default",)
    outputs: dict[str, list[str]] = {}
    for e in both:
        broker = _broker_id(e)
        one = ("--entity-name", broker)
        steps = [_configs(e, *default, "--describe")]
        steps.append(_configs(e, *default, "--alter", "--add-config", "log.retention.ms=3600000"))
        steps.append(_described(e, default, lambda t: "log.retention.ms=3600000 sensitive=false" in t))
        steps.append(_configs(e, *one, "--alter", "--add-config", "log.segment.bytes=2097152"))
        steps.append(_described(e, one, lambda t: "log.segment.bytes=2097152" in t))
        steps.append(_configs(e, *one, "--alter", "--delete-config", "log.segment.bytes"))
        steps.append(_configs(e, *default, "--alter", "--delete-config", "log.retention.ms"))
        steps.append(_described(e, one, lambda t: "log." not in t))
        outputs[e.name] = [_same_ids(s, broker) for s in steps]
    assert outputs["kafka"][2] == "Default configs for brokers in the cluster are:\n  log.retention.ms=3600000 " \
                                  "sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}\n"
    for kafka_step, odradek_step in zip(outputs["kafka"], outputs["odradek"]):
        assert odradek_step == kafka_step


def test_reassign_partitions_throttle_then_verify(both, topic, tmp_path):
    """``--execute --throttle`` sets the brokers' rates and the topic's throttled replica lists
    (leader: the current replicas; follower: the moving ones, none here), ``--verify`` sees the
    reassignment complete and removes them all: the same output and configs from both."""
    outputs: dict[str, list[str]] = {}
    for e in both:
        _fill(e, topic, 10)
        broker = _broker_id(e)
        plan = tmp_path / f"{e.name}.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [int(broker)], "log_dirs": ["any"]}]}))
        steps = [ok(e.tool(REASSIGN, "--execute", "--throttle", "1000000", "--reassignment-json-file", str(plan)))]
        topic_configs = ("--entity-type", "topics", "--entity-name", topic, "--describe")
        steps.append(wait_until(lambda: t if "throttled" in (t := ok(e.tool(CONFIG_COMMAND, *topic_configs)))
                                else None, 30, f"{e.name}: the topic's throttled replicas", interval=0.5))
        steps.append(_described(e, ("--entity-name", broker), lambda t: "throttled.rate=1000000" in t))
        steps.append(ok(e.tool(REASSIGN, "--verify", "--reassignment-json-file", str(plan))))
        steps.append(wait_until(lambda: t if "throttled" not in (t := ok(e.tool(CONFIG_COMMAND, *topic_configs)))
                                else None, 30, f"{e.name}: the topic's throttles removed", interval=0.5))
        steps.append(_described(e, ("--entity-name", broker), lambda t: "throttled" not in t))
        outputs[e.name] = [_same_ids(s, broker).replace(topic, "<topic>").replace(f"0:{broker}", "0:<id>")
                           .replace(f"[{broker}]", "[<id>]").replace(f"broker {broker}\n", "broker <id>\n")
                           for s in steps]
    assert "leader.replication.throttled.replicas=0:<id>" in outputs["kafka"][1]
    assert "Clearing topic-level throttles on topic <topic>" in outputs["kafka"][3]
    for kafka_step, odradek_step in zip(outputs["kafka"], outputs["odradek"]):
        assert odradek_step == kafka_step


def test_transactions_tool_describe_producers(both, topic):
    """``kafka-transactions describe-producers`` (DescribeProducers) after an idempotent producer:
    the same columns and values but the producer id and timestamp."""
    out = {}
    for e in both:
        e.create_topic(topic, 1)
        ok(e.tool(CONSOLE_PRODUCER, "--topic", topic, input="".join(f"m{i}\n" for i in range(5))))
        text = ok(e.tool(TRANSACTIONS, "describe-producers", "--topic", topic, "--partition", "0"))
        header, *rows = [line.split() for line in text.strip().splitlines()]
        out[e.name] = [header] + [[v if name not in ("ProducerId", "LastTimestamp") else "<n>"
                                   for name, v in zip(header, row)] for row in rows]
    assert len(out["kafka"]) == 2, out["kafka"]
    assert out["odradek"] == out["kafka"]
