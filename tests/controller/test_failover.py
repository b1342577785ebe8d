"""Controller failover with real processes: SIGKILL the active controller during topic creation,
resign on SIGTERM, and finish a pending deletion after a takeover."""

from __future__ import annotations

import json
import threading
import time
import uuid
import urllib.error

from kazoo.exceptions import NoNodeError

from odradek.cluster import control_plane as cp
from odradek.cluster import paths

T = cp.CREATE_TOPIC.path()
TAKEOVER_MARGIN_S = 20  # beyond the session timeout, on a noisy 2-core machine


def controller_in_zk(zk) -> dict | None:
    try:  # the ephemeral znode goes when the active controller's session ends: any time
        data = zk.get(paths.CONTROLLER)[0]
    except NoNodeError:
        return None
    return json.loads(data) if data else None


class CreationLoop(threading.Thread):
    """Creates topics one after another through whichever controller ``/controller`` names,
    retrying NOT_CONTROLLER and connection errors, until stopped (bounded in count)."""

    def __init__(self, zk, http, limit: int = 2000) -> None:
        super().__init__(daemon=True)
        self.zk = zk
        self.http = http
        self.limit = limit
        self.acknowledged: dict[str, str] = {}  # topic -> URL of the controller that answered
        self.errors: list[tuple[str, int, dict]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        for i in range(self.limit):
            name = f"t-{i:04d}"
            while not self.stop.is_set():
                ctrl = controller_in_zk(self.zk)
                if ctrl is None:
                    time.sleep(0.02)
                    continue
                try:
                    status, body = self.http("POST", ctrl["url"] + T, {"name": name, "partitions": 2}, 5)
                except (urllib.error.URLError, OSError):
                    time.sleep(0.02)
                    continue
                if status in (201, 409):  # 409: created before the answer was lost
                    self.acknowledged[name] = ctrl["url"]
                    break
                if status != 503:
                    self.errors.append((name, status, body))
                    break
                time.sleep(0.02)
            if self.stop.is_set():
                return

    def count_by(self, url: str) -> int:
        return sum(1 for u in list(self.acknowledged.values()) if u == url)


def assert_every_topic_complete(zk) -> list[str]:
    topics = sorted(zk.get_children(paths.TOPICS))
    assert sorted(zk.get_children(paths.CONFIG_TOPICS)) == topics, "config znodes without topics"
    for name in topics:
        body = json.loads(zk.get(paths.topic(name))[0])
        uuid.UUID(body["topic_id"])
        assignment = body["partitions"]
        assert sorted(assignment, key=int) == [str(p) for p in range(len(assignment))], name
        assert sorted(zk.get_children(paths.partitions(name)), key=int) == sorted(assignment, key=int), name
        for p, replicas in assignment.items():
            state = json.loads(zk.get(paths.partition_state(name, int(p)))[0])
            assert len(replicas) == 1 and state["leader"] in replicas + [-1], (name, p, state)
            assert state["isr"] == replicas, (name, p, state)
    return topics


def test_standby_takes_over_when_the_active_controller_is_killed(controllers, fake_brokers, zk, http,
                                                                 wait_for):
    fake_brokers(1)
    fake_brokers(2)
    a = controllers("a")
    assert a.wait_active()["epoch"] == 1
    b = controllers("b")
    assert not b.health()["active"]

    loop = CreationLoop(zk, http)
    loop.start()
    try:
        wait_for(lambda: loop.count_by(a.url) >= 15, 60, "topics created through controller a")
        a.kill()
        killed_at = time.monotonic()
        takeover = a.session_timeout + TAKEOVER_MARGIN_S
        health = b.wait_active(takeover)
        assert health["epoch"] == 2
        assert time.monotonic() - killed_at < takeover
        wait_for(lambda: loop.count_by(b.url) >= 15, 60, "topic creation to resume through controller b")
    finally:
        loop.stop.set()
        loop.join(30)
    assert not loop.errors, loop.errors[:5]

    assert controller_in_zk(zk) == {"id": "b", "epoch": 2, "url": b.url}
    assert json.loads(zk.get(paths.CONTROLLER_EPOCH)[0]) == 2
    in_zk = assert_every_topic_complete(zk)
    assert set(loop.acknowledged) <= set(in_zk)
    status, cluster = b.call("GET", cp.CLUSTER.path())
    assert status == 200 and cluster["controller_epoch"] == 2
    assert sorted(t["name"] for t in cluster["topics"]) == in_zk
    assert all(len(t["partitions"]) == 2 and all(p["leader"] in (1, 2) for p in t["partitions"])
               for t in cluster["topics"])


def test_sigterm_resigns_and_the_standby_takes_over_at_once(controllers, fake_brokers, zk, wait_for):
    fake_brokers(1)
    a = controllers("a")
    a.wait_active()
    b = controllers("b")
    assert a.stop() == 0
    assert "resigned as controller (epoch 1)" in a.log()
    # resignation deletes /controller: no wait for a session timeout
    assert b.wait_active(a.session_timeout)["epoch"] == 2
    assert b.call("POST", T, {"name": "after"})[0] == 201


def test_a_pending_deletion_is_finished_after_failover(controllers, fake_brokers, zk, wait_for):
    broker = fake_brokers(1)
    a = controllers("a")
    a.wait_active()
    assert a.call("POST", T, {"name": "doomed", "partitions": 3})[0] == 201
    assert a.call("POST", T, {"name": "kept"})[0] == 201
    a.kill()
    wait_for(lambda: controller_in_zk(zk) is None, a.session_timeout + TAKEOVER_MARGIN_S,
             "the dead controller's session to expire")
    zk.create(paths.delete_topic("doomed"), b'{"version":1}')  # deletion requested, never finished
    b = controllers("b")
    b.wait_active()
    wait_for(lambda: zk.exists(paths.topic("doomed")) is None, 15, "the deletion to be finished")
    assert zk.get_children(paths.DELETE_TOPICS) == []
    assert zk.exists(paths.topic_config("doomed")) is None
    snap = wait_for(lambda: (s := broker.latest()) and s["controller_epoch"] == 2 and s, 10, "a push from b")
    assert [t["name"] for t in snap["topics"]] == ["kept"]
