"""bench/ceiling.py's light clients read the bytes they rely on where Kafka's protocol puts them:
the pre-built Produce request decodes as one batch of the records counted, a Produce v9 answer's
error code is at the fixed place checked, and a Fetch v11 request's offset is patched in place."""

import struct

from kio.schema.fetch.v11.request import FetchRequest

from bench.ceiling import OFFSET_MARK, fetch_request, produce_error_at, produce_request
from odradek.broker.handlers.produce_encoding import PartitionProduceResponse, ProduceResponse, TopicProduceResponse
from odradek.protocol.codec import decode_request, encode_response
from odradek.records import iter_batches


def test_the_produce_request_holds_one_batch_of_the_records_it_counts():
    frame, count = produce_request("ceiling-t", 2, 100, 65536)
    header, body = decode_request(memoryview(frame)[4:].toreadonly())
    assert (header.api_key, header.api_version, body.acks) == (0, 9, 1)
    (topic,) = body.topic_data
    (partition,) = topic.partition_data
    (batch,) = iter_batches(memoryview(partition.records))
    assert (topic.name, partition.index, batch.records_count, batch.compute_crc()) == ("ceiling-t", 2, count, batch.crc)
    assert len(partition.records) <= 65536


def test_a_produce_answers_error_code_is_where_the_client_looks():
    answer = ProduceResponse(9, (TopicProduceResponse("ceiling-t", (PartitionProduceResponse(0, 0x1234, 7),)),))
    frame = encode_response(0, 9, 1, answer)
    assert struct.unpack_from(">h", frame, produce_error_at("ceiling-t"))[0] == 0x1234


def test_the_fetch_requests_offset_is_patched_in_place():
    frame, at = fetch_request("ceiling-t", 0)
    struct.pack_into(">q", frame, at, 123_456)
    _, body = decode_request(memoryview(frame)[4:].toreadonly())
    assert isinstance(body, FetchRequest) and body.topics[0].partitions[0].fetch_offset == 123_456
    assert OFFSET_MARK not in struct.unpack_from(">q", frame, at)
