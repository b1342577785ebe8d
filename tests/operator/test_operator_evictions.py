"""The pure decisions of day-2 safety: which evictions the webhook turns into rolls
(``evictions.decide``), which restarts would take a partition below min.insync.replicas
(``manual.below_min_isr``), manual rolls in ``rolling.plan_roll``, the webhook's certificate
and the brokers' PodDisruptionBudget (``brokers.pdb``)."""

from __future__ import annotations

from odradek.certs import alt_names
from odradek.operator import builders, evictions, manual, rolling, webhook
from odradek.operator.settings import OperatorSettings
from odradek.operator.validation import parse_cluster
from tests.operator.plans import security


def pod(name="c-brokers-1", labels=None, **meta):
    return {"metadata": {"name": name, "namespace": "ns",
                         "labels": builders.labels("c", "broker") if labels is None else labels, **meta}}


CLUSTER = {"metadata": {"name": "c", "namespace": "ns"}}


def decide(p, watched=True, cluster=CLUSTER):
    return evictions.decide(p, lambda ns: watched, lambda ns, name: cluster if name == "c" else None)


def test_a_broker_pod_eviction_is_denied_and_marked():
    verdict = decide(pod())
    assert not verdict.allow and verdict.mark
    assert "min.insync.replicas" in verdict.reason
    # marked already (a retried drain): denied, nothing to write
    again = decide(pod(annotations={rolling.MANUAL_ROLL: "true"}))
    assert not again.allow and not again.mark


def test_other_evictions_pass_untouched():
    assert decide(None).allow
    assert decide(pod(labels={"app": "web"})).allow                               # not a broker
    assert decide(pod(labels=builders.labels("c", "controller"))).allow            # not a broker
    strimzi = {"app.kubernetes.io/component": "broker", "app.kubernetes.io/managed-by": "strimzi"}
    assert decide(pod(labels=strimzi)).allow                                       # another operator's
    assert decide(pod(), watched=False).allow                                      # another operator's namespace
    assert decide(pod(deletionTimestamp="2026-11-29T04:00:00Z")).allow             # already going
    assert decide(pod(), cluster=None).allow                                       # its cluster is gone
    deleting = {"metadata": {"name": "c", "namespace": "ns", "deletionTimestamp": "x"}}
    assert decide(pod(), cluster=deleting).allow
    assert not any(decide(p).mark for p in (None, pod(labels={"app": "web"})))


def partition(n, replicas, isr):
    return {"partition": n, "replicas": replicas, "isr": isr, "leader": isr[0], "leader_epoch": 0}


def test_below_min_isr():
    meta = {"topics": [
        {"name": "orders", "configs": {"min.insync.replicas": "2"},
         "partitions": [partition(0, [0, 1, 2], [0, 1, 2]), partition(1, [0, 1, 2], [0, 2])]},
        {"name": "logs", "configs": {}, "partitions": [partition(0, [1, 2], [1])]},          # default 1
        {"name": "rf1", "configs": {}, "partitions": [partition(0, [2], [2])]},               # min.isr >= RF
        {"name": "strict", "configs": {"min.insync.replicas": "3"},
         "partitions": [partition(0, [0, 1, 2], [0, 1, 2])]}]}                              # min.isr = RF
    # orders-1 has ISR {0, 2}: restarting 0 or 2 leaves 1 < 2; broker 1 is out of it; logs-0's
    # last in-sync replica is 1 (its restart would take the partition offline)
    assert manual.below_min_isr(meta, 1) == {0: ["orders-1"], 1: ["logs-0"], 2: ["orders-1"]}
    # with the brokers' default at 2, logs-0 (RF 2) can never stay writable through a restart: left out
    assert manual.below_min_isr(meta, 2) == {0: ["orders-1"], 2: ["orders-1"]}
    assert manual.below_min_isr({"topics": []}, 2) == {}


def view(name, ordinal, marked=False, h="new", ready=True):
    return rolling.PodView(name, ordinal, h, ready, manual=marked)


