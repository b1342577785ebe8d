"""The controller's internal HTTP API, on a real controller process and a real ZooKeeper."""

from __future__ import annotations

import json

import pytest

from odradek.cluster import control_plane as cp
from odradek.cluster import paths

T = cp.CREATE_TOPIC.path()


@pytest.fixture
def active(controllers, fake_brokers, zk):
    fake_brokers(1)
    fake_brokers(2)
    c = controllers("c1", "--default-partitions", "2")
    c.wait_active()
    return c


def error(answer: tuple[int, dict]) -> tuple[int, int, str]:
    status, body = answer
    return status, body["error_code"], body["error"]


def test_create_describe_increase_alter_delete(active, zk, wait_for):
    status, topic = active.call("POST", T, {"name": "orders", "partitions": -1, "replication_factor": -1,
                                            "configs": {"retention.ms": "60000"}})
    assert status == 201, topic
    assert [p["partition"] for p in topic["partitions"]] == [0, 1]  # --default-partitions 2
    assert {p["leader"] for p in topic["partitions"]} == {1, 2}
    assert topic["configs"] == {"retention.ms": "60000"}

    status, cluster = active.call("GET", cp.CLUSTER.path())
    assert status == 200 and cluster["controller_id"] == "c1" and cluster["controller_epoch"] == 1
    assert [b["id"] for b in cluster["brokers"]] == [1, 2]
    assert [t["name"] for t in cluster["topics"]] == ["orders"]

    status, grown = active.call("POST", cp.CREATE_PARTITIONS.path(name="orders"), {"count": 5})
    assert status == 200 and [p["partition"] for p in grown["partitions"]] == [0, 1, 2, 3, 4]
    assert sorted(json.loads(zk.get(paths.topic("orders"))[0])["partitions"]) == ["0", "1", "2", "3", "4"]

    status, body = active.call("PATCH", cp.ALTER_CONFIGS.path(name="orders"),
                               {"set": {"cleanup.policy": "compact"}, "delete": ["retention.ms"]})
    assert (status, body) == (200, {"configs": {"cleanup.policy": "compact"}})
    assert json.loads(zk.get(paths.topic_config("orders"))[0])["config"] == {"cleanup.policy": "compact"}

    assert active.call("DELETE", cp.DELETE_TOPIC.path(name="orders")) == (200, {"name": "orders"})
    assert zk.exists(paths.topic("orders")) is None
    assert zk.get_children(paths.DELETE_TOPICS) == []
    assert active.call("GET", cp.CLUSTER.path())[1]["topics"] == []


def test_validate_only_writes_nothing(active, zk):
    status, topic = active.call("POST", T, {"name": "dry", "partitions": 3, "validate_only": True})
    assert status == 200 and len(topic["partitions"]) == 3
    assert zk.exists(paths.topic("dry")) is None


@pytest.mark.parametrize("body, expected", [
    ({"name": "dup"}, (409, 36, "TOPIC_ALREADY_EXISTS")),
    ({"name": "t", "partitions": 0}, (400, 37, "INVALID_PARTITIONS")),
    ({"name": "t", "replication_factor": 0}, (400, 38, "INVALID_REPLICATION_FACTOR")),
    ({"name": "t", "replication_factor": 3}, (400, 38, "INVALID_REPLICATION_FACTOR")),
    ({"name": "bad name"}, (400, 17, "INVALID_TOPIC_EXCEPTION")),
    ({"name": "x" * 250}, (400, 17, "INVALID_TOPIC_EXCEPTION")),
    ({"name": ".."}, (400, 17, "INVALID_TOPIC_EXCEPTION")),
    ({"name": "t", "configs": {"retention.ms": "forever"}}, (400, 40, "INVALID_CONFIG")),
    ({"name": "t", "configs": {"not.a.config": "1"}}, (400, 40, "INVALID_CONFIG")),
    ({"partitions": 1}, (400, 42, "INVALID_REQUEST")),
    ({"name": "t", "partitions": "two"}, (400, 42, "INVALID_REQUEST")),
    ({"name": "t", "assignments": {"0": ["one"]}}, (400, 42, "INVALID_REQUEST")),
])
def test_create_errors(active, body, expected):
    assert active.call("POST", T, {"name": "dup"})[0] == 201
    assert error(active.call("POST", T, body)) == expected


