"""MirrorMaker 2 (Kafka 3.9's dedicated ``connect-mirror-maker``:
``org.apache.kafka.connect.mirror.MirrorMaker``) from the suite's Apache Kafka into its Odradek,
with the migration configuration of docs/migration.md (read from that page): ``IdentityReplicationPolicy`` (topic
names kept), topic configs synced, and a consumer group's committed offsets translated onto
Odradek (``sync.group.offsets.enabled``) so that a consumer moved to Odradek resumes where it
stopped on Kafka. MirrorMaker's Connect herder runs on Odradek: its config/offset/status topics
(compacted), a group of the ``connect`` protocol, create-topics with configs.

One MirrorMaker process for the module (started by PID, stopped by PID), with Kafka's shortest
useful intervals (1 s) so that the waits below end as soon as the runtime has acted. The offset
flush interval is a worker setting, read from the target cluster's block (``odradek.``): at
Connect's default of 60 s, the source task's offset syncs, and so the group's translated
offsets, waited a minute.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from bench import apache_kafka, kafka_ecosystem
from odradek.dev.waiting import wait_until
from tests.support.kafka_tools import UNREACHABLE
from tests.support.tools import stop_process, tool_missing

PARTITIONS = 2
CONSUMED, MORE = 20, 5            # records per partition: consumed on Kafka, then produced to Odradek
RETENTION_MS = "3600000"          # a topic config MirrorMaker must carry over
LOG4J = ("log4j.rootLogger=INFO, file\n"
         "log4j.appender.file=org.apache.log4j.FileAppender\n"
         "log4j.appender.file.File={log}\n"
         "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
         "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n")


def mm2_properties(source: str, target: str) -> str:
    """docs/migration.md's configuration, then what a one-broker test cluster needs instead:
    (java.util.Properties: a key's last line wins)."""
    doc = (apache_kafka.ROOT / "docs" / "migration.md").read_text()
    block = doc[doc.index("```properties\n") + len("```properties\n"):]
    return block[:block.index("```")] + "\n".join([
        f"kafka.bootstrap.servers = {source}",
        f"odradek.bootstrap.servers = {target}",
        "kafka->odradek.topics = mm-.*",
        "kafka->odradek.groups = mm-.*",
        *(f"{k} = 1" for k in ("refresh.topics.interval.seconds", "refresh.groups.interval.seconds",
                               "emit.checkpoints.interval.seconds", "sync.group.offsets.interval.seconds",
                               "emit.heartbeats.interval.seconds", "sync.topic.configs.interval.seconds")),
        "odradek.offset.flush.interval.ms = 1000",
        "plugin.discovery = service_load",   # Kafka's own plugins only: no classpath scan at start
        *(f"{k}replication.factor = 1" for k in (
            "", "offset-syncs.topic.", "checkpoints.topic.", "heartbeats.topic.",
            "config.storage.", "offset.storage.", "status.storage.")), ""])


def ecosystem() -> Path:
    try:
        return kafka_ecosystem.resolve()
    except apache_kafka.ResolutionError as e:
        if UNREACHABLE.search(str(e)):
            tool_missing(f"Maven cannot reach its repository for Kafka's ecosystem jars: {str(e)[-200:]}")
        raise


@pytest.fixture(scope="module")
def mirror_maker(kafka, odradek, tmp_path_factory):
    ecosystem()
    dir = tmp_path_factory.mktemp("mm2")
    (dir / "mm2.properties").write_text(mm2_properties(kafka.bootstrap, odradek.bootstrap))
    (dir / "log4j.properties").write_text(LOG4J.format(log=dir / "mm2.log"))
    argv = kafka_ecosystem.java_argv(kafka_ecosystem.MIRROR_MAKER, str(dir / "mm2.properties"),
                                     "--clusters", "odradek", log4j=dir / "log4j.properties")
    with open(dir / "stdout", "wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield dir / "mm2.log"
    finally:
        stop_process(proc, 60)


def on_kafka(bootstrap: str, topic: str, group: str) -> None:
    """The source side before the cut-over: a topic with a config, its records, and a group that
    has consumed all of them (producers stopped, consumers drained: docs/migration.md's order)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={"retention.ms": RETENTION_MS})])[topic].result(60)
    produce(bootstrap, topic, range(CONSUMED))
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        consume(c, PARTITIONS * CONSUMED, f"{group} reading {topic} on Kafka")
        c.commit(asynchronous=False)
    finally:
        c.close()


def produce(bootstrap: str, topic: str, offsets: range) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for n in offsets:
        for part in range(PARTITIONS):
            p.produce(topic, key=b"k%d" % part, value=b"%d-%d" % (part, n), partition=part)
    assert p.flush(60) == 0


def consume(c: Consumer, n: int, what: str) -> list[tuple[int, int, bytes, bytes]]:
    """The next ``n`` records ``c`` polls: (partition, offset, key, value), sorted."""
    got = []

    def more() -> bool:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.partition(), m.offset(), m.key(), m.value()))
        return len(got) >= n
    wait_until(more, 120, what, 0)
    return sorted(got)


def records(bootstrap: str, topic: str) -> list[tuple[int, int, bytes, bytes]]:
    """Every record of ``topic``."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        return consume(c, PARTITIONS * CONSUMED, f"reading {topic} from {bootstrap}")
    finally:
        c.close()


def high_watermarks(bootstrap: str, topic: str) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)]
    finally:
        c.close()


def committed(bootstrap: str, topic: str, group: str) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)]
    finally:
        c.close()


def test_topic_records_configs_and_group_offsets_reach_odradek(mirror_maker, kafka, odradek):
    topic, group = f"mm-{uuid.uuid4().hex[:8]}", f"mm-group-{uuid.uuid4().hex[:8]}"
    on_kafka(kafka.bootstrap, topic, group)
    wait_until(lambda: high_watermarks(odradek.bootstrap, topic) == [CONSUMED] * PARTITIONS, 240,
               f"MirrorMaker copying {topic} into Odradek (log: {mirror_maker})", 1)
    assert records(odradek.bootstrap, topic) == records(kafka.bootstrap, topic)

    admin = AdminClient({"bootstrap.servers": odradek.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    assert admin.describe_configs([resource])[resource].result(30)["retention.ms"].value == RETENTION_MS

    wait_until(lambda: committed(odradek.bootstrap, topic, group) == [CONSUMED] * PARTITIONS, 120,
               f"the group's offsets translated onto Odradek (log: {mirror_maker})", 1)
    produce(odradek.bootstrap, topic, range(CONSUMED, CONSUMED + MORE))   # the producers moved to Odradek
    resumed = Consumer({"bootstrap.servers": odradek.bootstrap, "group.id": group, "enable.auto.commit": False,
                        "auto.offset.reset": "earliest"})
    try:
        resumed.subscribe([topic])
        got = consume(resumed, PARTITIONS * MORE, f"{group} resuming on Odradek")
    finally:
        resumed.close()
    # the group's first record on each partition is the first one it had not consumed on Kafka
    assert [(p, o) for p, o, _, _ in got] == [(p, o) for p in range(PARTITIONS) for o in range(CONSUMED, CONSUMED + MORE)]
