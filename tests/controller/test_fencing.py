"""A deposed controller is fenced: its ZooKeeper writes fail and brokers refuse its pushes
(tested directly on the store and the pusher); and a standby finishes the elections when the
active controller dies during broker failures (real processes)."""

from __future__ import annotations

import asyncio
import json

import pytest

from odradek.cluster import control_plane as cp
from odradek.cluster import paths
from odradek.cluster.model import BrokerInfo, ClusterMetadata, PartitionState
from odradek.controller import reassignment
from odradek.controller.push import Pusher
from odradek.controller.store import ControllerMoved

TAKEOVER_MARGIN_S = 20


def test_a_deposed_controller_cannot_write_partition_states_or_reassignments(stores, zk, fake_brokers):
    for i in (1, 2, 3):
        fake_brokers(i)
    old, new = stores(), stores()
    old.elect("old", "u")
    assert old.create_topic("t", "tid", {0: PartitionState(0, (1, 2), 1, 0, (1, 2), 1)}, {})
    zk.delete(paths.CONTROLLER)  # as if old's session had expired
    assert new.elect("new", "u").epoch == 2

    snapshot = old.load()
    before = zk.get(paths.partition_state("t", 0))
    with pytest.raises(ControllerMoved):
        old.update_partition_state("t", PartitionState(0, (1, 2), 2, 1, (2,), 1), before[1].version)
    move = reassignment.start(snapshot.topics["t"], 0, (3,), frozenset({1, 2, 3}), 1)
    with pytest.raises(ControllerMoved):
        old.write_reassignments(reassignment.writes(snapshot, [move]), {("t", 0): (3,)}, -1)
    assert zk.get(paths.partition_state("t", 0)) == before
    assert json.loads(zk.get(paths.topic("t"))[0])["partitions"] == {"0": [1, 2]}
    assert zk.exists(paths.REASSIGN_PARTITIONS) is None
    # the new controller's writes land
    assert new.update_partition_state("t", PartitionState(0, (1, 2), 2, 1, (2,), 2), before[1].version)


def test_a_broker_refuses_the_pushes_of_a_deposed_controller(fake_brokers):
    broker = fake_brokers(1)
    info = BrokerInfo(1, "127.0.0.1", 9093, broker.url, None, broker.epoch)

    def snapshot(epoch: int, leader: int) -> ClusterMetadata:
        return ClusterMetadata.from_json({
            "cluster_id": "c", "controller_id": f"c{epoch}", "controller_epoch": epoch,
            "brokers": [info.to_json()],
            "topics": [{"name": "t", "topic_id": "tid", "configs": {}, "partitions": [
                PartitionState(0, (1, 2), leader, epoch, (1, 2), epoch).to_json()]}]})

    async def run() -> list[BrokerInfo]:
        stale: list[BrokerInfo] = []
        new, old = Pusher(), Pusher(on_stale=stale.append)
        try:
            new.publish(snapshot(2, 1))
            assert await new.wait_delivered(10)
            old.publish(snapshot(1, 2))  # the deposed controller still believes it leads
            assert await old.wait_delivered(10)  # answered: refused, not retried
        finally:
            await new.stop()
            await old.stop()
        return stale

    stale = asyncio.run(run())
    assert [b.id for b in stale] == [1]
    assert broker.latest()["controller_epoch"] == 2 and broker.partition("t", 0)["leader"] == 1
    assert [r["controller_epoch"] for r in broker.refused] == [1]


def test_the_standby_finishes_the_elections_when_the_active_dies_with_a_broker(
        controllers, fake_brokers, zk, wait_for):
    brokers = {i: fake_brokers(i) for i in (1, 2, 3)}
    a = controllers("a", "--no-auto-leader-rebalance")
    a.wait_active()
    b = controllers("b", "--no-auto-leader-rebalance")
    assert a.call("POST", cp.CREATE_TOPIC.path(),
                  {"name": "t", "assignments": {"0": [1, 2, 3], "1": [2, 3, 1]}})[0] == 201
    wait_for(lambda: brokers[3].partition("t", 0), 10, "the topic pushed")
    a.kill()
    brokers[1].leave()  # while no controller acts
    b.wait_active(a.session_timeout + TAKEOVER_MARGIN_S)
    p0 = wait_for(lambda: (p := brokers[3].partition("t", 0)) and p["leader"] == 2 and p, 15, "t-0 elected")
    p1 = brokers[3].partition("t", 1)
    assert (p0["leader_epoch"], p0["isr"]) == (1, [2, 3])
    assert (p1["leader"], p1["leader_epoch"], p1["isr"]) == (2, 0, [2, 3])
    assert brokers[3].latest()["controller_epoch"] == 2
    assert json.loads(zk.get(paths.partition_state("t", 0))[0])["controller_epoch"] == 2
