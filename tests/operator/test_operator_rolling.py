"""Rolling restarts and scale-down decisions (pure)."""

from __future__ import annotations

import datetime

from odradek.operator.revisions import Revision
from odradek.operator.rolling import (PodView, dependency_rolling, plan_roll, plan_scale, scale_down_blockers,
                                     zookeeper_settle_s)


def pods(*specs):
    return [PodView(f"c-brokers-{i}", i, h, r) for i, (h, r) in enumerate(specs)]


def test_nothing_to_do_when_every_pod_has_the_hash():
    assert plan_roll(pods(("new", True), ("new", False)), "new", 2, None).done


def test_highest_ordinal_first_one_at_a_time():
    step = plan_roll(pods(("old", True), ("old", True), ("old", True)), "new", 3, 0)
    assert step.action == "restart" and step.pod == "c-brokers-2"
    assert step.pending == ("c-brokers-2", "c-brokers-1", "c-brokers-0")


def test_waits_for_readiness_and_in_sync_replicas():
    step = plan_roll(pods(("old", True), ("new", False)), "new", 2, 0)
    assert step.action == "wait" and "c-brokers-1" in step.reason
    step = plan_roll(pods(("old", True), ("new", True)), "new", 2, 4)
    assert step.action == "wait" and "4 partitions are under-replicated" in step.reason
    step = plan_roll(pods(("old", True), ("new", True)), "new", 2, None)
    assert step.action == "wait" and "controller" in step.reason
    assert plan_roll(pods(("old", True), ("new", True)), "new", 2, 0).pod == "c-brokers-0"


def test_waits_for_missing_and_terminating_pods():
    assert plan_roll(pods(("old", True)), "new", 2, 0).action == "wait"
    terminating = [PodView("c-brokers-0", 0, "old", True, deleting=True), PodView("c-brokers-1", 1, "old", True)]
    assert "terminating" in plan_roll(terminating, "new", 2, 0).reason