def test_manual_rolls_are_planned_like_outdated_pods():
    pods = [view("b-0", 0), view("b-1", 1, marked=True), view("b-2", 2)]
    step = rolling.plan_roll(pods, "new", 3, 0, {})
    assert (step.action, step.pod, step.pending) == ("restart", "b-1", ("b-1",))
    assert "by hand" in step.reason
    assert rolling.plan_roll([view("b-0", 0), view("b-1", 1)], "new", 2, 0).done


def test_a_restart_waits_while_it_would_take_a_partition_below_min_isr():
    pods = [view("b-0", 0), view("b-1", 1, marked=True), view("b-2", 2, h="old")]
    step = rolling.plan_roll(pods, "new", 3, 0, {2: ["orders-1"]})
    assert step.action == "wait" and "orders-1" in step.reason and step.pending == ("b-2", "b-1")
    step = rolling.plan_roll(pods, "new", 3, 0, {0: ["orders-1"]})
    assert (step.action, step.pod) == ("restart", "b-2")
    assert rolling.plan_roll(pods, "new", 3, None, {}).action == "wait"   # the controller unknown


def test_pod_view_reads_the_manual_annotation():
    p = {"metadata": {"name": "c-brokers-0", "annotations": {rolling.MANUAL_ROLL: "true"}}, "status": {}}
    assert rolling.PodView.from_pod(p).manual
    assert manual.requested(p["metadata"])
    assert not rolling.PodView.from_pod({"metadata": {"name": "c-brokers-0"}}).manual


def test_webhook_certificate_names_its_hosts_and_is_reissued_when_they_change():
    data = webhook.issue(["odradek-operator.ops.svc", "127.0.0.1"])
    assert sorted(alt_names(data["tls.crt"])) == ["127.0.0.1", "odradek-operator.ops.svc"]
    assert webhook._fresh(data, ["127.0.0.1", "odradek-operator.ops.svc"])
    assert not webhook._fresh(data, ["other.ops.svc"])
    assert not webhook._fresh({}, ["127.0.0.1"])


def test_webhook_settings_from_the_environment():
    s = OperatorSettings.from_env({"ODRADEK_OPERATOR_WEBHOOK_LISTEN": "0.0.0.0:9443",
                                   "ODRADEK_OPERATOR_WEBHOOK_HOSTS": "a.ns.svc, a.ns.svc.cluster.local",
                                   "ODRADEK_OPERATOR_WEBHOOK_SECRET": "ns/a-webhook",
                                   "ODRADEK_OPERATOR_WEBHOOK_CONFIGURATION": "odradek-evictions"})
    assert s.webhook_hosts == ("a.ns.svc", "a.ns.svc.cluster.local") and s.webhook_listen == "0.0.0.0:9443"
    assert OperatorSettings.from_env({}).webhook_listen == ""


def pdbs(spec):
    parsed = parse_cluster(spec)
    return [o for o in builders.build_brokers("c", "ns", parsed, security(parsed)) if o["kind"] == "PodDisruptionBudget"]


def test_pdb_is_configurable_or_off():
    assert [p["spec"]["maxUnavailable"] for p in pdbs({})] == [1]
    assert [p["spec"]["maxUnavailable"] for p in pdbs({"brokers": {"pdb": {"maxUnavailable": 0}}})] == [0]
    assert pdbs({"brokers": {"pdb": {"enabled": False}}}) == []


def test_maintenance_plan_follows_the_annotation_and_undoes_only_its_own():
    from odradek.operator import maintenance as m
    assert m.plan({m.ANNOTATION: "1, 2"}, 3) == m.MaintenancePlan((1, 2), ())
    assert m.plan({m.ANNOTATION: "2", m.ENABLED: "1,2"}, 3) == m.MaintenancePlan((), (1,))
    assert m.plan({m.ENABLED: "1"}, 3) == m.MaintenancePlan((), (1,))          # annotation removed
    refused = m.plan({m.ANNOTATION: "0,7,x"}, 3)
    assert refused.enable == (0,) and "7, x" in refused.refused
    assert m.apply({"metadata": {"annotations": {}}}, lambda: None).enabled is None   # nothing to do


