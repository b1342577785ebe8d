"""The controller's replication duties on a real controller process, a real ZooKeeper and
fake brokers: elections on broker death and return, unclean election, AlterPartition (every
error code, CAS), controlled shutdown, preferred elections, reassignment end to end."""

from __future__ import annotations

import json

import pytest

from odradek.cluster import control_plane as cp
from odradek.cluster import paths

T = cp.CREATE_TOPIC.path()
ALTER = cp.ALTER_PARTITION.path()
ELECT = cp.ELECT_LEADERS.path()
REASSIGN = cp.REASSIGN.path()


@pytest.fixture
def brokers(fake_brokers):
    return {i: fake_brokers(i) for i in (1, 2, 3)}


@pytest.fixture
def active(controllers, brokers):
    c = controllers("c1", "--no-auto-leader-rebalance")
    c.wait_active()
    return c


def zk_state(zk, topic: str, partition: int = 0) -> dict:
    data, stat = zk.get(paths.partition_state(topic, partition))
    return {**json.loads(data), "partition_epoch": stat.version}


def create(c, name: str, replicas: list[int], **configs) -> dict:
    status, body = c.call("POST", T, {"name": name, "assignments": {"0": replicas}, "configs": configs})
    assert status == 201, body
    return body["partitions"][0]


def alter(c, broker, topic: str, isr: list[int], zk, **overrides) -> tuple[int, dict]:
    """AlterPartition as the leader ``broker`` would send it, from the current state."""
    current = zk_state(zk, topic)
    body = {"broker_id": broker.id, "broker_epoch": broker.epoch, "topic": topic, "partition": 0,
            "leader_epoch": current["leader_epoch"], "partition_epoch": current["partition_epoch"],
            "isr": isr}
    body.update(overrides)
    return c.call("POST", ALTER, body)


def pushed(broker, topic: str, wait_for, **expected) -> dict:
    """Wait until ``broker``'s newest snapshot shows partition 0 of ``topic`` with ``expected``."""
    return wait_for(lambda: (p := broker.partition(topic, 0)) and all(p[k] == v for k, v in expected.items())
                    and p, 15, f"broker {broker.id} to see {topic}-0 with {expected}")


def error(answer: tuple[int, dict]) -> tuple[int, int]:
    return answer[0], answer[1]["error_code"]


def seen_live(c, broker, wait_for) -> None:
    """Wait until controller ``c`` sees ``broker``'s current registration. A returning follower
    fetches (and its leader may take it into the ISR) only after the controller's snapshot
    reached it; before, the controller answers the leader INELIGIBLE_REPLICA and the leader retries."""
    wait_for(lambda: any(b["id"] == broker.id and b["epoch"] == broker.epoch
                         for b in c.call("GET", cp.CLUSTER.path())[1]["brokers"]), 15,
             f"the controller to see broker {broker.id}'s new registration")


def test_broker_death_moves_leadership_to_the_first_live_isr_replica(active, brokers, zk, wait_for):
    create(active, "t", [1, 2, 3])
    pushed(brokers[3], "t", wait_for, leader=1, isr=[1, 2, 3], partition_epoch=0)
    brokers[1].leave()
    p = pushed(brokers[3], "t", wait_for, leader=2)
    assert (p["leader_epoch"], p["isr"], p["partition_epoch"]) == (1, [2, 3], 1)
    assert zk_state(zk, "t") == {"version": 1, "leader": 2, "leader_epoch": 1, "isr": [2, 3],
                                 "controller_epoch": 1, "partition_epoch": 1}
    # a follower's death only shrinks the ISR: the leader epoch stays
    brokers[3].leave()
    p = pushed(brokers[2], "t", wait_for, isr=[2])
    assert (p["leader"], p["leader_epoch"], p["partition_epoch"]) == (2, 1, 2)
    assert active.health()["under_replicated_partitions"] == 1
    assert active.call("GET", cp.CLUSTER.path())[1]["under_replicated_partitions"] == 1


