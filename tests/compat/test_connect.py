"""A Kafka Connect distributed worker (Kafka 3.9's ``ConnectDistributed``) on Odradek with
exactly-once source support (KIP-618: ``exactly.once.source.support=enabled``): the
FileStreamSource connector (connect-file) delivers a file's lines into a topic in
transactions, through a SIGKILL and restart of the broker, and a read_committed consumer reads
every line exactly once. The worker runs its config/offset/status topics (compacted) and its
group (the ``connect`` protocol) on Odradek, and fences its task's transactional producer.
"""

from __future__ import annotations

import subprocess
import time
import uuid

import httpx
from confluent_kafka import Consumer, KafkaError, TopicPartition

from bench import apache_kafka, kafka_ecosystem
from odradek.dev.processes import candidate_port
from odradek.dev.waiting import wait_until
from tests.compat.test_mirror_maker import LOG4J, ecosystem
from tests.support.tools import stop_process

LINES = 300   # before the kill, and as many again while the broker is down


def worker_properties(bootstrap: str, name: str, port: int) -> str:
    return "\n".join([
        f"bootstrap.servers = {bootstrap}",
        f"group.id = {name}",
        "key.converter = org.apache.kafka.connect.storage.StringConverter",
        "value.converter = org.apache.kafka.connect.storage.StringConverter",
        *(f"{kind}.storage.topic = {name}-{kind}s" for kind in ("config", "offset", "status")),
        *(f"{kind}.storage.replication.factor = 1" for kind in ("config", "offset", "status")),
        "exactly.once.source.support = enabled",
        "offset.flush.interval.ms = 1000",
        "plugin.discovery = service_load",
        f"listeners = http://127.0.0.1:{port}", ""])


def read_committed(bootstrap: str, topic: str) -> list[tuple[str | None, str]]:
    """Every (key, value) of partition 0 below its last stable offset."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": "read_committed",
                  "enable.partition.eof": True, "enable.auto.commit": False})
    values = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                break
            values.append((m.key() and m.key().decode(), m.value().decode()))
    finally:
        c.close()
    return values


def test_file_source_delivers_exactly_once_through_a_broker_kill(odradek_cluster, odradek, tmp_path):
    ecosystem()
    name = f"connect-{uuid.uuid4().hex[:8]}"
    topic, port = f"{name}-lines", candidate_port()
    odradek.create_topic(topic)
    source = tmp_path / "lines.txt"
    lines = [f"line-{i}" for i in range(2 * LINES)]
    source.write_text("".join(f"{line}\n" for line in lines[:LINES]))
    (tmp_path / "worker.properties").write_text(worker_properties(odradek.bootstrap, name, port))
    (tmp_path / "log4j.properties").write_text(LOG4J.format(log=tmp_path / "connect.log"))
    argv = kafka_ecosystem.java_argv(kafka_ecosystem.CONNECT_DISTRIBUTED, str(tmp_path / "worker.properties"),
                                     log4j=tmp_path / "log4j.properties")
    with open(tmp_path / "stdout", "wb") as out:
        worker = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    rest = f"http://127.0.0.1:{port}"
    log = f"(log: {tmp_path / 'connect.log'})"
    try:
        wait_until(lambda: httpx.get(f"{rest}/connectors", timeout=5).status_code == 200, 180,
                   f"the Connect worker's REST API {log}", 1)
        config = {"connector.class": kafka_ecosystem.FILE_SOURCE, "tasks.max": "1", "file": str(source),
                  "topic": topic, "exactly.once.support": "required", "transaction.boundary": "poll"}
        response = httpx.put(f"{rest}/connectors/{name}/config", json=config, timeout=60)
        assert response.status_code in (200, 201), response.text
        wait_until(lambda: len(read_committed(odradek.bootstrap, topic)) >= LINES, 180,
                   f"the first lines committed {log}", 1)
        odradek_cluster.run("kill", "1")
        with source.open("a") as f:
            f.write("".join(f"{line}\n" for line in lines[LINES:]))
        odradek_cluster.run("start", "1")
        wait_until(lambda: len(read_committed(odradek.bootstrap, topic)) >= 2 * LINES, 240,
                   f"every line committed after the restart {log}", 1)
        assert [v for _, v in read_committed(odradek.bootstrap, topic)] == lines
        # the lines went in transactions: their commit markers hold offsets of their own
        c = Consumer({"bootstrap.servers": odradek.bootstrap, "group.id": "unused"})
        try:
            assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1] > len(lines)
        finally:
            c.close()
        status = httpx.get(f"{rest}/connectors/{name}/status", timeout=10).json()
        assert [t["state"] for t in status["tasks"]] == ["RUNNING"], status
    finally:
        stop_process(worker, 60)
