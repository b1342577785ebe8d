"""Bad input gets the error Apache Kafka returns, and the broker keeps serving others."""

import datetime
import struct

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from tests.support.kafka_wire import WireClient, batch

PRODUCE = 0


@pytest.fixture(scope="module")
def cluster(shared_cluster):
    """The package's shared dev cluster (tests/integration/conftest.py): this module only creates its own topics."""
    return shared_cluster


def _produce(client: WireClient, topic: str, records: bytes, partition: int = 0):
    request = ProduceRequest(transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=10),
                             topic_data=(TopicProduceData(name=topic, partition_data=(
                                 PartitionProduceData(index=partition, records=records),)),))
    response = client.request(PRODUCE, 9, request)
    return response.responses[0].partition_responses[0]


@pytest.fixture(scope="module")
def topic(cluster):
    name = "bad-input"
    cluster.create_topic(name, partitions=1, config={"max.message.bytes": "2000"})
    return name


def _leader(cluster, topic):
    return cluster.leader_address(topic, 0)


def _still_serves(cluster, topic):
    with WireClient(_leader(cluster, topic)) as c:
        result = _produce(c, topic, batch([b"ok"]))
        assert result.error_code == ErrorCode.none
        return result.base_offset


def test_corrupt_crc_is_corrupt_message(cluster, topic):
    data = bytearray(batch([b"hello"]))
    data[-1] ^= 0xFF
    with WireClient(_leader(cluster, topic)) as c:
        assert _produce(c, topic, bytes(data)).error_code == ErrorCode.corrupt_message
    _still_serves(cluster, topic)


def test_batch_over_max_message_bytes_is_message_too_large(cluster, topic):
    before = _still_serves(cluster, topic)
    with WireClient(_leader(cluster, topic)) as c:
        assert _produce(c, topic, batch([b"x" * 5000])).error_code == ErrorCode.message_too_large
    assert _still_serves(cluster, topic) == before + 1  # nothing was appended


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_several_batches_for_a_partition_are_invalid_record_as_kafka_3_9_refuses_them(cluster, topic, codec):
    """Kafka 3.9's ProduceRequest.validateRecords takes one v2 batch per partition, compressed or
    not, and answers without a message (null); clients send one."""
    from odradek.records import Compression, Record, build_batch
    before = _still_serves(cluster, topic)
    second = bytes(build_batch([Record(b"z", b"k")], compression=Compression[codec.upper()]))
    with WireClient(_leader(cluster, topic)) as c:
        answer = _produce(c, topic, batch([b"a"]) + second)
    assert (answer.error_code, answer.error_message, answer.log_start_offset) == (ErrorCode.invalid_record, None, -1)
    assert _still_serves(cluster, topic) == before + 1


@pytest.mark.parametrize("name,partition", [("no-such-topic-xyz", 0), ("bad-input", 7)])
def test_unknown_topic_or_partition(cluster, topic, name, partition):
    with WireClient(_leader(cluster, topic)) as c:
        assert _produce(c, name, batch([b"v"]), partition).error_code == ErrorCode.unknown_topic_or_partition


def test_unsupported_api_versions_version_answers_error_35(cluster, topic):
    with WireClient(_leader(cluster, topic)) as c:
        frame = bytearray(c.encode(18, 3, _api_versions_v3()))
        struct.pack_into(">h", frame, 6, 42)
        c.send_raw(bytes(frame))
        response = c.decode(18, 0, c.read_frame())
        assert response.error_code == ErrorCode.unsupported_version
        assert any(k.api_key == 0 for k in response.api_keys)


def _api_versions_v3():
    from kio.schema.api_versions.v3.request import ApiVersionsRequest
    return ApiVersionsRequest(client_software_name="t", client_software_version="1")


@pytest.mark.parametrize("frame", [
    struct.pack(">i", 6) + b"\x00\x00\x00\x63\x00\x01",                  # Produce v99
    struct.pack(">i", 12) + b"\x00\x00\x00\x09\x00\x00\x00\x01" + b"\xde\xad\xbe\xef",  # truncated Produce v9
    b"\x7f\xff\xff\xff" + b"\x00" * 16,                                   # a 2 GiB frame
    struct.pack(">i", 64) + bytes(range(64)),                             # garbage
], ids=["unsupported-version", "truncated", "2GiB", "garbage"])
def test_malformed_frames_close_the_connection_and_nothing_else(cluster, topic, frame):
    with WireClient(_leader(cluster, topic)) as c:
        c.send_raw(frame)
        assert c.closed_by_peer()
    _still_serves(cluster, topic)
