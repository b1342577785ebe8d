"""Admin plans and loop decisions over built snapshots: Kafka's error codes, no ZooKeeper."""

from __future__ import annotations

import pytest

from odradek.cluster.model import BrokerInfo, PartitionState
from odradek.controller import admin, decisions
from odradek.controller.config import ControllerConfig
from odradek.controller.store import ControllerRecord, StoreSnapshot, TopicRecord
from odradek.errors import ErrorCode, KafkaError

ME = ControllerRecord("c1", 3, "http://127.0.0.1:1")


def broker(i: int) -> BrokerInfo:
    return BrokerInfo(i, "127.0.0.1", 9090 + i, f"http://127.0.0.1:{8000 + i}", None, 100 + i)


def topic(name: str, leaders: list[int], configs=None) -> TopicRecord:
    states = {p: PartitionState(p, (l if l >= 0 else 1,), l, 0, (l if l >= 0 else 1,), 1)
              for p, l in enumerate(leaders)}
    return TopicRecord(name, f"id-{name}", {p: s.replicas for p, s in states.items()}, 0, states,
                       {p: 0 for p in states}, configs or {}, 0)


def snapshot(brokers=(1, 2), topics=(), deleting=()) -> StoreSnapshot:
    return StoreSnapshot("cid", ME, tuple(broker(i) for i in brokers), {t.name: t for t in topics},
                         frozenset(deleting))


def code_of(fn, *args) -> ErrorCode:
    with pytest.raises(KafkaError) as e:
        fn(*args)
    return e.value.code


def create(snap, defaults=ControllerConfig(), **kw):
    return admin.plan_create(admin.CreateTopic(**kw), snap, defaults, ME.epoch)


def test_create_uses_defaults_for_minus_one():
    plan = create(snapshot(), ControllerConfig(num_partitions=3), name="t")
    assert sorted(plan.states) == [0, 1, 2]
    assert all(len(s.replicas) == 1 and s.leader == s.replicas[0] and s.leader_epoch == 0
               and s.controller_epoch == ME.epoch for s in plan.states.values())
    assert {s.leader for s in plan.states.values()} == {1, 2}


def test_replication_factor_up_to_the_live_brokers():
    plan = create(snapshot(brokers=(1, 2, 3)), name="t", partitions=3, replication_factor=3)
    for s in plan.states.values():
        assert len(s.replicas) == 3 and s.isr == s.replicas and s.leader == s.replicas[0]
        assert s.leader_epoch == 0
    assert {s.replicas for s in plan.states.values()} == {(1, 2, 3), (2, 3, 1), (3, 1, 2)}
    with pytest.raises(KafkaError) as e:
        create(snapshot(brokers=(1, 2)), name="t", partitions=1, replication_factor=3)
    assert e.value.code == ErrorCode.invalid_replication_factor
    assert e.value.message == "Replication factor: 3 larger than available brokers: 2."
    with pytest.raises(KafkaError) as e:
        create(snapshot(brokers=(1, 2)), ControllerConfig(default_replication_factor=3), name="t")
    assert e.value.message == "Replication factor: 3 larger than available brokers: 2."
    plan = create(snapshot(), name="t", assignments={0: (2, 1)})
    assert plan.states[0] == PartitionState(0, (2, 1), 2, 0, (2, 1), ME.epoch)


def test_partition_increase_keeps_the_replication_factor_and_the_rotation():
    snap = snapshot(brokers=(1, 2, 3), topics=[])
    first = create(snap, name="t", partitions=2, replication_factor=2)
    record = TopicRecord("t", "id", {p: s.replicas for p, s in first.states.items()}, 0, first.states,
                         {p: 0 for p in first.states})
    _, new = admin.plan_partitions(snapshot(brokers=(1, 2, 3), topics=[record]), "t", 5, ME.epoch)
    whole = {**{p: s.replicas for p, s in first.states.items()}, **{p: s.replicas for p, s in new.items()}}
    start = [1, 2, 3].index(whole[0][0])
    assert whole == {i: tuple([1, 2, 3][(start + i + j) % 3] for j in range(2)) for i in range(5)}
    assert all(s.isr == s.replicas and s.leader == s.replicas[0] for s in new.values())


@pytest.mark.parametrize("kw, code", [
    (dict(name="a b"), ErrorCode.invalid_topic_exception),
    (dict(name="x.y"), ErrorCode.invalid_topic_exception),  # collides with x_y
    (dict(name="x_y"), ErrorCode.topic_already_exists),
    (dict(name="t", partitions=0), ErrorCode.invalid_partitions),
    (dict(name="t", replication_factor=0), ErrorCode.invalid_replication_factor),
    (dict(name="t", configs={"retention.ms": "soon"}), ErrorCode.invalid_config),
    (dict(name="t", configs={"no.such.key": "1"}), ErrorCode.invalid_config),
    (dict(name="t", partitions=2, assignments={0: (1,)}), ErrorCode.invalid_request),
    (dict(name="t", assignments={0: (9,)}), ErrorCode.invalid_replica_assignment),
    (dict(name="t", assignments={1: (1,)}), ErrorCode.invalid_replica_assignment),
])
def test_create_errors(kw, code):
    with pytest.raises(KafkaError) as e:
        create(snapshot(topics=[topic("x_y", [1])]), **kw)
    assert e.value.code == code


def test_no_live_broker_means_invalid_replication_factor():
    with pytest.raises(KafkaError) as e:
        create(snapshot(brokers=()), name="t")
    assert e.value.code == ErrorCode.invalid_replication_factor
    assert e.value.message == "Replication factor: 1 larger than available brokers: 0."


