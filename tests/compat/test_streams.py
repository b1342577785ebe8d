"""Kafka Streams (Kafka 3.9) on Odradek with ``processing.guarantee=exactly_once_v2``: a word
count (bench/kafka/ecosystem/OdradekWordCount.java: a repartition topic for the re-keyed words,
a state store with its compacted changelog topic, transactions spanning input offsets,
changelog and output) keeps exact counts through a SIGKILL and restart of the broker: in the
read_committed output every word's updates are exactly 1, 2, ..., its count, none repeated or
missing.
"""

from __future__ import annotations

import subprocess
import uuid
from collections import Counter, defaultdict

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from bench import kafka_ecosystem
from odradek.dev.waiting import wait_until
from tests.compat.test_connect import read_committed
from tests.compat.test_mirror_maker import LOG4J, ecosystem
from tests.support.tools import stop_process

LINES = 400   # before the kill, and as many again after it
WORDS = 12


def line(i: int) -> str:
    return " ".join(f"w{(i * k) % WORDS}" for k in (1, 5, 7))


def produce(bootstrap: str, topic: str, numbers: range) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in numbers:
        p.produce(topic, key=str(i).encode(), value=line(i).encode())
    assert p.flush(60) == 0


def updates(bootstrap: str, topic: str) -> dict[str, list[int]]:
    """Each word's count updates in the read_committed output, in order."""
    out = defaultdict(list)
    for word, count in read_committed(bootstrap, topic):
        out[word].append(int(count))
    return out


def test_word_count_is_exact_through_a_broker_kill(odradek_cluster, odradek, tmp_path):
    ecosystem()
    app = f"wordcount-{uuid.uuid4().hex[:8]}"
    source, sink = f"{app}-lines", f"{app}-counts"
    odradek.create_topic(source, partitions=2)
    odradek.create_topic(sink)
    (tmp_path / "log4j.properties").write_text(LOG4J.format(log=tmp_path / "streams.log"))
    argv = kafka_ecosystem.java_argv(kafka_ecosystem.WORD_COUNT, odradek.bootstrap, app, source, sink,
                                     str(tmp_path / "state"), log4j=tmp_path / "log4j.properties")
    log = f"(log: {tmp_path / 'streams.log'})"
    with open(tmp_path / "stdout", "wb") as out:
        streams = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        produce(odradek.bootstrap, source, range(LINES))
        wait_until(lambda: updates(odradek.bootstrap, sink), 180, f"the first counts {log}", 1)
        odradek_cluster.run("kill", "1")
        odradek_cluster.run("start", "1")
        produce(odradek.bootstrap, source, range(LINES, 2 * LINES))
        expected = Counter(w for i in range(2 * LINES) for w in line(i).split())
        final = lambda: {w: c[-1] for w, c in updates(odradek.bootstrap, sink).items()}  # noqa: E731
        wait_until(lambda: final() == expected, 240, f"the exact counts {log}", 1)
        assert updates(odradek.bootstrap, sink) == {w: list(range(1, n + 1)) for w, n in expected.items()}
        assert streams.poll() is None, "the Streams application exited"
        changelog = ConfigResource(ConfigResource.Type.TOPIC, f"{app}-counts-changelog")
        admin = AdminClient({"bootstrap.servers": odradek.bootstrap})
        assert admin.describe_configs([changelog])[changelog].result(30)["cleanup.policy"].value == "compact"
    finally:
        stop_process(streams, 60)
