"""The kazoo store against a real ZooKeeper: JSON shapes, atomicity, CAS, election, fencing."""

from __future__ import annotations

import dataclasses
import json

import pytest

from odradek.cluster import paths
from odradek.cluster.model import PartitionState
from odradek.cluster.zk_session import ZkTimeouts
from odradek.controller.store import ControllerMoved, StoreError, StoreUnavailable, TooLarge
from odradek.controller.zkstore import ZkStore


def states(n: int, broker: int = 1, epoch: int = 1) -> dict[int, PartitionState]:
    return {p: PartitionState(p, (broker,), broker, 0, (broker,), epoch) for p in range(n)}


def test_election_increments_the_epoch_and_excludes_others(stores, zk):
    a, b = stores(), stores()
    first = a.elect("a", "http://a")
    assert (first.id, first.epoch, first.url) == ("a", 1, "http://a")
    assert b.elect("b", "http://b") is None
    assert json.loads(zk.get(paths.CONTROLLER)[0]) == {"id": "a", "epoch": 1, "url": "http://a"}
    assert zk.get(paths.CONTROLLER)[1].ephemeralOwner != 0
    assert json.loads(zk.get(paths.CONTROLLER_EPOCH)[0]) == 1
    a.resign(first)
    second = b.elect("b", "http://b")
    assert second.epoch == 2 and json.loads(zk.get(paths.CONTROLLER_EPOCH)[0]) == 2
    assert a.elect("a", "http://a") is None


def test_re_election_in_the_same_session_resumes(stores):
    a = stores()
    first = a.elect("a", "http://a")
    assert a.elect("a", "http://a") == first


def test_cluster_id_is_created_once(stores, zk):
    a, b = stores(), stores()
    cid = a.cluster_id()
    assert cid == b.cluster_id() and len(cid) == 22 and "=" not in cid
    assert json.loads(zk.get("/cluster/id")[0])["id"] == cid


def test_topic_creation_writes_every_znode_and_loses_the_second_race(stores, zk):
    a = stores()
    a.elect("a", "u")
    assert a.create_topic("t", "tid", states(2), {"retention.ms": "1000"})
    assert not a.create_topic("t", "other", states(1), {})
    assert json.loads(zk.get(paths.topic("t"))[0]) == {"version": 1, "topic_id": "tid",
                                                       "partitions": {"0": [1], "1": [1]}}
    assert json.loads(zk.get(paths.partition_state("t", 1))[0]) == {
        "version": 1, "leader": 1, "leader_epoch": 0, "isr": [1], "controller_epoch": 1}
    assert json.loads(zk.get(paths.topic_config("t"))[0]) == {"version": 1, "config": {"retention.ms": "1000"}}
    record = a.load().topics["t"]
    assert record.complete() and record.configs == {"retention.ms": "1000"}
    assert record.metadata().partitions == tuple(states(2).values())


def test_a_failed_creation_leaves_nothing_behind(stores, zk):
    a = stores()
    a.elect("a", "u")
    zk.create(paths.topic_config("t"), b'{"version":1,"config":{}}')  # stale config in the way
    with pytest.raises(StoreError):
        a.create_topic("t", "tid", states(3), {})
    assert zk.exists(paths.topic("t")) is None
    assert "t" not in a.load().topics


def test_a_transaction_above_zookeepers_request_limit_is_refused_unsent(stores, zk):
    """ZooKeeper drops the connection of a request above jute.maxbuffer (1 MiB): a topic of
    2,000 partitions at RF 3 fits in one transaction, 5,000 is refused before it is sent."""
    a = stores()
    a.elect("a", "u")
    rf3 = {p: dataclasses.replace(s, replicas=(1, 2, 3), isr=(1, 2, 3)) for p, s in states(5000).items()}
    with pytest.raises(TooLarge):
        a.create_topic("big", "tid", rf3, {})
    assert zk.exists(paths.topic("big")) is None and a.load().cluster_id  # the session is intact
    assert a.create_topic("fits", "tid", {p: rf3[p] for p in range(2000)}, {})