def test_offline_when_no_isr_replica_lives_until_the_last_leader_returns(active, brokers, zk, wait_for):
    create(active, "t", [1, 2])
    assert alter(active, brokers[1], "t", [1], zk)[0] == 200  # 2 fell behind
    brokers[1].leave()
    p = pushed(brokers[2], "t", wait_for, leader=-1)
    assert (p["leader_epoch"], p["isr"]) == (1, [1])
    assert active.health()["offline_partitions"] == 1
    assert "offline: no live replica in the ISR" in active.log()
    brokers[1].join()
    p = pushed(brokers[1], "t", wait_for, leader=1)
    assert (p["leader_epoch"], p["isr"]) == (2, [1])


def test_unclean_election_elects_an_out_of_sync_replica_and_says_so(active, brokers, zk, wait_for):
    create(active, "u", [1, 2], **{"unclean.leader.election.enable": "true"})
    assert alter(active, brokers[1], "u", [1], zk)[0] == 200
    brokers[1].leave()
    p = pushed(brokers[2], "u", wait_for, leader=2)
    assert (p["leader_epoch"], p["isr"]) == (1, [2])
    assert "UNCLEAN election of replica 2" in active.log()
    # enabling the config on an offline partition elects at once
    brokers[1].join()
    seen_live(active, brokers[1], wait_for)
    create(active, "v", [1, 3])
    assert alter(active, brokers[1], "v", [1], zk)[0] == 200
    brokers[1].leave()
    pushed(brokers[3], "v", wait_for, leader=-1)
    assert active.call("PATCH", cp.ALTER_CONFIGS.path(name="v"),
                       {"set": {"unclean.leader.election.enable": True}})[0] == 200
    p = pushed(brokers[3], "v", wait_for, leader=3)
    assert p["isr"] == [3]


def test_alter_partition_error_codes_and_success_by_cas(active, brokers, zk, wait_for):
    create(active, "t", [1, 2, 3])
    b1 = brokers[1]
    status, state = alter(active, b1, "t", [1, 2], zk)
    assert status == 200, state
    assert state == {"partition": 0, "replicas": [1, 2, 3], "leader": 1, "leader_epoch": 0, "isr": [1, 2],
                     "controller_epoch": 1, "partition_epoch": 1}
    assert zk_state(zk, "t")["isr"] == [1, 2] and zk_state(zk, "t")["partition_epoch"] == 1
    pushed(brokers[3], "t", wait_for, isr=[1, 2], partition_epoch=1)
    # a retry whose answer was lost answers the current state
    assert alter(active, b1, "t", [1, 2], zk, partition_epoch=0) == (200, state)

    assert error(alter(active, b1, "t", [1], zk, partition_epoch=0)) == (409, 95)  # INVALID_UPDATE_VERSION
    assert error(alter(active, b1, "t", [1], zk, leader_epoch=-1)) == (409, 74)  # FENCED_LEADER_EPOCH
    assert error(alter(active, brokers[2], "t", [2], zk)) == (409, 6)  # NOT_LEADER_OR_FOLLOWER
    assert error(active.call("POST", ALTER, {**_body(b1, zk), "topic": "nope"})) == (404, 3)
    assert error(active.call("POST", ALTER, {**_body(b1, zk), "partition": 7})) == (404, 3)
    assert error(alter(active, b1, "t", [2, 3], zk)) == (400, 107)  # INELIGIBLE_REPLICA: no leader
    assert error(alter(active, b1, "t", [1, 2, 4], zk)) == (400, 107)  # not a replica
    assert error(alter(active, b1, "t", [1], zk, broker_epoch=b1.epoch + 1000)) == (409, 77)  # STALE_BROKER_EPOCH
    assert error(active.call("POST", ALTER, {"broker_id": 1})) == (400, 42)
    brokers[3].leave()
    wait_for(lambda: 3 not in [b["id"] for b in brokers[2].latest()["brokers"]], 15, "broker 3 gone")
    assert error(alter(active, b1, "t", [1, 2, 3], zk)) == (400, 107)  # not live
    brokers[3].join()
    seen_live(active, brokers[3], wait_for)
    status, state = alter(active, b1, "t", [1, 2, 3], zk)
    assert status == 200 and state["isr"] == [1, 2, 3] and state["partition_epoch"] == 2

    # the write is a CAS on the znode version: a change behind the controller's back fails it
    data, stat = zk.get(paths.partition_state("t", 0))
    zk.set(paths.partition_state("t", 0), data, version=stat.version)
    assert error(alter(active, b1, "t", [1, 2], zk, partition_epoch=2)) == (409, 95)
    status, state = alter(active, b1, "t", [1, 2], zk)  # with the version just read: accepted
    assert status == 200 and state["partition_epoch"] == 4 and zk_state(zk, "t")["isr"] == [1, 2]