def test_explicit_assignment_is_kept():
    plan = create(snapshot(), name="t", assignments={0: (2,), 1: (1,)})
    assert {p: s.replicas for p, s in plan.states.items()} == {0: (2,), 1: (1,)}


def test_partition_increase():
    snap = snapshot(topics=[topic("t", [1, 2])])
    _, new = admin.plan_partitions(snap, "t", 4, ME.epoch)
    assert sorted(new) == [2, 3] and [new[2].replicas, new[3].replicas] == [(1,), (2,)]
    assert code_of(admin.plan_partitions, snap, "t", 2, 1) == ErrorCode.invalid_partitions
    assert code_of(admin.plan_partitions, snap, "t", 1, 1) == ErrorCode.invalid_partitions
    assert code_of(admin.plan_partitions, snap, "nope", 3, 1) == ErrorCode.unknown_topic_or_partition
    deleting = snapshot(topics=[topic("t", [1])], deleting=["t"])
    assert code_of(admin.plan_partitions, deleting, "t", 3, 1) == ErrorCode.invalid_topic_exception


def test_more_than_ten_thousand_partitions_is_kafkas_policy_violation():
    """Checked first (even before the name), as Kafka's controller does; an increase alike."""
    for kw in (dict(name="bad name!", partitions=10_001), dict(name="t", assignments={p: (1,) for p in range(10_001)})):
        with pytest.raises(KafkaError) as e:
            create(snapshot(), **kw)
        assert (e.value.code, e.value.message) == (ErrorCode.policy_violation,
                                                    "Excessively large number of partitions per request.")
    assert code_of(lambda: create(snapshot(), ControllerConfig(num_partitions=10_001), name="t")) == ErrorCode.policy_violation
    assert len(create(snapshot(), name="t", partitions=10_000).states) == 10_000
    snap = snapshot(topics=[topic("t", [1, 2])])
    assert code_of(admin.plan_partitions, snap, "t", 10_003, 1) == ErrorCode.policy_violation


def test_incremental_alter_configs():
    snap = snapshot(topics=[topic("t", [1], {"retention.ms": "1000", "segment.bytes": "1048576"})])
    _, configs = admin.plan_configs(snap, "t", {"cleanup.policy": "compact"}, ["retention.ms"])
    assert configs == {"segment.bytes": "1048576", "cleanup.policy": "compact"}
    assert code_of(admin.plan_configs, snap, "t", {"segment.bytes": "x"}, []) == ErrorCode.invalid_config
    assert code_of(admin.plan_configs, snap, "t", {}, ["bogus"]) == ErrorCode.invalid_config
    # a Kafka 3.9 topic config Odradek does not serve: deleting it (MirrorMaker 2's config sync) is a no-op
    assert admin.plan_configs(snap, "t", {}, ["remote.log.delete.on.disable"])[1] == admin.plan_configs(snap, "t", {}, [])[1]
    assert code_of(admin.plan_configs, snap, "t", {"remote.log.copy.disable": "true"}, []) == ErrorCode.invalid_config
    # tiered storage: the request's keys are checked against the topic's others (its retention.ms of 1000)
    assert code_of(admin.plan_configs, snap, "t", {"remote.storage.enable": "true", "local.retention.ms": "5000"},
                   []) == ErrorCode.invalid_config
    assert code_of(admin.plan_configs, snap, "u", {}, []) == ErrorCode.unknown_topic_or_partition


def test_partition_changes_elect_and_skip_deletions():
    snap = snapshot(brokers=(2,), topics=[topic("a", [1, 2]), topic("b", [1])], deleting=["b"])
    changes = decisions.partition_changes(snap, ME.epoch)
    assert [(c.topic, c.state.partition, c.state.leader, c.state.leader_epoch, c.state.isr) for c in changes] \
        == [("a", 0, -1, 1, (1,))]
    assert changes[0].reason.startswith("a-0: leader 1 is offline")


def test_unclean_election_follows_the_topic_config():
    snap = snapshot(brokers=(2,), topics=[
        TopicRecord("u", "id", {0: (1, 2)}, 0, {0: PartitionState(0, (1, 2), 1, 0, (1,), 1)}, {0: 5},
                    {"unclean.leader.election.enable": "true"}, 0)])
    [change] = decisions.partition_changes(snap, ME.epoch)
    assert (change.state.leader, change.state.isr, change.version) == (2, (2,), 5)


def test_cluster_metadata_leaves_out_deleted_and_incomplete_topics():
    broken = TopicRecord("broken", "id", {0: (1,), 1: (1,)}, 0,
                         {0: PartitionState(0, (1,), 1, 0, (1,), 1)}, {0: 0})
    snap = snapshot(topics=[topic("a", [1]), topic("b", [1]), broken], deleting=["b"])
    md = decisions.cluster_metadata(snap, ME)
    assert [t.name for t in md.topics] == ["a"]
    assert (md.controller_id, md.controller_epoch, md.cluster_id) == ("c1", 3, "cid")


def test_still_controller_and_contention_reasons():
    assert decisions.still_controller(snapshot(), ME)[0]
    other = StoreSnapshot("cid", ControllerRecord("c2", 4, "u"), (), {}, frozenset())
    ok, why = decisions.still_controller(other, ME)
    assert not ok and "c2" in why
    assert decisions.should_contend(None, "c1")[0]
    assert not decisions.should_contend(ME, "c2")[0]
