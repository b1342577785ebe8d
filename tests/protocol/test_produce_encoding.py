"""The Produce response's own value types write the bytes kio writes for the same response, for
every version served (3-9): successes, errors with and without a message, a throttle time."""

from __future__ import annotations

import datetime

import pytest

from odradek.broker.handlers.produce_encoding import PartitionProduceResponse, ProduceResponse, TopicProduceResponse
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, encode_response, make

TOPICS = (
    TopicProduceResponse("orders", (PartitionProduceResponse(0, ErrorCode.none, 1234567890123, -1, 17),
                                    PartitionProduceResponse(1, ErrorCode.none, 5, 1_700_000_000_123, 0),
                                    PartitionProduceResponse(2, ErrorCode.not_enough_replicas_after_append))),
    TopicProduceResponse("ünïcode-" + "t" * 140, (
        PartitionProduceResponse(3, ErrorCode.invalid_record, error_message="a bad batch: ∅"),)),
)


def _kio(version: int, response: ProduceResponse) -> bytes:
    s = Schemas(ApiKey.PRODUCE, version)
    return bytes(encode_response(ApiKey.PRODUCE, version, 9, make(
        s.ProduceResponse, throttle_time=response.throttle_time, responses=tuple(
            make(s.TopicProduceResponse, name=t.name, partition_responses=tuple(
                make(s.PartitionProduceResponse, index=p.index, error_code=p.error_code, base_offset=p.base_offset,
                     log_append_time=None if p.log_append_time_ms < 0 else datetime.datetime.fromtimestamp(
                         p.log_append_time_ms / 1000, datetime.timezone.utc),
                     log_start_offset=p.log_start_offset, record_errors=(), error_message=p.error_message)
                for p in t.partition_responses)) for t in response.responses))))


@pytest.mark.parametrize("version", range(3, 10))
@pytest.mark.parametrize("topics", [TOPICS, ()])
def test_the_produce_response_is_written_as_kio_writes_it(version, topics):
    response = ProduceResponse(version, topics, datetime.timedelta(milliseconds=250))
    assert bytes(encode_response(ApiKey.PRODUCE, version, 9, response)) == _kio(version, response)
