"""A producer's batch Kafka 3.9 refuses, sent as the same bytes on the wire (Produce v9) to Kafka and
to Odradek: the same code, record errors and log start offset, and Kafka's message where it sends
one. Cases: a batch flagged LogAppendTime (refused on a LogAppendTime topic or without a max
timestamp; under CreateTime taken and stored as CreateTime), a baseOffset other than 0, and the
log start offset of other refusals (-1 for a corrupt batch or several batches). Each topic's log
starts at 1 (DeleteRecords), so that a log start answered is told from 0 and -1."""

from __future__ import annotations

import datetime
import time
import uuid

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from odradek.dev.harness import wait_for_leaders
from odradek.records import Compression, Record, RecordBatch, build_batch
from tests.support.kafka_wire import WireClient, fetch_partition

NOW = int(time.time() * 1000)
TOPICS = {"create-time": {}, "log-append-time": {"message.timestamp.type": "LogAppendTime"}}


def _produce(bootstrap: str, topic: str, records: bytes):
    request = ProduceRequest(transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=10),
                             topic_data=(TopicProduceData(name=topic, partition_data=(
                                 PartitionProduceData(index=0, records=records),)),))
    with WireClient(bootstrap) as client:
        return client.request(0, 9, request).responses[0].partition_responses[0]


def _topics_starting_at_1(bootstrap: str, prefix: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = {f"{prefix}-{kind}": config for kind, config in TOPICS.items()}
    for future in admin.create_topics([NewTopic(n, 1, 1, config=c) for n, c in names.items()]).values():
        future.result(timeout=60)
    for name in names:
        wait_for_leaders(bootstrap, name, 1)
        for _ in range(2):
            assert _produce(bootstrap, name, _batch()).error_code == 0
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


def _corrupt() -> bytes:
    sent = _batch()
    sent[-1] ^= 0xFF
    return bytes(sent)


CASES = {
    "flagged-on-a-log-append-time-topic": ("log-append-time", lambda: _flagged(NOW)),
    "flagged-gzip-on-a-log-append-time-topic": ("log-append-time", lambda: _flagged(NOW, Compression.GZIP)),
    "flagged-without-a-max-timestamp": ("create-time", lambda: _flagged(-1)),
    "base-offset-5": ("create-time", lambda: _based(5)),
    "corrupt": ("create-time", _corrupt),
    "two-batches": ("create-time", lambda: bytes(_batch() + _batch())),
}


@pytest.mark.parametrize("case", CASES)
def test_refused_as_kafka_3_9_refuses_it(kafka, odradek, prefix, case):
    kind, make = CASES[case]
    sent = make()
    answers = {e.name: _produce(e.bootstrap, f"{prefix}-{kind}", sent) for e in (kafka, odradek)}
    seen = {name: (a.error_code, a.base_offset, a.log_start_offset, a.record_errors) for name, a in answers.items()}
    assert seen["odradek"] == seen["kafka"] and seen["kafka"][0] != 0
    if answers["kafka"].error_message is not None:   # Kafka's message only with record errors
        assert answers["odradek"].error_message == answers["kafka"].error_message


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
