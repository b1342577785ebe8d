"""The controller's rebalance routes (control_plane_rebalance) on a real controller and
ZooKeeper, with registered fake brokers (they never fetch, so a started move stays running):
proposal, a stale proposal refused, execution with its throttle written and its state in
ZooKeeper, a second execution refused, stop cancelling the moves and removing the throttle."""

from __future__ import annotations

import json

import pytest

from odradek.cluster import control_plane as cp
from odradek.cluster import control_plane_rebalance as cpr
from odradek.cluster import paths

RATES = {"leader.replication.throttled.rate": "1000", "follower.replication.throttled.rate": "1000"}


@pytest.fixture
def active(controllers, fake_brokers, zk):
    for b in (1, 2, 3):
        fake_brokers(b)
    c = controllers("c1")
    c.wait_active()
    status, _ = c.call("POST", cp.CREATE_TOPIC.path(), {"name": "t", "partitions": -1, "replication_factor": -1,
                                                         "assignments": {"0": [1], "1": [1], "2": [1], "3": [2]}})
    assert status == 201
    return c


def _config(zk, path):
    found = zk.exists(path) and zk.get(path)
    return json.loads(found[0])["config"] if found else {}


def test_propose_execute_stop(active, zk, wait_for):
    assert active.call("GET", cpr.STATUS.path()) == (200, cpr.RebalanceStatus().to_json())
    status, proposal = active.call("POST", cpr.PROPOSALS.path(), {"mode": "add-brokers", "brokers": [3]})
    assert status == 200 and proposal["moves"] and all(m["after"] == [3] for m in proposal["moves"])
    assert {b["id"]: b["after"]["replicas"] for b in proposal["brokers"]}[3] == len(proposal["moves"])

    stale = [{**proposal["moves"][0], "before": [2]}]
    status, body = active.call("POST", cpr.EXECUTE.path(), {"proposal_id": proposal["id"], "moves": stale})
    assert (status, body["error"]) == (400, "INVALID_REPLICA_ASSIGNMENT")

    body = {"proposal_id": proposal["id"], "moves": proposal["moves"], "throttle_bytes_per_s": 1000,
            "concurrency": 1}
    status, running = active.call("POST", cpr.EXECUTE.path(), body)
    assert status == 202 and running["state"] == "executing" and running["id"] == proposal["id"]
    assert json.loads(zk.get(paths.REBALANCE)[0])["execution"]["id"] == proposal["id"]
    wait_for(lambda: active.call("GET", cpr.STATUS.path())[1]["moves_in_progress"] == 1, 30, "a move to start")
    assert _config(zk, paths.entity_config("brokers", "3")) == RATES
    follow = _config(zk, paths.topic_config("t"))["follower.replication.throttled.replicas"].split(",")
    assert sorted(follow) == sorted(f"{m['partition']}:3" for m in proposal["moves"])
    status, body = active.call("POST", cpr.EXECUTE.path(), body)
    assert (status, body["error"]) == (409, "REASSIGNMENT_IN_PROGRESS")

    status, stopping = active.call("DELETE", cpr.STOP.path())
    assert status == 200 and stopping["state"] in ("stopping", "stopped")
    wait_for(lambda: active.call("GET", cpr.STATUS.path())[1]["state"] == "stopped", 30, "the stop")
    assert active.call("GET", cp.LIST_REASSIGNMENTS.path())[1] == {"reassignments": []}
    assert _config(zk, paths.entity_config("brokers", "3")) == {}
    assert "follower.replication.throttled.replicas" not in _config(zk, paths.topic_config("t"))
    assert active.call("DELETE", cpr.STOP.path())[1]["state"] == "stopped"   # idempotent


def test_proposal_errors(active):
    status, body = active.call("POST", cpr.PROPOSALS.path(), {"mode": "remove-brokers", "brokers": [9]})
    assert (status, body["error"]) == (404, "BROKER_NOT_AVAILABLE")
    status, body = active.call("POST", cpr.PROPOSALS.path(), {"replication_factors": {"t": 4}})
    assert (status, body["error"]) == (400, "INVALID_REPLICATION_FACTOR")
    status, body = active.call("POST", cpr.PROPOSALS.path(), {"mode": "sideways"})
    assert (status, body["error"]) == (400, "INVALID_REQUEST")