def test_replication_factor_up_to_the_live_brokers(active, zk):
    status, topic = active.call("POST", T, {"name": "r", "partitions": 2, "replication_factor": 2})
    assert status == 201, topic
    for p in topic["partitions"]:
        assert sorted(p["replicas"]) == [1, 2] and p["isr"] == p["replicas"] and p["leader"] == p["replicas"][0]
        assert (p["leader_epoch"], p["partition_epoch"]) == (0, 0)
    state = json.loads(zk.get(paths.partition_state("r", 0))[0])
    assert state["isr"] == topic["partitions"][0]["replicas"]
    status, body = active.call("POST", T, {"name": "r3", "partitions": 1, "replication_factor": 3})
    assert (status, body["error_code"], body["message"]) == (
        400, 38, "Replication factor: 3 larger than available brokers: 2.")
    status, body = active.call("POST", T, {"name": "ra", "assignments": {"0": [2, 1]}})
    assert status == 201 and body["partitions"][0]["leader"] == 2 and body["partitions"][0]["isr"] == [2, 1]


def test_malformed_bodies_are_invalid_request(active):
    for path, method in ((T, "POST"), (cp.CREATE_PARTITIONS.path(name="t"), "POST"),
                         (cp.ALTER_CONFIGS.path(name="t"), "PATCH")):
        status, body = active.call(method, path, [1, 2])
        assert (status, body["error"]) == (400, "INVALID_REQUEST"), path
    grow, alter = cp.CREATE_PARTITIONS.path(name="t"), cp.ALTER_CONFIGS.path(name="t")
    assert error(active.call("POST", grow, {"count": "3"})) == (400, 42, "INVALID_REQUEST")
    assert error(active.call("PATCH", alter, {"delete": [3]})) == (400, 42, "INVALID_REQUEST")


def test_errors_on_existing_and_missing_topics(active):
    assert active.call("POST", T, {"name": "t", "partitions": 2})[0] == 201
    grow, alter = cp.CREATE_PARTITIONS.path(name="t"), cp.ALTER_CONFIGS.path(name="t")
    assert error(active.call("POST", grow, {"count": 2})) == (400, 37, "INVALID_PARTITIONS")
    assert error(active.call("POST", grow, {"count": 1})) == (400, 37, "INVALID_PARTITIONS")
    assert error(active.call("PATCH", alter, {"set": {"segment.bytes": "1"}})) \
        == (400, 40, "INVALID_CONFIG")
    for method, path, body in (("POST", cp.CREATE_PARTITIONS.path(name="nope"), {"count": 3}),
                               ("PATCH", cp.ALTER_CONFIGS.path(name="nope"), {"set": {}}),
                               ("DELETE", cp.DELETE_TOPIC.path(name="nope"), None)):
        assert error(active.call(method, path, body)) == (404, 3, "UNKNOWN_TOPIC_OR_PARTITION")


def test_no_live_broker_is_invalid_replication_factor(controllers):
    c = controllers("lonely")
    c.wait_active()
    status, body = c.call("POST", T, {"name": "t"})
    assert (status, body["error_code"]) == (400, 38)
    assert body["message"] == "Replication factor: 1 larger than available brokers: 0."


def test_standby_answers_not_controller(active, controllers):
    standby = controllers("c2")
    assert standby.health() == {"id": "c2", "url": standby.url, "active": False, "epoch": None,
                                "under_replicated_partitions": None, "offline_partitions": None,
                                "shutting_down_brokers": None}
    for method, path, body in (("GET", cp.CLUSTER.path(), None), ("POST", T, {"name": "s"}),
                               ("POST", cp.ALTER_PARTITION.path(),
                                {"broker_id": 1, "broker_epoch": -1, "topic": "s", "partition": 0,
                                 "leader_epoch": 0, "partition_epoch": 0, "isr": [1]}),
                               ("POST", cp.ALTER_PARTITIONS.path(), {"broker_id": 1, "partitions": []}),
                               ("POST", cp.CONTROLLED_SHUTDOWN.path(id=1), {}),
                               ("POST", cp.ELECT_LEADERS.path(), {"election_type": 0}),
                               ("POST", cp.REASSIGN.path(), {"reassignments": []}),
                               ("GET", cp.LIST_REASSIGNMENTS.path(), None),
                               ("DELETE", cp.DELETE_TOPIC.path(name="s"), None),
                               ("POST", cp.CREATE_PARTITIONS.path(name="s"), {"count": 2}),
                               ("PATCH", cp.ALTER_CONFIGS.path(name="s"), {"set": {}})):
        assert error(standby.call(method, path, body)) == (503, 41, "NOT_CONTROLLER"), (method, path)
    assert active.call("POST", T, {"name": "s"})[0] == 201
