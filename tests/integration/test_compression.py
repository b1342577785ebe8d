"""gzip, snappy, lz4 and zstd batches round-trip through the broker unchanged.

Each codec is produced once with confluent-kafka (librdkafka) and once with kafka-python; every
topic is read back with both consumers (kafka-python verifies each batch's CRC) and compared
byte for byte. A raw Fetch then checks what the broker serves: record batch v2, a valid
CRC-32C on every batch, and the producer's codec kept (Kafka's default
``compression.type=producer``).
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from odradek.records import Compression, iter_batches

RECORDS = 5_000
PARTITIONS = 3
CODECS = {"gzip": Compression.GZIP, "snappy": Compression.SNAPPY, "lz4": Compression.LZ4, "zstd": Compression.ZSTD}

pytestmark = pytest.mark.timeout(300)

TEXT = b"Odradek looks like a flat star-shaped spool for thread, and it is in fact covered with thread. " * 4


@pytest.fixture(scope="module")
def cluster(shared_cluster):
    """The package's shared dev cluster (tests/integration/conftest.py): this module only creates its own topics."""
    return shared_cluster


def _compressible(dataset, seed):
    """The shared keyed records with long repetitive values (so every codec really compresses)."""
    out = []
    for s in dataset.make(RECORDS, keys=101, seed=seed):
        head, tail = s.value.split(b"|", 1)
        out.append(dataset.Sent(s.index, s.key, head + b"|" + TEXT[: 64 + s.index % 300] + tail[:8],
                                s.headers, s.timestamp))
    return out


@pytest.mark.parametrize("producer", ["confluent", "kafka-python"])
@pytest.mark.parametrize("codec", list(CODECS))
def test_codec_round_trip(cluster, dataset, clients, codec, producer):
    topic = f"compression-{codec}-{producer}"
    cluster.create_topic(topic, partitions=PARTITIONS)
    records = _compressible(dataset, seed=len(topic))
    if producer == "confluent":
        delivered = clients.confluent_produce(cluster.bootstrap, topic, records, acks=1, **{"compression.type": codec})
    else:
        delivered = clients.kafka_python_produce(cluster.bootstrap, topic, records, acks=1, compression_type=codec)

    for consume in (clients.confluent_consume, clients.kafka_python_consume):
        got, high = consume(cluster.bootstrap, topic, PARTITIONS, RECORDS)
        dataset.verify(records, got, delivered)
        assert high == RECORDS

    total = 0
    for partition in range(PARTITIONS):
        batches = _raw_batches(cluster.leader_address(topic, partition), topic, partition)
        assert batches, f"partition {partition}: no batches served"
        for base_offset, codec_id, count, crc_ok in batches:
            assert crc_ok, f"partition {partition} batch at {base_offset}: CRC-32C mismatch"
            # both clients send a batch uncompressed when its codec would not shrink it (a lone
            # short record, as a loaded machine's linger can leave; kafka-python's
            # DefaultRecordBatchBuilder._maybe_compress): the broker keeps it so
            lone = count == 1 and codec_id == 0
            assert codec_id == CODECS[codec] or lone, (
                f"partition {partition} batch at {base_offset}: served with codec {codec_id}, "
                f"produced with {codec} ({CODECS[codec]})")
            total += count
    assert total == RECORDS


# -- a raw Fetch v10 (non-flexible; zstd needs v10+); its batches read with odradek.records ------

def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _fetch_v10(sock: socket.socket, topic: str, partition: int, offset: int, correlation: int):
    body = (struct.pack(">iiiib", -1, 500, 1, 16 * 1024 * 1024, 0)        # replica, wait, min, max, isolation
            + struct.pack(">ii", 0, -1)                                      # no fetch session
            + struct.pack(">i", 1) + _string(topic)
            + struct.pack(">i", 1) + struct.pack(">iiqqi", partition, -1, offset, -1, 8 * 1024 * 1024)
            + struct.pack(">i", 0))                                          # forgotten topics
    header = struct.pack(">hhi", 1, 10, correlation) + _string("compression-test")
    sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
    size = struct.unpack(">i", _exact(sock, 4))[0]
    frame = _exact(sock, size)
    pos = 4  # correlation id
    assert struct.unpack_from(">i", frame, 0)[0] == correlation
    _throttle, error, _session, n_topics = struct.unpack_from(">ihii", frame, pos)
    pos += 14
    assert error == 0 and n_topics == 1, (error, n_topics)
    name_len = struct.unpack_from(">h", frame, pos)[0]
    pos += 2 + name_len
    n_parts = struct.unpack_from(">i", frame, pos)[0]
    pos += 4
    assert n_parts == 1
    _p, perr, high, _lso, _log_start, n_aborted = struct.unpack_from(">ihqqqi", frame, pos)
    pos += 34 + max(n_aborted, 0) * 16
    assert perr == 0, f"Fetch v10 {topic}-{partition} at {offset}: error {perr}"
    rec_len = struct.unpack_from(">i", frame, pos)[0]
    pos += 4
    return high, frame[pos:pos + max(rec_len, 0)]


def _exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        out += chunk
    return bytes(out)


def _raw_batches(address: str, topic: str, partition: int, timeout: float = 60):
    """[(base_offset, codec, record_count, crc_ok)] of every batch up to the high watermark."""
    host, port = address.rsplit(":", 1)
    out = []
    offset, correlation = 0, 0
    deadline = time.monotonic() + timeout
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        while True:
            correlation += 1
            high, data = _fetch_v10(sock, topic, partition, offset, correlation)
            if offset >= high:
                return out
            assert time.monotonic() < deadline, f"raw fetch of {topic}-{partition} stuck at {offset}/{high}"
            for batch in iter_batches(memoryview(data)):   # a partial batch at the end is allowed
                assert batch.magic == 2, f"batch at {batch.base_offset}: magic {batch.magic}"
                if batch.last_offset >= offset:
                    out.append((batch.base_offset, int(batch.compression), batch.records_count,
                                batch.compute_crc() == batch.crc))
                offset = max(offset, batch.next_offset)