def test_a_topic_written_into_zookeeper_by_a_tool_is_led_and_pushed(active, brokers, zk, wait_for):
    """The controller's own creations do not make it reload every topic (it knows them); a topic
    another writer puts into ZooKeeper (its znodes complete) still reaches every broker."""
    create(active, "ours", [1, 2])
    zk.create(paths.topic_config("theirs"), b'{"version":1,"config":{}}', makepath=True)
    t = zk.transaction()
    t.create(paths.topic("theirs"), json.dumps({"version": 1, "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ",
                                                "partitions": {"0": [2, 3]}}).encode())
    t.create(paths.partitions("theirs"), b"")
    t.create(paths.partition_state("theirs", 0).rsplit("/", 1)[0], b"")
    t.create(paths.partition_state("theirs", 0), json.dumps(
        {"version": 1, "leader": 2, "leader_epoch": 0, "isr": [2, 3], "controller_epoch": 1}).encode())
    assert all(r is True or isinstance(r, str) for r in t.commit())
    # by the watch: well within the full reload's interval (controller.resync.interval.ms, 60 s)
    wait_for(lambda: (p := brokers[1].partition("theirs", 0)) and p["leader"] == 2, 20, "broker 1 to see theirs")
    zk.delete(paths.topic("theirs"), recursive=True)  # and one that goes
    wait_for(lambda: "theirs" not in {t["name"] for t in brokers[1].latest()["topics"]}, 20, "theirs gone")


def test_alter_partitions_answers_each_partition_of_one_request(active, brokers, zk, wait_for):
    """A leader's batched request: every partition decided on its own, as Kafka's AlterPartition."""
    b1 = brokers[1]
    for name in ("x", "y", "z"):
        create(active, name, [1, 2, 3])
    entry = {"partition": 0, "leader_epoch": 0, "partition_epoch": 0}
    status, body = active.call("POST", cp.ALTER_PARTITIONS.path(), {
        "broker_id": 1, "broker_epoch": b1.epoch,
        "partitions": [{**entry, "topic": "x", "isr": [1, 2]},
                       {**entry, "topic": "y", "isr": [1, 3], "leader_epoch": 5},
                       {**entry, "topic": "z", "isr": [1, 2, 4]},
                       {**entry, "topic": "nope", "isr": [1]}]})
    assert status == 200, body
    assert [(r["topic"], r["error_code"]) for r in body["results"]] == [("x", 0), ("y", 74), ("z", 107), ("nope", 3)]
    assert body["results"][0]["state"]["isr"] == [1, 2] and body["results"][1]["state"] is None
    assert zk_state(zk, "x")["isr"] == [1, 2] and zk_state(zk, "y")["isr"] == zk_state(zk, "z")["isr"] == [1, 2, 3]
    pushed(brokers[3], "x", wait_for, isr=[1, 2], partition_epoch=1)

    too_many = [{**entry, "topic": "x", "isr": [1]}] * (cp.MAX_ALTER_PARTITIONS + 1)
    for bad in ({"broker_id": 1, "partitions": too_many}, {"broker_id": 1, "partitions": [7]}, {"broker_id": 1}):
        assert error(active.call("POST", cp.ALTER_PARTITIONS.path(), bad)) == (400, 42)
    status, body = active.call("POST", cp.ALTER_PARTITIONS.path(), {  # a stale broker epoch: every partition
        "broker_id": 1, "broker_epoch": b1.epoch + 1000, "partitions": [{**entry, "topic": "y", "isr": [1, 3]}]})
    assert status == 200 and [r["error_code"] for r in body["results"]] == [77]


