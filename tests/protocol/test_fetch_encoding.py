"""The Fetch response written straight from the read's values is byte for byte what kio writes
for the same response (each partition's records spliced in from its file region), for every
version served (4-16): errors, aborted transactions, a diverging epoch, a preferred replica,
topics by id (v13+), a partition's current leader and the node endpoints (v16)."""

from __future__ import annotations

import datetime
import os
import uuid
from types import SimpleNamespace

import pytest

from odradek.broker.handlers.fetch_encoding import FLEXIBLE_FROM, encode_fetch_response
from odradek.broker.replication.read import PartitionRead
from odradek.broker.storage.segment import FetchSlice
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, encode_response, make
from odradek.protocol.connection import FileRegion


@pytest.fixture
def segment(tmp_path):
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(300))
    fd = os.open(path, os.O_RDONLY)
    yield fd
    os.close(fd)


def _topics(fd: int):
    return [
        ("orders", [PartitionRead(0, ErrorCode.none, 120, 3, FetchSlice(fd, 10, 200, 5, 9), last_stable_offset=110),
                    PartitionRead(1, ErrorCode.none, 7, 0, None, last_stable_offset=7, aborted=()),
                    PartitionRead(2, ErrorCode.none, 50, 1, FetchSlice(fd, 0, 10, 1, 2), last_stable_offset=40,
                                  aborted=((1001, 3), (1002, 17)), preferred_replica=2)]),
        ("ünïcode-" + "t" * 140, [PartitionRead(4, ErrorCode.not_leader_or_follower),
                                  PartitionRead(5, ErrorCode.none, 9, 0, diverging=(3, 8), last_stable_offset=9)]),
    ]


class _Hints(SimpleNamespace):
    """``leader_hints.Hints`` as the encoder reads it: fixed leaders and endpoints."""

    def leader(self, key, partition):
        return self.leaders.get((key, partition))

    def node_endpoints(self):
        return self.endpoints


def _keyed(version: int, topics):
    """The topics as the handler passes them: by id from v13."""
    return [(uuid.uuid5(uuid.NAMESPACE_DNS, name), parts) for name, parts in topics] if version >= 13 else topics


def _hints(version: int, topics):
    if version < 16 or not topics:
        return None
    key = topics[-1][0]
    return _Hints(leaders={(key, 4): (3, 21)},
                  endpoints=[(3, "broker-3.example", 9093, "rack-c"), (1, "h1", 19091, None)])


def _kio(version: int, correlation_id: int, topics, throttle_ms: int, session_id: int, error: ErrorCode,
         fd: int, hints=None) -> bytes:
    s = Schemas(ApiKey.FETCH, version)

    def extra(key, p) -> dict:
        out = {}
        if p.diverging and version >= FLEXIBLE_FROM:
            out["diverging_epoch"] = make(s.EpochEndOffset, epoch=p.diverging[0], end_offset=p.diverging[1])
        if hints is not None and (leader := hints.leader(key, p.partition)) is not None:
            out["current_leader"] = make(s.LeaderIdAndEpoch, leader_id=leader[0], leader_epoch=leader[1])
        return out

    body = make(s.FetchResponse, throttle_time=datetime.timedelta(milliseconds=throttle_ms), error_code=error,
                session_id=session_id, responses=tuple(make(
                    s.FetchableTopicResponse, **({"topic_id": key} if version >= 13 else {"topic": key}),
                    partitions=tuple(
                    make(s.PartitionData, partition_index=p.partition, error_code=p.error,
                         high_watermark=p.high_watermark, last_stable_offset=p.last_stable_offset,
                         log_start_offset=p.log_start_offset, preferred_read_replica=p.preferred_replica,
                         aborted_transactions=None if p.aborted is None else tuple(
                             make(s.AbortedTransaction, producer_id=pid, first_offset=first) for pid, first in p.aborted),
                         records=p.records.read() if p.records is not None else b"", **extra(key, p))
                    for p in parts)) for key, parts in topics),
                **({"node_endpoints": tuple(make(s.NodeEndpoint, node_id=n, host=h, port=port, rack=r)
                                            for n, h, port, r in hints.node_endpoints())} if hints else {}))
    return bytes(encode_response(ApiKey.FETCH, version, correlation_id, body))


def _joined(pieces) -> bytes:
    return b"".join(os.pread(p.fd, p.size, p.position) if isinstance(p, FileRegion) else bytes(p) for p in pieces)


@pytest.mark.parametrize("version", range(4, 17))
def test_the_fetch_response_is_written_as_kio_writes_it(version, segment):
    topics = _keyed(version, _topics(segment))
    hints = _hints(version, topics)
    pieces = encode_fetch_response(version, 77, topics, 250, 9001, ErrorCode.none, hints)
    assert _joined(pieces) == _kio(version, 77, topics, 250, 9001, ErrorCode.none, segment, hints)
    assert sum(isinstance(p, FileRegion) for p in pieces) == 2   # records go by sendfile


@pytest.mark.parametrize("version", [4, 7, 12, 13, 16])
def test_an_empty_or_failed_fetch_response_is_written_as_kio_writes_it(version, segment):
    for topics, error in (([], ErrorCode.fetch_session_id_not_found), (_keyed(version, [("t", [])]), ErrorCode.none)):
        assert _joined(encode_fetch_response(version, 5, topics, 0, 0, error)) == \
            _kio(version, 5, topics, 0, 0, error, segment)
