"""A producer's batch Kafka 3.9 refuses, sent as the same bytes on the wire (Produce v9) to Kafka and
to Odradek: the same code, base offset, append time, log start offset, record errors and
error_message (null unless Kafka words it). Cases: a batch flagged LogAppendTime (refused on a
LogAppendTime topic or without a max timestamp; under CreateTime taken and stored as CreateTime),
a baseOffset other than 0, a corrupt batch (refused first for its baseOffset or size), a
truncated one (no batch read), several batches (refused before either is checked, even when one
is corrupt or too large), an old message set (magic 0 or 1), and a client's batch for an
internal topic. ZStandard with old versions: a ZSTD batch in a Produce v6 (v7+ only may use it),
and a Fetch v9 of a topic whose ``compression.type`` is zstd (v10+ only may read it). Each topic's
log starts at 1 (DeleteRecords), so that a log start answered is told from 0 and -1."""

from __future__ import annotations

import datetime
import importlib
import struct
import time
import uuid
import zlib

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.dev.harness import wait_for_leaders
from odradek.dev.waiting import wait_until
from odradek.errors import ErrorCode
from odradek.records import Compression, Record, RecordBatch, build_batch
from tests.support.kafka_wire import WireClient, fetch_partition

NOW = int(time.time() * 1000)
TOPICS = {"create-time": {}, "log-append-time": {"message.timestamp.type": "LogAppendTime"},
          "zstd": {"compression.type": "zstd"}}


def _produce(bootstrap: str, topic: str, records: bytes, version: int = 9):
    schema = importlib.import_module(f"kio.schema.produce.v{version}.request")
    request = schema.ProduceRequest(transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=10),
                                    topic_data=(schema.TopicProduceData(name=topic, partition_data=(
                                        schema.PartitionProduceData(index=0, records=records),)),))
    with WireClient(bootstrap) as client:
        return client.request(0, version, request).responses[0].partition_responses[0]


def _fetch(bootstrap: str, topic: str, version: int):
    """A consumer's Fetch (v9 or v10, no session) of partition 0 from offset 1: its answer."""
    schema = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    request = schema.FetchRequest(max_wait=datetime.timedelta(milliseconds=10), min_bytes=1, max_bytes=1 << 20,
                                  topics=(schema.FetchTopic(topic=topic, partitions=(schema.FetchPartition(
                                      partition=0, fetch_offset=1, partition_max_bytes=1 << 20),)),),
                                  forgotten_topics_data=())
    with WireClient(bootstrap) as client:
        return client.request(1, version, request).responses[0].partitions[0]


