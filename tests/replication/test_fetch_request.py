"""The follower's Fetch v12 request, encoded without kio's entities, is byte for byte what kio
writes for the same request (and what the broker's decoder reads back)."""

from __future__ import annotations

import datetime

import pytest
from kio.static.constants import EntityType

from odradek.broker.replication.fetch_request import VERSION, FollowerFetch
from odradek.broker.replication.wire import encode_request
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, decode_request, make

CASES = [
    ([], []),
    ([("t", [(0, 5, 1234, 0, 1 << 20)])], []),
    ([("orders", [(p, 7, 2**40 + p, 3, 16384) for p in range(200)]), ("ünïcode-τopic", [(1, -1, 0, -1, 1)])],
     [("gone", [0, 1, 300]), ("x" * 130, [2])]),
]


def _kio(request: FollowerFetch):
    s = Schemas(ApiKey.FETCH, VERSION, EntityType.request)
    return make(s.FetchRequest, cluster_id=None, replica_id=request.replica_id,
                max_wait=datetime.timedelta(milliseconds=request.max_wait_ms), min_bytes=request.min_bytes,
                max_bytes=request.max_bytes, isolation_level=0, session_id=request.session_id,
                session_epoch=request.session_epoch, rack_id="",
                topics=tuple(make(s.FetchTopic, topic=t, partitions=tuple(
                    make(s.FetchPartition, partition=p, current_leader_epoch=e, fetch_offset=o,
                         last_fetched_epoch=-1, log_start_offset=start, partition_max_bytes=m)
                    for p, e, o, start, m in parts)) for t, parts in request.topics),
                forgotten_topics_data=tuple(make(s.ForgottenTopic, topic=t, partitions=tuple(ps))
                                            for t, ps in request.forgotten))


@pytest.mark.parametrize("topics,forgotten", CASES)
def test_the_follower_fetch_is_encoded_as_kio_encodes_it(topics, forgotten):
    request = FollowerFetch(3, 500, 1, 10 << 20, 123456, 2**31 - 1, topics, forgotten)
    ours = encode_request(ApiKey.FETCH, VERSION, 42, "odradek-replica-3", request)
    assert ours == encode_request(ApiKey.FETCH, VERSION, 42, "odradek-replica-3", _kio(request))
    header, body = decode_request(memoryview(ours)[4:])
    assert (header.correlation_id, body.replica_id, body.session_id) == (42, 3, 123456)
    assert [(t.topic, [p.fetch_offset for p in t.partitions]) for t in body.topics] == \
        [(t, [o for _, _, o, _, _ in parts]) for t, parts in topics]


@pytest.mark.parametrize("api_key,version", [(ApiKey.FETCH, VERSION), (ApiKey.OFFSET_FOR_LEADER_EPOCH, 4),
                                             (ApiKey.SASL_HANDSHAKE, 1), (ApiKey.ADD_PARTITIONS_TO_TXN, 4)])
def test_a_requests_header_is_the_one_kio_writes(api_key, version):
    """The header's bytes around the correlation id, written once per (API, version, client id),
    are kio's writing the header itself."""
    import io

    from kio.index import load_request_schema
    from kio.serial import entity_writer

    header = load_request_schema(api_key, version).__header_schema__
    for client_id in ("odradek-replica-3", "ünïcode", None):
        buf = io.BytesIO()
        entity_writer(header)(buf, header(request_api_key=api_key, request_api_version=version,
                                          correlation_id=2**31 - 1, client_id=client_id))
        encoded = encode_request(api_key, version, 2**31 - 1, client_id, FollowerFetch(0, 0, 0, 0, 0, 0, [], []))
        assert encoded[4:4 + len(buf.getvalue())] == buf.getvalue()