def test_pod_view_from_pod():
    pod = {"metadata": {"name": "c-brokers-3", "labels": {"apps.kubernetes.io/pod-index": "3"},
                        "annotations": {"odradek.dev/config-hash": "abc"}},
           "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert PodView.from_pod(pod) == PodView("c-brokers-3", 3, "abc", True, False)
    bare = {"metadata": {"name": "c-brokers-1", "deletionTimestamp": "now"}}
    assert PodView.from_pod(bare) == PodView("c-brokers-1", 1, None, False, True)


TEMPLATE = {"metadata": {"annotations": {"odradek.dev/certificates-hash": "new", "odradek.dev/config-hash": "z"}}}


def pod(name, certificates, ready=True, deleting=False, phase="Running", since=None):
    meta = {"name": name, "annotations": {"odradek.dev/certificates-hash": certificates, "odradek.dev/config-hash": "z",
                                          "kubectl.kubernetes.io/restartedAt": "t"}}
    if deleting:
        meta["deletionTimestamp"] = "now"
    condition = {"type": "Ready", "status": str(ready)}
    if since:
        condition["lastTransitionTime"] = since
    return {"metadata": meta, "status": {"phase": phase, "conditions": [condition]}}


def test_a_renewal_restarts_no_broker_while_zookeeper_or_the_controller_rolls():
    """CI's e2e renewal: the new certificates changed ZooKeeper's, the controller's and every
    broker's template in one reconcile; once the controller answered again every broker was
    Ready with no under-replicated partition, so a broker was restarted while ZooKeeper's
    restart could still cost another broker its session, and two were down at once. The
    brokers' roll now waits for theirs (the decision: ``dependencies``)."""
    zookeeper = dependency_rolling("ZooKeeper", TEMPLATE, 1, [pod("c-zookeeper-0", "old")], need_ready=True)
    assert zookeeper == "waiting for ZooKeeper to roll first: c-zookeeper-0 on its previous template"
    step = plan_roll(pods(("old", True), ("old", True), ("old", True)), "new", 3, 0, {}, dependencies=zookeeper)
    assert step.action == "wait" and step.reason == zookeeper and step.pod is None
    assert step.pending == ("c-brokers-2", "c-brokers-1", "c-brokers-0")
    assert plan_roll(pods(("new", True), ("new", True)), "new", 2, None, dependencies=zookeeper).done
    assert plan_roll(pods(("old", True), ("old", True)), "new", 2, 0, dependencies=None).pod == "c-brokers-1"


def test_a_dependency_has_rolled_once_no_pod_of_an_older_template_is_left():
    def zookeeper(*listed):
        return dependency_rolling("ZooKeeper", TEMPLATE, 1, listed, need_ready=True)

    def controller(*listed):
        return dependency_rolling("the controller", TEMPLATE, 1, listed, need_ready=False)
    assert "c-zookeeper-0 on its previous template" in zookeeper(pod("c-zookeeper-0", "old", deleting=True))
    assert zookeeper() == "waiting for ZooKeeper to roll first: 0/1 pods of its new template ready"   # recreated next
    assert "0/1" in zookeeper(pod("c-zookeeper-0", "new", ready=False))
    assert "0/1" in zookeeper(pod("c-zookeeper-0", "new", deleting=True))
    assert zookeeper(pod("c-zookeeper-0", "new")) is None
    # Ready for the brokers' session timeout (and two ticks): a session its restart cost has expired
    now = datetime.datetime(2026, 11, 30, 3, 2, 30, tzinfo=datetime.timezone.utc)
    settle = zookeeper_settle_s({}, 2000)
    assert settle == 22 and zookeeper_settle_s({"zookeeper.session.timeout.ms": "6000"}, 2000) == 10
    assert dependency_rolling("ZooKeeper", TEMPLATE, 1, [pod("c-zookeeper-0", "new", since="2026-11-30T03:02:10Z")],
                              True, settle, now) == ("waiting for ZooKeeper to settle: c-zookeeper-0 Ready for 20 of 22 s "
                                                     "(the brokers' sessions it restored expire meanwhile if not back)")
    assert dependency_rolling("ZooKeeper", TEMPLATE, 1, [pod("c-zookeeper-0", "new", since="2026-11-30T03:02:08Z")],
                              True, settle, now) is None
    # the controller's Deployment surges: the new pod first, the old one goes once it is ready
    assert "c-controller-a on its previous template" in controller(pod("c-controller-a", "old"),
                                                                  pod("c-controller-b", "new", ready=False))
    assert controller(pod("c-controller-b", "new", ready=False)) is None   # the operator asks the active one
    assert controller(pod("c-controller-a", "old", phase="Failed"), pod("c-controller-b", "new")) is None   # evicted
    assert controller() is None


METADATA = {"topics": [
    {"name": "orders", "partitions": [{"partition": 0, "replicas": [0, 1]}, {"partition": 1, "replicas": [1, 2]}]},
    {"name": "logs", "partitions": [{"partition": 0, "replicas": [3]}]},
]}


def test_scale_down_refused_while_removed_brokers_hold_replicas():
    assert scale_down_blockers(METADATA, 2) == {2: ["orders-1"], 3: ["logs-0"]}
    d = plan_scale(4, 2, METADATA)
    assert not d.allowed and d.replicas == 4
    assert "broker 2: 1 (orders-1)" in d.reason and "broker 3: 1 (logs-0)" in d.reason
    assert "reassign" in d.reason


def test_scale_down_allowed_when_empty_and_scale_up_always():
    assert plan_scale(5, 4, METADATA) == plan_scale(5, 4, METADATA)
    d = plan_scale(5, 4, METADATA)
    assert d.allowed and d.replicas == 4
    assert plan_scale(3, 5, None).replicas == 5
    assert plan_scale(None, 3, None).allowed
    d = plan_scale(4, 3, None)
    assert not d.allowed and d.replicas == 4 and "cannot be asked" in d.reason


def own(pod_hashes, shared="s", legacy=None):
    """Pods started from templates with ``shared`` and their own hashes (None: before the split)."""
    return [PodView(f"c-brokers-{i}", i, legacy if h is None else shared, True, own_hash=h)
            for i, h in enumerate(pod_hashes)]


def test_a_broker_restarts_only_for_its_own_revision():
    want = Revision("s", {0: "a", 1: "b", 2: "c"}, legacy="L")
    assert plan_roll(own(["a", "b", "c"]), want, 3, 0).done
    # broker 3 added (its entry is new), or gone again: nobody else restarts
    assert plan_roll(own(["a", "b", "c", "d"]), Revision("s", {0: "a", 1: "b", 2: "c", 3: "d"}), 4, 0).done
    assert plan_roll(own(["a", "b", "c", "d"]), want, 3, 0).done   # broker 3 scaled away
    # broker 1's own address or certificate changed: broker 1 alone
    step = plan_roll(own(["a", "b", "c"]), Revision("s", {0: "a", 1: "B", 2: "c"}), 3, 0)
    assert (step.action, step.pod, step.pending) == ("restart", "c-brokers-1", ("c-brokers-1",))
    # a shared change restarts every broker, highest first
    assert plan_roll(own(["a", "b", "c"]), Revision("S", want.own), 3, 0).pending == (
        "c-brokers-2", "c-brokers-1", "c-brokers-0")


def test_pods_from_before_the_split_are_current_while_the_hash_of_everything_is():
    want = Revision("s", {0: "a", 1: "b"}, legacy="L")
    assert plan_roll(own([None, None], legacy="L"), want, 2, 0).done
    assert plan_roll(own([None, None], legacy="old"), want, 2, 0).pending == ("c-brokers-1", "c-brokers-0")


def test_pod_view_reads_its_own_entry():
    pod = {"metadata": {"name": "c-brokers-2", "labels": {"apps.kubernetes.io/pod-index": "2"},
                        "annotations": {"odradek.dev/config-hash": "abc",
                                        "odradek.dev/broker-hashes": '{"0": "x", "2": "mine"}'}}}
    assert PodView.from_pod(pod).own_hash == "mine"
    pod["metadata"]["annotations"]["odradek.dev/broker-hashes"] = "not json"
    assert PodView.from_pod(pod).own_hash is None