def _topics_starting_at_1(bootstrap: str, prefix: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = {f"{prefix}-{kind}": config for kind, config in TOPICS.items()}
    for future in admin.create_topics([NewTopic(n, 1, 1, config=c) for n, c in names.items()]).values():
        future.result(timeout=60)
    for name in names:
        wait_for_leaders(bootstrap, name, 1)
        for _ in range(2):   # the leader may not know it leads yet (NOT_LEADER_OR_FOLLOWER) when Metadata says so
            wait_until(lambda: _produce(bootstrap, name, _batch()).error_code == 0, 30, f"a produce to {name}", 0.2)
    for future in admin.delete_records([TopicPartition(n, 0, 1) for n in names]).values():
        future.result(timeout=60)


@pytest.fixture(scope="module")
def prefix(kafka, odradek) -> str:
    name = f"refusals-{uuid.uuid4().hex[:8]}"
    for endpoint in (kafka, odradek):
        _topics_starting_at_1(endpoint.bootstrap, name)
    return name


def _batch(compression: Compression = Compression.NONE) -> bytearray:
    return build_batch([Record(b"v1", key=b"k", timestamp=NOW - 5), Record(b"value2", key=None, timestamp=NOW)],
                       compression=compression)


def _flagged(max_timestamp: int, compression: Compression = Compression.NONE) -> bytes:
    sent = _batch(compression)
    RecordBatch(memoryview(sent)).set_log_append_time(max_timestamp)
    return bytes(sent)


def _based(base_offset: int) -> bytes:
    sent = _batch()
    RecordBatch(memoryview(sent)).set_base_offset(base_offset)
    return bytes(sent)


def _legacy(magic: int) -> bytes:
    """A message set of one message in an old format (magic 0, or 1 with a timestamp)."""
    body = struct.pack(">bb", magic, 0) + (struct.pack(">q", NOW) if magic else b"")
    body += struct.pack(">i", 1) + b"k" + struct.pack(">i", 5) + b"value"
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


def _corrupt(sent: bytearray | None = None) -> bytes:
    sent = _batch() if sent is None else sent
    sent[-1] ^= 0xFF
    return bytes(sent)


def _too_large() -> bytearray:
    return build_batch([Record(b"x" * 1_100_000)])   # over max.message.bytes (1 MiB)


CASES = {
    "flagged-on-a-log-append-time-topic": ("log-append-time", lambda: _flagged(NOW)),
    "flagged-gzip-on-a-log-append-time-topic": ("log-append-time", lambda: _flagged(NOW, Compression.GZIP)),
    "flagged-without-a-max-timestamp": ("create-time", lambda: _flagged(-1)),
    "base-offset-5": ("create-time", lambda: _based(5)),
    "corrupt": ("create-time", _corrupt),
    "two-batches": ("create-time", lambda: bytes(_batch() + _batch())),
    "corrupt-with-base-offset-5": ("create-time", lambda: _corrupt(bytearray(_based(5)))),
    "corrupt-and-too-large": ("create-time", lambda: _corrupt(_too_large())),
    "truncated": ("create-time", lambda: bytes(_batch())[:-3]),
    "two-batches-one-too-large": ("create-time", lambda: bytes(_batch()) + bytes(_too_large())),
    "two-batches-the-first-corrupt": ("create-time", lambda: _corrupt() + bytes(_batch())),
    "magic-0": ("create-time", lambda: _legacy(0)),
    "magic-1": ("create-time", lambda: _legacy(1)),
}


def _refused_alike(endpoints, topic: str, sent: bytes, version: int = 9) -> tuple:
    """Kafka's answer, once Odradek's is seen to be the same (record errors and error_message
    from Produce v8)."""
    answers = {e.name: _produce(e.bootstrap, topic, sent, version) for e in endpoints}
    seen = {name: (a.error_code, a.base_offset, a.log_append_time, a.log_start_offset,
                   getattr(a, "record_errors", None), getattr(a, "error_message", None)) for name, a in answers.items()}
    assert seen["odradek"] == seen["kafka"] and seen["kafka"][0] != 0, seen
    return seen["kafka"]


@pytest.mark.parametrize("case", CASES)
def test_refused_as_kafka_3_9_refuses_it(kafka, odradek, prefix, case):
    kind, make = CASES[case]
    _refused_alike((kafka, odradek), f"{prefix}-{kind}", make())


@pytest.mark.parametrize("records", ["one-batch", "two-batches"])
def test_a_zstd_batch_in_a_produce_v6_is_refused_as_kafka_3_9_refuses_it(kafka, odradek, prefix, records):
    sent = bytes(_batch(Compression.ZSTD)) * (2 if records == "two-batches" else 1)   # ZSTD checked before the count
    answer = _refused_alike((kafka, odradek), f"{prefix}-create-time", sent, version=6)
    assert answer[:4] == (ErrorCode.unsupported_compression_type, -1, None, -1)   # no append time (-1)


def test_a_zstd_topic_is_fetched_as_kafka_3_9_fetches_it(kafka, odradek, prefix):
    """Fetch v9 of a topic configured zstd: UNSUPPORTED_COMPRESSION_TYPE, nothing else; v10 reads it."""
    seen = {}
    for e in (kafka, odradek):
        old, new = (_fetch(e.bootstrap, f"{prefix}-zstd", version) for version in (9, 10))
        seen[e.name] = (old.error_code, old.high_watermark, old.last_stable_offset, old.log_start_offset,
                        old.aborted_transactions, old.records, new.error_code, new.log_start_offset)
    assert seen["odradek"] == seen["kafka"], seen
    assert seen["kafka"][0] == ErrorCode.unsupported_compression_type and seen["kafka"][6:] == (0, 1), seen


def test_an_internal_topic_is_refused_as_kafka_3_9_refuses_it(kafka, odradek, prefix):
    for e in (kafka, odradek):   # a group's commit has the broker create __consumer_offsets
        consumer = Consumer({"bootstrap.servers": e.bootstrap, "group.id": prefix, "enable.auto.commit": False})
        try:
            wait_until(lambda: consumer.commit(offsets=[TopicPartition(f"{prefix}-create-time", 0, 1)],
                                               asynchronous=False), 60, f"a commit of group {prefix}", 0.5)
        finally:
            consumer.close()
    _refused_alike((kafka, odradek), "__consumer_offsets", bytes(_batch()))


def test_under_create_time_a_flagged_batch_with_a_max_timestamp_is_stored_as_create_time(kafka, odradek, prefix):
    sent = _flagged(NOW)
    stored = {}
    for e in (kafka, odradek):
        answer = _produce(e.bootstrap, f"{prefix}-create-time", sent)
        assert answer.error_code == 0
        with WireClient(e.bootstrap) as client:
            batch = RecordBatch(memoryview(bytearray(fetch_partition(client, f"{prefix}-create-time",
                                                                      answer.base_offset).records)))
        stored[e.name] = (batch.timestamp_type, batch.first_timestamp, batch.max_timestamp, batch.compute_crc() == batch.crc)
    assert stored["odradek"] == stored["kafka"] == (0, NOW - 5, NOW, True)
