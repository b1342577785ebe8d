"""Tiered storage on a dev cluster (``odradek dev up --tiered``: S3Proxy and 2 brokers running
the remote log manager every second): a topic with remote.storage.enable and tiny segments and
local retention has its rolled segments copied, the leader's disk keeps only the local limit,
and after the leader is killed the new leader resumes the copies with no gap and no second copy."""

from __future__ import annotations

import pytest

from odradek.broker.storage.remote_storage import RemoteStorageConfig, RemoteStorageManager
from odradek.dev.harness import Cluster, start_cluster, stop_cluster
from odradek.dev.waiting import wait_until
from tests.support.clients import confluent_produce
from tests.support.records import make_records

TOPIC = "tiered"
CONFIG = {"remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "32768",
          "min.insync.replicas": "1"}
SMALL_BATCHES = {"batch.size": 4000, "linger.ms": 5}   # several segments from a few hundred records


@pytest.fixture(scope="module")
def tc(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("tiered"), brokers=2, extra=("--tiered",))
    yield c
    stop_cluster(c)


def _rsm(c: Cluster) -> RemoteStorageManager:
    store = c.status()["object_store"]
    return RemoteStorageManager(RemoteStorageConfig(store["endpoint"], store["bucket"], store["access_key"],
                                                    store["secret_key"], max_attempts=1))


def _segments(rsm, topic_id):
    return rsm.list_log_segments(topic_id, TOPIC, 0)


def _local_logs(c: Cluster, broker: int) -> list[int]:
    part = c.data_dir / f"broker-{broker}" / f"{TOPIC}-0"
    return sorted(int(p.stem) for p in part.glob("*.log"))


def _assert_no_gap_nor_second_copy(listed) -> None:
    assert listed[0].start_offset == 0
    for a, b in zip(listed, listed[1:]):
        assert b.start_offset == a.end_offset + 1, f"gap or second copy between {a} and {b}"


def test_segments_reach_the_store_and_a_new_leader_resumes(tc):
    tc.create_topic(TOPIC, replication_factor=2, config=CONFIG)
    rsm = _rsm(tc)
    delivered = confluent_produce(tc.bootstrap, TOPIC, make_records(800), acks="all", **SMALL_BATCHES)
    assert len(delivered) == 800
    topic_id = None

    def uploaded(n: int):
        nonlocal topic_id
        topic_id = topic_id or _find_topic_id(rsm)
        listed = _segments(rsm, topic_id) if topic_id else []
        return listed if listed and listed[-1].end_offset >= n else None
    leader = tc.leader_id(TOPIC, 0)
    listed = wait_until(lambda: uploaded(400), 90, "the rolled segments in the store", interval=0.5)
    _assert_no_gap_nor_second_copy(listed)
    wait_until(lambda: _local_logs(tc, leader)[0] > 0, 60, "local retention on the leader", interval=0.5)
    assert _local_logs(tc, leader)[0] <= listed[-1].end_offset + 1, "a segment left the disk before the store had it"

    tc.run("kill", str(leader))
    try:
        wait_until(lambda: tc.leader_id(TOPIC, 0) not in (leader, -1), 60, "a new leader", interval=0.5)
        confluent_produce(tc.bootstrap, TOPIC, make_records(800, seed=2), acks="all", **SMALL_BATCHES)
        after = wait_until(lambda: uploaded(1200), 90, "the new leader's copies", interval=0.5)
        _assert_no_gap_nor_second_copy(after)
        assert {m.broker_id for m in after} == {leader, tc.leader_id(TOPIC, 0)}
    finally:
        tc.run("start", str(leader))


def _find_topic_id(rsm) -> str | None:
    """The topic id, from the store's key layout (``<topic>-<topicId>/<partition>/...``)."""
    for key in rsm._keys(f"{TOPIC}-"):
        return key.split("/", 1)[0][len(TOPIC) + 1:]
    return None
