"""The Produce response's own value types write the bytes kio writes for the same response, for
every version served (3-11): successes, errors with and without a message or record errors, a
throttle time, and from v10 a partition's current leader and the response's node endpoints (KIP-951)."""

from __future__ import annotations

import datetime

import pytest

from odradek.broker.handlers.produce_encoding import PartitionProduceResponse, ProduceResponse, TopicProduceResponse
from odradek.errors import ErrorCode, RecordError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, encode_response, make

TOPICS = (
    TopicProduceResponse("orders", (PartitionProduceResponse(0, ErrorCode.none, 1234567890123, -1, 17),
                                    PartitionProduceResponse(1, ErrorCode.none, 5, 1_700_000_000_123, 0),
                                    PartitionProduceResponse(2, ErrorCode.not_enough_replicas_after_append))),
    TopicProduceResponse("ünïcode-" + "t" * 140, (
        PartitionProduceResponse(3, ErrorCode.invalid_record, error_message="a bad batch: ∅",
                                 record_errors=(RecordError(0, "no key: ∅"), RecordError(7, None))),
        PartitionProduceResponse(4, ErrorCode.not_leader_or_follower, current_leader=(2, 11)))),
)
ENDPOINTS = ((2, "broker-2.example", 9092, "rack-b"), (3, "h3", 19093, None))


def _kio(version: int, response: ProduceResponse) -> bytes:
    s = Schemas(ApiKey.PRODUCE, version)
    return bytes(encode_response(ApiKey.PRODUCE, version, 9, make(
        s.ProduceResponse, throttle_time=response.throttle_time, responses=tuple(
            make(s.TopicProduceResponse, name=t.name, partition_responses=tuple(
                make(s.PartitionProduceResponse, index=p.index, error_code=p.error_code, base_offset=p.base_offset,
                     log_append_time=None if p.log_append_time_ms < 0 else datetime.datetime.fromtimestamp(
                         p.log_append_time_ms / 1000, datetime.timezone.utc),
                     log_start_offset=p.log_start_offset, error_message=p.error_message,
                     record_errors=_record_errors(s, version, p),
                     **_leader(s, version, p))
                for p in t.partition_responses)) for t in response.responses),
        **({"node_endpoints": tuple(make(s.NodeEndpoint, node_id=n, host=h, port=port, rack=r)
                                    for n, h, port, r in response.node_endpoints)} if version >= 10 else {}))))


def _record_errors(s, version: int, p: PartitionProduceResponse) -> tuple:
    if version < 8:
        return ()
    return tuple(make(s.BatchIndexAndErrorMessage, batch_index=e.batch_index, batch_index_error_message=e.message)
                 for e in p.record_errors)


def _leader(s, version: int, p: PartitionProduceResponse) -> dict:
    if version < 10 or p.current_leader is None:
        return {}
    return {"current_leader": make(s.LeaderIdAndEpoch, leader_id=p.current_leader[0], leader_epoch=p.current_leader[1])}


@pytest.mark.parametrize("version", range(3, 12))
@pytest.mark.parametrize("topics", [TOPICS, ()])
def test_the_produce_response_is_written_as_kio_writes_it(version, topics):
    endpoints = ENDPOINTS if topics and version >= 10 else ()
    response = ProduceResponse(version, topics, datetime.timedelta(milliseconds=250), endpoints)
    assert bytes(encode_response(ApiKey.PRODUCE, version, 9, response)) == _kio(version, response)


def test_every_served_responses_header_is_the_one_kio_writes():
    """``encode_response`` writes the header's bytes after the correlation id once per API
    version (kio's, written at first use): the same bytes as kio writing the header itself."""
    import io

    from kio.index import load_response_schema
    from kio.serial import entity_writer

    from odradek.broker.handlers import _TABLE
    from odradek.protocol.codec import _response_writers
    from odradek.protocol.legacy_schemas import MODULES

    served = {**_TABLE, ApiKey.API_VERSIONS: (0, 4, None)}
    for api_key, (lo, hi, _) in served.items():
        for version in range(lo, hi + 1):
            legacy = MODULES.get((api_key, version))
            header = (legacy[1] if legacy else load_response_schema(api_key, version)).__header_schema__
            buf = io.BytesIO()
            entity_writer(header)(buf, header(correlation_id=2**31 - 1))
            _, tail = _response_writers(api_key, version)
            assert buf.getvalue() == (2**31 - 1).to_bytes(4, "big") + tail, (api_key, version)