def test_partition_state_cas(stores):
    a = stores()
    a.elect("a", "u")
    a.create_topic("t", "tid", states(1), {})
    moved = PartitionState(0, (1,), -1, 1, (1,), 1)
    assert not a.update_partition_state("t", moved, version=7)
    assert a.update_partition_state("t", moved, version=0)
    assert not a.update_partition_state("t", moved, version=0)
    record = a.load().topics["t"]
    assert record.states[0] == dataclasses.replace(moved, partition_epoch=1)  # the znode's version
    assert record.state_versions[0] == 1


def test_add_partitions_and_configs_use_the_versions_they_read(stores):
    a = stores()
    a.elect("a", "u")
    a.create_topic("t", "tid", states(1), {})
    before = a.load().topics["t"]
    assert a.add_partitions(before, {1: PartitionState(1, (1,), 1, 0, (1,), 1)})
    assert not a.add_partitions(before, {2: PartitionState(2, (1,), 1, 0, (1,), 1)})
    after = a.load().topics["t"]
    assert sorted(after.assignment) == [0, 1] and after.complete()
    assert a.set_topic_configs(after, {"cleanup.policy": "compact"})
    assert not a.set_topic_configs(after, {"cleanup.policy": "delete"})
    assert a.load().topics["t"].configs == {"cleanup.policy": "compact"}


def test_deletion_removes_topic_config_and_marker(stores, zk):
    a = stores()
    a.elect("a", "u")
    a.create_topic("t", "tid", states(3), {"retention.ms": "5"})
    a.mark_for_deletion("t")
    a.mark_for_deletion("t")
    assert a.load().pending_deletions == {"t"}
    a.delete_topic("t")
    snap = a.load()
    assert "t" not in snap.topics and not snap.pending_deletions
    assert zk.exists(paths.topic("t")) is None and zk.exists(paths.topic_config("t")) is None


def test_a_deposed_controller_cannot_write(stores, zk):
    a, b = stores(), stores()
    a.elect("a", "u")
    zk.delete(paths.CONTROLLER)  # as if a's session had expired
    assert b.elect("b", "u").epoch == 2
    with pytest.raises(ControllerMoved):
        a.create_topic("t", "tid", states(1), {})
    assert zk.exists(paths.topic("t")) is None
    assert b.create_topic("t", "tid", states(1), {})


def test_brokers_carry_their_registration_czxid(stores, zk):
    a = stores()
    zk.create(paths.broker(3), json.dumps({"id": 3, "host": "h", "port": 1, "internal_url": "http://h:2",
                                           "rack": "r1"}).encode(), ephemeral=True)
    [broker] = a.load().brokers
    assert (broker.id, broker.host, broker.port, broker.rack) == (3, "h", 1, "r1")
    assert broker.epoch == zk.exists(paths.broker(3)).czxid


def test_unreachable_store_raises(zookeeper, cluster_name):
    store = ZkStore("127.0.0.1:1", cluster_name, ZkTimeouts(1000))
    with pytest.raises(StoreUnavailable):
        store.start(timeout=1.0)
    store.close()


def test_batched_state_writes_fail_only_the_partitions_that_lost_their_race(stores):
    """Leader and ISR changes go 100 partitions a transaction; one stale version among them
    fails that partition alone, the others of its transaction are written."""
    from odradek.controller.zkstore import STATES_PER_TRANSACTION
    a = stores()
    a.elect("a", "u")
    n = STATES_PER_TRANSACTION + 20
    a.create_topic("big", "tid", {p: PartitionState(p, (1, 2), 1, 0, (1, 2), 1) for p in range(n)}, {})
    writes = [("big", PartitionState(p, (1, 2), 2, 1, (2,), 1), 7 if p == 5 else 0) for p in range(n)]
    assert a.update_partition_states(writes) == [p != 5 for p in range(n)]
    states = a.load().topics["big"].states
    assert [states[p].leader for p in range(n)] == [1 if p == 5 else 2 for p in range(n)]