class FakeApi:
    def __init__(self, objects):
        self.objects, self.patches = objects, []

    def get(self, api_version, kind, namespace, name):
        return self.objects.get((kind, namespace, name))

    def merge_patch(self, api_version, kind, namespace, name, body):
        self.patches.append((kind, namespace, name, body))


def post_review(port, ca_pem, path, review):
    import http.client
    import json
    import ssl
    context = ssl.create_default_context(cadata=ca_pem.decode())
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    conn.request("POST", path, json.dumps(review), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    return resp.status, json.loads(resp.read())


def test_the_admission_server_answers_eviction_reviews_without_kopf():
    """What every operator replica serves, a standby of the election included (no kopf running):
    the eviction webhook over TLS with the Secret's certificate, ``evictions.decide`` deciding;
    a dry run marks nothing; a new certificate is served from the next handshake on."""
    api = FakeApi({("Pod", "ns", "c-brokers-1"): pod(), ("OdradekCluster", "ns", "c"): CLUSTER})
    data = webhook.issue(["127.0.0.1"])
    routes = {evictions.PATH: lambda r: evictions.answer(api, r, lambda ns: True)}
    server = webhook.AdmissionServer("127.0.0.1:0", data, routes)
    try:
        def review(uid, name, **extra):
            return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "request": {"uid": uid, "name": name, "namespace": "ns", "subResource": "eviction",
                                "operation": "CREATE", **extra}}
        status, body = post_review(server.port, data["ca.crt"], "/evictions", review("u1", "c-brokers-1", dryRun=True))
        assert status == 200 and body["response"]["uid"] == "u1" and not body["response"]["allowed"]
        assert body["response"]["status"]["code"] == evictions.DENIED and not api.patches   # dry run
        status, body = post_review(server.port, data["ca.crt"], "/evictions", review("u2", "c-brokers-1"))
        assert not body["response"]["allowed"] and api.patches == [
            ("Pod", "ns", "c-brokers-1", {"metadata": {"annotations": {rolling.MANUAL_ROLL: "true"}}})]
        status, body = post_review(server.port, data["ca.crt"], "/evictions", review("u3", "web-0"))
        assert body["response"] == {"uid": "u3", "allowed": True}
        assert post_review(server.port, data["ca.crt"], "/other", review("u4", "web-0"))[0] == 404
        renewed = webhook.issue(["127.0.0.1"])
        server.load(renewed)
        assert post_review(server.port, renewed["ca.crt"], "/evictions", review("u5", "web-0"))[0] == 200
    finally:
        server.close()


def test_a_renewed_certificate_is_served_and_its_ca_published():
    """``webhook.keep_fresh``: another replica's renewal (a changed Secret) is loaded and its CA
    published; a failing read is retried at the next turn."""
    import threading

    from odradek.dev.waiting import wait_until
    data, renewed = webhook.issue(["127.0.0.1"]), webhook.issue(["127.0.0.1"])
    reads, published = [RuntimeError("API server unreachable"), data, renewed], []

    def read():
        answer = reads.pop(0) if len(reads) > 1 else reads[0]
        if isinstance(answer, Exception):
            raise answer
        return answer
    server = webhook.AdmissionServer("127.0.0.1:0", data, {})
    stop = threading.Event()
    threading.Thread(target=webhook.keep_fresh, args=(server, read, published.append, stop, 0.01), daemon=True).start()
    try:
        wait_until(lambda: published, 10, "the renewed CA published")
        assert published == [renewed["ca.crt"]] and server.data == renewed
        assert post_review(server.port, renewed["ca.crt"], "/evictions",
                           {"request": {"uid": "u"}})[0] == 404   # no route: but the handshake passed
    finally:
        stop.set()
        server.close()