def _body(broker, zk) -> dict:
    current = zk_state(zk, "t")
    return {"broker_id": broker.id, "broker_epoch": broker.epoch, "topic": "t", "partition": 0,
            "leader_epoch": current["leader_epoch"], "partition_epoch": current["partition_epoch"],
            "isr": current["isr"]}


def test_controlled_shutdown_moves_leaderships_and_answers_the_remaining(active, brokers, zk, wait_for):
    b1 = brokers[1]
    create(active, "a", [1, 2])  # led by 1: moves to 2
    create(active, "b", [2, 1])  # 1 follows: leaves the ISR
    create(active, "c", [1, 3])
    assert alter(active, b1, "c", [1], zk)[0] == 200  # nobody else in the ISR: 1 keeps it
    create(active, "solo", [1])  # one replica: not counted
    path = cp.CONTROLLED_SHUTDOWN.path(id=1)
    assert error(active.call("POST", path, {"broker_epoch": b1.epoch + 1000})) == (409, 77)
    assert error(active.call("POST", cp.CONTROLLED_SHUTDOWN.path(id=9), {})) == (404, 8)

    assert active.call("POST", path, {"broker_epoch": b1.epoch}) == (
        200, {"remaining_leaderships": [{"topic": "c", "partition": 0}]})
    assert (zk_state(zk, "a")["leader"], zk_state(zk, "a")["leader_epoch"], zk_state(zk, "a")["isr"]) == (2, 1, [2])
    assert (zk_state(zk, "b")["leader"], zk_state(zk, "b")["leader_epoch"], zk_state(zk, "b")["isr"]) == (2, 0, [2])
    pushed(brokers[2], "a", wait_for, leader=2, leader_epoch=1)
    assert active.health()["shutting_down_brokers"] == [1]
    # a broker shutting down cannot rejoin an ISR...
    assert error(alter(active, brokers[2], "a", [2, 1], zk)) == (400, 107)
    # ...but, still leading c, it can take 3 back in, and the retry moves c away
    assert alter(active, b1, "c", [1, 3], zk)[0] == 200
    assert active.call("POST", path, {"broker_epoch": b1.epoch}) == (200, {"remaining_leaderships": []})
    assert (zk_state(zk, "c")["leader"], zk_state(zk, "c")["isr"]) == (3, [3])
    # a new registration (the broker restarted) is not shutting down any more
    b1.leave()
    b1.join()
    seen_live(active, b1, wait_for)
    wait_for(lambda: active.health()["shutting_down_brokers"] == [], 15, "the shutdown mark to go")
    assert alter(active, brokers[2], "a", [2, 1], zk)[0] == 200


