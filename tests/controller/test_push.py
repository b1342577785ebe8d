"""Snapshots pushed to brokers: content, epoch fencing fields, broker deaths and returns, retries."""

from __future__ import annotations

import json

from odradek.cluster import control_plane as cp
from odradek.cluster import paths
from odradek.cluster.model import ClusterMetadata

T = cp.CREATE_TOPIC.path()


def has_topic(broker, name: str):
    snap = broker.latest()
    return snap is not None and any(t["name"] == name for t in snap["topics"]) and snap


def test_every_live_broker_gets_the_full_snapshot(controllers, fake_brokers, wait_for):
    b1, b2 = fake_brokers(1), fake_brokers(2)
    c = controllers("c1")
    c.wait_active()
    assert c.call("POST", T, {"name": "t", "partitions": 4})[0] == 201
    for broker in (b1, b2):
        snap = wait_for(lambda: has_topic(broker, "t"), 10, f"broker {broker.id} to learn topic t")
        md = ClusterMetadata.from_json(snap)  # the push contract parses
        assert (md.controller_id, md.controller_epoch) == ("c1", 1)
        assert [b.id for b in md.brokers] == [1, 2] and all(b.epoch > 0 for b in md.brokers)
        assert [p.leader for p in md.topic("t").partitions] == [p.replicas[0] for p in md.topic("t").partitions]
    # a broker that registers later gets the current snapshot at once
    b3 = fake_brokers(3)
    snap = wait_for(lambda: has_topic(b3, "t"), 10, "the new broker to get the snapshot")
    assert [b["id"] for b in snap["brokers"]] == [1, 2, 3]
    wait_for(lambda: [b["id"] for b in b1.latest()["brokers"]] == [1, 2, 3], 10, "broker 1 to see broker 3")


def test_rf1_partition_goes_offline_with_its_broker_and_returns_with_a_bumped_epoch(
        controllers, fake_brokers, zk, wait_for):
    b1, b2 = fake_brokers(1), fake_brokers(2)
    c = controllers("c1")
    c.wait_active()
    assert c.call("POST", T, {"name": "solo", "assignments": {"0": [1]}})[0] == 201
    wait_for(lambda: (b2.partition("solo", 0) or {}).get("leader") == 1, 10, "leader 1 pushed")

    b1.leave()
    offline = wait_for(lambda: (p := b2.partition("solo", 0)) and p["leader"] == -1 and p, 15,
                       "partition offline after broker 1 died")
    assert offline["leader_epoch"] == 1 and offline["isr"] == [1]
    state = json.loads(zk.get(paths.partition_state("solo", 0))[0])
    assert (state["leader"], state["leader_epoch"], state["controller_epoch"]) == (-1, 1, 1)
    assert [b["id"] for b in b2.latest()["brokers"]] == [2]

    b1.join()
    back = wait_for(lambda: (p := b1.partition("solo", 0)) and p["leader"] == 1 and p, 15,
                    "broker 1 back as leader")
    assert back["leader_epoch"] == 2
    wait_for(lambda: (b2.partition("solo", 0) or {}).get("leader_epoch") == 2, 10, "broker 2 to see epoch 2")


def test_a_failing_broker_is_retried_until_it_accepts(controllers, fake_brokers, wait_for):
    b1 = fake_brokers(1, join=False)
    b1.fail_next = 3
    b1.join()
    c = controllers("c1")
    c.wait_active()
    assert c.call("POST", T, {"name": "t"})[0] == 201
    wait_for(lambda: has_topic(b1, "t"), 15, "the snapshot after three refused pushes")
    assert len(b1.refused) >= 3


def test_deleted_topic_is_pushed_away_before_its_znodes_go(controllers, fake_brokers, zk, wait_for):
    b1 = fake_brokers(1)
    c = controllers("c1")
    c.wait_active()
    assert c.call("POST", T, {"name": "gone"})[0] == 201
    wait_for(lambda: has_topic(b1, "gone"), 10, "topic pushed")
    assert c.call("DELETE", cp.DELETE_TOPIC.path(name="gone"))[0] == 200
    assert not has_topic(b1, "gone")  # the push without it was accepted before the answer
    assert zk.exists(paths.topic("gone")) is None


def test_a_stale_controller_epoch_refusal_is_not_retried_forever(controllers, fake_brokers, wait_for):
    b1 = fake_brokers(1, join=False)
    b1.max_epoch = 99  # as if the broker had heard from a newer controller
    b1.join()
    c = controllers("c1")
    c.wait_active()
    wait_for(lambda: b1.refused, 60, "a refused push")
    assert c.call("POST", T, {"name": "t"})[0] == 201
    wait_for(lambda: len(b1.refused) >= 2, 60, "the next snapshot to be offered once")
    assert all(r["controller_epoch"] == 1 for r in b1.refused) and not b1.snapshots
    assert "refused controller epoch 1 as stale" in c.log()
