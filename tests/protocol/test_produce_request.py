"""The Produce request's own reader (``produce_request``) reads what kio reads, for every
version served (3-11), with each partition's records a read-only view of the frame (no copy)
from ``PRODUCE_VIEWS_FROM`` bytes; it skips unknown tagged fields and refuses truncated or
malformed frames (FrameError: the connection is closed, as on kio's errors). A produce writes
the request's bytes as sent, and a frame's memory stays the request's while it is held."""

from __future__ import annotations

import asyncio
import datetime
import os
import struct
import time

import pytest

from odradek.broker.replication.wire import encode_request
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import PRODUCE_VIEWS_FROM, FrameError, Schemas, _request_readers, decode_request, make
from odradek.protocol.produce_request import read_produce_request
from odradek.protocol.primitives import NO_TAGS, array_length, string, tagged_fields, uvarint
from odradek.records import Record, build_batch

BATCH = bytes(build_batch([Record(b"v" * 300, b"k")] * (PRODUCE_VIEWS_FROM // 600)))   # two make a view


def _kio_body(version: int, transactional_id: str | None, acks: int):
    s = Schemas(ApiKey.PRODUCE, version, kind=_request_kind())
    return make(s.ProduceRequest, transactional_id=transactional_id, acks=acks,
                timeout=datetime.timedelta(milliseconds=12345), topic_data=(
                    make(s.TopicProduceData, name="orders", partition_data=(
                        make(s.PartitionProduceData, index=0, records=BATCH),
                        make(s.PartitionProduceData, index=7, records=b""),
                        make(s.PartitionProduceData, index=2, records=None))),
                    make(s.TopicProduceData, name="ünïcode-" + "t" * 140, partition_data=(
                        make(s.PartitionProduceData, index=3, records=BATCH + BATCH),))))


def _request_kind():
    from kio.static.constants import EntityType
    return EntityType.request


def _plain(request) -> tuple:
    """A request's fields as plain values (records as bytes), whoever read it."""
    return (request.transactional_id, request.acks, request.timeout, tuple(
        (t.name, tuple((p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data))
        for t in request.topic_data))


@pytest.mark.parametrize("version", range(3, 12))
@pytest.mark.parametrize("transactional_id, acks", [(None, 1), ("tx-ü", -1), ("", 0)])
def test_reads_what_kio_reads_with_records_viewing_the_frame(version, transactional_id, acks):
    frame = bytearray(encode_request(ApiKey.PRODUCE, version, 77, "client-ü", _kio_body(version, transactional_id, acks)))
    view = memoryview(frame)[4:].toreadonly()
    header, ours = decode_request(view)
    read_header, read_body = _request_readers(ApiKey.PRODUCE, version)
    kio_header, at = read_header(view, 0)
    kio, _ = read_body(view, at)
    assert header == (ApiKey.PRODUCE, version, 77, "client-ü") == (
        kio_header.request_api_key, kio_header.request_api_version, kio_header.correlation_id, kio_header.client_id)
    assert _plain(ours) == _plain(kio)
    records = ours.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.readonly and records.obj is frame, "a view, not a copy"
    at = frame.index(BATCH)
    frame[at:at + 4] = b"\xff" * 4
    assert bytes(records[:4]) == b"\xff" * 4


def _flexible_frame(tags: bytes) -> bytes:
    """A Produce v11 body written by hand, with ``tags`` as every tagged-field section."""
    return b"".join([struct.pack(">hhih", ApiKey.PRODUCE, 11, 5, -1), tags,   # null client id
                     b"\0", struct.pack(">hi", 1, 500), array_length(1, True), string("t", True),
                     array_length(1, True), struct.pack(">i", 0), uvarint(len(BATCH) + 1), BATCH, tags, tags, tags])


def test_unknown_tagged_fields_are_skipped():
    plain = read_produce_request(memoryview(_flexible_frame(NO_TAGS)))
    tagged = read_produce_request(memoryview(_flexible_frame(tagged_fields([(0, b"abc"), (300, b"x" * 200)]))))
    assert plain == tagged
    *header, body = tagged
    assert header[3] is None and body.transactional_id is None and body.acks == 1
    assert body.timeout == datetime.timedelta(milliseconds=500)
    assert bytes(body.topic_data[0].partition_data[0].records) == BATCH


@pytest.mark.parametrize("version", [8, 11])
def test_every_truncation_is_a_frame_error(version):
    frame = encode_request(ApiKey.PRODUCE, version, 1, "c", _kio_body(version, "tx", 1))[4:]
    for end in [*range(200), *range(len(frame) - 200, len(frame))]:   # the batches' middle: one view
        with pytest.raises((ValueError, IndexError, struct.error)):
            read_produce_request(memoryview(frame[:end]))
    with pytest.raises(FrameError):
        decode_request(memoryview(frame[:-1]))


def test_malformed_fields_are_frame_errors():
    good = _flexible_frame(NO_TAGS)
    null_topics = good[:good.index(array_length(1, True) + string("t", True))] + b"\0"   # compact null array
    bad_utf8 = good.replace(string("t", True), uvarint(2) + b"\xff")
    endless_varint = good[:10] + b"\xff" * 6 + good[11:]   # the header's tag count
    for frame in (null_topics, bad_utf8, endless_varint):
        with pytest.raises(ValueError):
            read_produce_request(memoryview(frame))


def _frame(version: int, records: bytes, correlation_id: int = 1, topic: str = "t") -> bytearray:
    s = Schemas(ApiKey.PRODUCE, version, kind=_request_kind())
    body = make(s.ProduceRequest, transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=5), topic_data=(
        make(s.TopicProduceData, name=topic, partition_data=(make(s.PartitionProduceData, index=0, records=records),)),))
    return bytearray(encode_request(ApiKey.PRODUCE, version, correlation_id, "c", body)[4:])


def test_a_produce_writes_the_request_s_exact_bytes_with_only_offset_and_epoch_stamped(tmp_path):
    """Through the broker's dispatcher onto a real log: the file holds the batch as sent but for
    baseOffset and partitionLeaderEpoch, and a frame overwritten once answered changes nothing."""
    from odradek.broker.config import BrokerConfig
    from odradek.broker.context import BrokerContext
    from odradek.broker.dispatch import Dispatcher
    from odradek.broker.handlers import table
    from tests.replication.harness import TOPIC, FakeController

    async def run():
        c = FakeController(replicas=(1,))
        await c.start(tmp_path)
        try:
            c.set_state(leader=1, leader_epoch=3, isr=(1,))
            node = c.nodes[1]
            config = BrokerConfig(1, tmp_path / "unused", "unused", auto_create_topics=False)
            dispatcher = Dispatcher(table(BrokerContext.create(config, node.replicas, c)))
            for version in (8, 11):
                frame = _frame(version, BATCH, topic=TOPIC)
                start = node.log.log_end_offset
                await dispatcher.handle(frame)
                frame[:] = bytes(len(frame))     # the frame's memory, reused once answered
                assert node.log.log_end_offset == start + PRODUCE_VIEWS_FROM // 600
                expected = bytearray(BATCH)
                struct.pack_into(">q", expected, 0, start)
                struct.pack_into(">i", expected, 12, 3)
                segment = node.log.active_segment.log
                written = os.pread(segment.fd, len(BATCH), segment.size - len(BATCH))
                assert written == expected
        finally:
            await c.stop()
    asyncio.run(run())


def test_a_frame_stays_whole_while_its_records_are_held_and_more_frames_arrive():
    """The connection gives each frame its own memory: records viewed from the first frame keep
    their bytes while the handler waits and the next frames are read from the socket."""
    from odradek.protocol.connection import KafkaConnection
    first, second = _frame(11, BATCH, 1), _frame(11, BATCH[::-1], 2)   # different bytes, one size

    async def run():
        held, release, connections = [], asyncio.Event(), []

        async def handler(frame):
            _, request = decode_request(memoryview(frame).toreadonly())
            records = request.topic_data[0].partition_data[0].records
            if not held:
                held.append(records)
                await release.wait()
                assert bytes(held[0]) == BATCH
            else:
                held.append(records)
            return None

        def connection():
            connections.append(KafkaConnection(handler, max_frame_bytes=1 << 20))
            return connections[-1]
        server = await asyncio.get_running_loop().create_server(connection, "127.0.0.1", 0)
        _, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
        try:
            for frame in (first, second):
                writer.write(struct.pack(">i", len(frame)) + frame)
            await writer.drain()
            deadline = time.monotonic() + 10
            while not connections or len(connections[0]._frames) < 1:   # the second frame read and queued
                assert time.monotonic() < deadline, "the second frame never arrived"
                await asyncio.sleep(0.01)
            assert bytes(held[0]) == BATCH
            release.set()
            while len(held) < 2:
                assert time.monotonic() < deadline, "the second frame was never handled"
                await asyncio.sleep(0.01)
            assert bytes(held[0]) == BATCH and bytes(held[1]) == BATCH[::-1]
        finally:
            writer.close()
            server.close()
    asyncio.run(run())