def test_preferred_election_after_the_preferred_replica_returns(active, brokers, zk, wait_for):
    create(active, "t", [1, 2])
    brokers[1].leave()
    pushed(brokers[2], "t", wait_for, leader=2, leader_epoch=1)
    brokers[1].join()
    seen_live(active, brokers[1], wait_for)  # else: "preferred replica 1 is not live ..."
    req = {"election_type": 0, "partitions": [{"topic": "t", "partition": 0}, {"topic": "x", "partition": 0}]}
    assert active.call("POST", ELECT, req)[1]["results"] == [
        {"topic": "t", "partition": 0, "error_code": 80, "error": "PREFERRED_LEADER_NOT_AVAILABLE",
         "message": "Failed to elect leader for partition t-0 under strategy "
                    "PreferredReplicaPartitionLeaderElectionStrategy: preferred replica 1 is not in the ISR."},
        {"topic": "x", "partition": 0, "error_code": 3, "error": "UNKNOWN_TOPIC_OR_PARTITION",
         "message": "This server does not host this topic-partition: x-0"}]
    assert alter(active, brokers[2], "t", [2, 1], zk)[0] == 200  # 1 caught up
    status, body = active.call("POST", ELECT, req)
    assert status == 200 and body["results"][0]["error_code"] == 0
    assert (zk_state(zk, "t")["leader"], zk_state(zk, "t")["leader_epoch"], zk_state(zk, "t")["isr"]) == (1, 2, [2, 1])
    pushed(brokers[2], "t", wait_for, leader=1, leader_epoch=2)
    assert active.call("POST", ELECT, req)[1]["results"][0]["error_code"] == 84  # ELECTION_NOT_NEEDED
    assert active.call("POST", ELECT, {"election_type": 0, "partitions": None}) == (200, {"results": []})
    assert active.call("POST", ELECT, {"election_type": 1, "partitions": None}) == (200, {"results": []})
    assert error(active.call("POST", ELECT, {"election_type": 5})) == (400, 42)


def test_unclean_election_on_request(active, brokers, zk, wait_for):
    create(active, "t", [1, 2])
    assert alter(active, brokers[1], "t", [1], zk)[0] == 200
    brokers[1].leave()
    pushed(brokers[2], "t", wait_for, leader=-1)
    assert active.call("POST", ELECT, {"election_type": 0, "partitions": None})[1]["results"][0]["error_code"] == 80
    [result] = active.call("POST", ELECT, {"election_type": 1, "partitions": None})[1]["results"]
    assert (result["topic"], result["error_code"]) == ("t", 0)
    assert (zk_state(zk, "t")["leader"], zk_state(zk, "t")["isr"], zk_state(zk, "t")["leader_epoch"]) == (2, [2], 2)
    brokers[2].leave()
    pushed(brokers[3], "t", wait_for, leader=-1)
    [result] = active.call("POST", ELECT, {"election_type": 1, "partitions": [{"topic": "t", "partition": 0}]}
                           )[1]["results"]
    assert result["error_code"] == 83  # ELIGIBLE_LEADERS_NOT_AVAILABLE


def test_automatic_preferred_leader_rebalance(controllers, brokers, zk, wait_for):
    c = controllers("c1", "--leader-imbalance-check-interval-seconds", "0.5")
    c.wait_active()
    create(c, "t", [1, 2])
    brokers[1].leave()
    pushed(brokers[2], "t", wait_for, leader=2)
    brokers[1].join()
    seen_live(c, brokers[1], wait_for)
    status, body = alter(c, brokers[2], "t", [2, 1], zk)
    assert status == 200, body
    pushed(brokers[1], "t", wait_for, leader=1, leader_epoch=2)
    assert "auto leader rebalance: preferred election for t-0" in c.log()


