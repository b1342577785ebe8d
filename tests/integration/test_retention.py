"""Retention deletes whole segments: the log start offset moves, reads below it fail."""

import time

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

from odradek.dev.waiting import wait_until
from tests.support.kafka_wire import WireClient, fetch_partition

LIST_OFFSETS = 2


@pytest.fixture(scope="module")
def cluster(shared_cluster):
    """The package's shared dev cluster (tests/integration/conftest.py): this module only creates its own topics."""
    return shared_cluster


def _earliest(client, topic):
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(
        name=topic, partitions=(ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                     timestamp=-2),)),))
    return client.request(LIST_OFFSETS, 7, req).topics[0].partitions[0].offset


def _fetch_error(client, topic, offset):
    return fetch_partition(client, topic, offset).error_code


def _fill(cluster, topic, count, timestamp_ms=None):
    p = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(count):
        p.produce(topic, value=b"x" * 500, timestamp=timestamp_ms or 0)
        p.flush(10)


def _start_above(client, topic, minimum, timeout=30):
    """The log start offset, once the retention check moved it past ``minimum``."""
    return wait_until(lambda: (start := _earliest(client, topic)) > minimum and start, timeout,
                      f"the log start offset of {topic} to pass {minimum}", 0.2)


def test_retention_bytes_deletes_old_segments(cluster):
    cluster.create_topic("ret-bytes", partitions=1,
                         config={"segment.bytes": "4096", "retention.bytes": "12000", "file.delete.delay.ms": "1000"})
    _fill(cluster, "ret-bytes", 100)
    with WireClient(cluster.leader_address("ret-bytes", 0)) as c:
        start = _start_above(c, "ret-bytes", 0)
        assert _fetch_error(c, "ret-bytes", 0) == ErrorCode.offset_out_of_range
        assert _fetch_error(c, "ret-bytes", start) == ErrorCode.none
    # A retention check during the fill may move the start before the last segments rolled: the
    # next check (every few seconds) deletes those too.
    log_dir = cluster.data_dir / f"broker-{cluster.leader_id('ret-bytes', 0)}" / "ret-bytes-0"
    wait_until(lambda: 0 < len(list(log_dir.glob("*.log"))) <= 5, 30,
               "retention to keep at most 5 segments of ret-bytes-0", 0.2)
    # the deleted segments' files (renamed .deleted at once) are unlinked once file.delete.delay.ms passed
    wait_until(lambda: not list(log_dir.glob("*.deleted")), 30, "the .deleted files of ret-bytes-0 to go", 0.2)


def test_retention_ms_deletes_segments_older_than_it(cluster):
    cluster.create_topic("ret-ms", partitions=1, config={"segment.bytes": "4096", "retention.ms": "3600000"})
    two_hours_ago = int(time.time() * 1000) - 2 * 3600 * 1000
    _fill(cluster, "ret-ms", 40, timestamp_ms=two_hours_ago)
    _fill(cluster, "ret-ms", 1)  # a fresh record in the active segment, which is kept
    with WireClient(cluster.leader_address("ret-ms", 0)) as c:
        start = _start_above(c, "ret-ms", 0)
        assert _fetch_error(c, "ret-ms", 0) == ErrorCode.offset_out_of_range
        assert start <= 40