def test_reassignment_end_to_end(active, brokers, zk, wait_for):
    create(active, "r", [1, 2])
    status, body = active.call("POST", REASSIGN, {"reassignments": [
        {"topic": "r", "partition": 0, "replicas": [2, 3]},
        {"topic": "r", "partition": 1, "replicas": [1]},
        {"topic": "nope", "partition": 0, "replicas": [1]}]})
    assert status == 200
    assert [(r["partition"], r["error_code"]) for r in body["results"]] == [(0, 0), (1, 3), (0, 3)]
    assert json.loads(zk.get(paths.REASSIGN_PARTITIONS)[0]) == {
        "version": 1, "partitions": [{"topic": "r", "partition": 0, "replicas": [2, 3]}]}
    topic = json.loads(zk.get(paths.topic("r"))[0])
    assert (topic["partitions"], topic["adding_replicas"], topic["removing_replicas"]) == (
        {"0": [2, 3, 1]}, {"0": [3]}, {"0": [1]})
    assert active.call("GET", REASSIGN) == (200, {"reassignments": [
        {"topic": "r", "partition": 0, "replicas": [2, 3, 1], "adding_replicas": [3], "removing_replicas": [1]}]})
    # the new replica learns it hosts the partition; the leader is unchanged
    p = pushed(brokers[3], "r", wait_for, replicas=[2, 3, 1])
    assert (p["leader"], p["leader_epoch"], p["isr"], p["partition_epoch"]) == (1, 0, [1, 2], 1)
    # broker 3 caught up: the leader takes it into the ISR, and the reassignment completes
    status, state = alter(active, brokers[1], "r", [1, 2, 3], zk)
    assert status == 200, state
    assert (state["replicas"], state["leader"], state["leader_epoch"], state["isr"]) == ([2, 3], 2, 1, [2, 3])
    assert zk.exists(paths.REASSIGN_PARTITIONS) is None
    assert json.loads(zk.get(paths.topic("r"))[0])["partitions"] == {"0": [2, 3]}
    assert "adding_replicas" not in json.loads(zk.get(paths.topic("r"))[0])
    assert active.call("GET", REASSIGN) == (200, {"reassignments": []})
    pushed(brokers[1], "r", wait_for, replicas=[2, 3], leader=2)
    # errors
    for replicas, expected in (([2, 2], 39), ([2, 9], 39), ([], 39), (None, 85)):
        status, body = active.call("POST", REASSIGN, {"reassignments": [
            {"topic": "r", "partition": 0, "replicas": replicas}]})
        assert (status, body["results"][0]["error_code"]) == (200, expected), replicas
    assert error(active.call("POST", REASSIGN, {"reassignments": [{"topic": "r", "partition": 0}]})) == (400, 42)


def test_reassignment_cancel_reverts(active, brokers, zk, wait_for):
    create(active, "r", [1, 2])
    active.call("POST", REASSIGN, {"reassignments": [{"topic": "r", "partition": 0, "replicas": [1, 3]}]})
    pushed(brokers[3], "r", wait_for, replicas=[1, 3, 2])
    status, body = active.call("POST", REASSIGN, {"reassignments": [{"topic": "r", "partition": 0, "replicas": None}]})
    assert (status, body["results"][0]["error_code"]) == (200, 0)
    assert json.loads(zk.get(paths.topic("r"))[0])["partitions"] == {"0": [1, 2]}
    assert zk.exists(paths.REASSIGN_PARTITIONS) is None
    p = pushed(brokers[3], "r", wait_for, replicas=[1, 2])
    assert (p["leader"], p["isr"]) == (1, [1, 2])


def test_a_reassignment_written_to_the_znode_by_another_tool_is_picked_up(active, brokers, zk, wait_for):
    create(active, "r", [1, 2])
    zk.create(paths.REASSIGN_PARTITIONS, json.dumps(
        {"version": 1, "partitions": [{"topic": "r", "partition": 0, "replicas": [3, 2]},
                                      {"topic": "gone", "partition": 0, "replicas": [1]}]}).encode())
    wait_for(lambda: json.loads(zk.get(paths.topic("r"))[0]).get("adding_replicas") == {"0": [3]}, 15,
             "the reassignment to start")
    wait_for(lambda: json.loads(zk.get(paths.REASSIGN_PARTITIONS)[0])["partitions"] == [
        {"topic": "r", "partition": 0, "replicas": [3, 2]}], 15, "the invalid entry to be dropped")
    assert alter(active, brokers[1], "r", [1, 2, 3], zk)[0] == 200
    assert json.loads(zk.get(paths.topic("r"))[0])["partitions"] == {"0": [3, 2]}
    assert zk_state(zk, "r")["leader"] == 3 and zk.exists(paths.REASSIGN_PARTITIONS) is None
