"""Two operator replicas under leader election against the real kube-apiserver: the leader is
killed (SIGKILL, by PID) in the middle of a rolling restart, and the standby takes the Lease over
and finishes the roll, each broker restarted exactly once, highest ordinal first. Before that,
the standby answers the eviction webhook (a dry-run eviction of a broker pod, the webhook
registered on the standby's port only): kopf runs on the leader alone, the webhook on both.

The test plays the kubelet as ``test_operator_k8s_brokers`` does; its cluster carries the label
``odradek.dev/operator`` so that only its own two operators (``--selector``) handle it, not the
session's shared one."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import urllib.request

import pytest

from odradek.dev.processes import listening_ports
from odradek.dev.waiting import wait_until
from odradek.operator import evictions
from odradek.operator.settings import (WEBHOOK_CONFIGURATION_ENV, WEBHOOK_HOSTS_ENV, WEBHOOK_LISTEN_ENV,
                                       WEBHOOK_SECRET_ENV)
from tests.operator.conftest import register_eviction_webhook, start_operator
from tests.operator.test_operator_k8s_brokers import (ANNOTATION, brokers_up, ensure_pods, hashes, mark_ready, spec,
                                                      template_hash)
from tests.support.k8s import OperatorProcess, control_plane_module

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(3000)]

LABEL = {"odradek.dev/operator": "ha"}
TIMINGS = "6/4/1"   # lease duration / renew deadline / retry period (s): a takeover within ~8.4 s


def webhook_configuration_name(ns):
    return f"odradek-test-evictions-{ns}"


def lease(k8s, ns):
    return k8s.get(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/odradek-operator")


def holder(k8s, ns) -> str:
    return ((lease(k8s, ns) or {}).get("spec") or {}).get("holderIdentity") or ""


def leader_gauge(op: OperatorProcess) -> float | None:
    with urllib.request.urlopen(op.metrics_url, timeout=10) as r:
        m = re.search(r"^odradek_operator_leader (\S+)$", r.read().decode(), re.M)
    return float(m.group(1)) if m else None


class PodWatch:
    """Every pod uid the API server reported per pod name, from a watch (no restart goes unseen)."""

    def __init__(self, k8s, ns):
        from kubernetes import watch
        self.uids: dict[str, set[str]] = {}
        self._watch = watch.Watch()
        self._stream = self._watch.stream(k8s.core.list_namespaced_pod, ns, timeout_seconds=600)
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        try:
            for event in self._stream:
                meta = event["object"].metadata
                self.uids.setdefault(meta.name, set()).add(meta.uid)
        except Exception:   # the stream ends with the test (stop())
            pass

    def stop(self):
        self._watch.stop()


@pytest.fixture
def operators(k8s, control_plane, namespace, tmp_path):
    started: list[OperatorProcess] = []

    def start(name: str, webhook: int = 0) -> OperatorProcess:
        log = tmp_path / f"{name}.log"
        webhook = webhook or control_plane_module.free_port()
        proc = start_operator(control_plane, log, "--selector", "odradek.dev/operator=ha", "--leader-elect",
                              "--lease", f"{namespace}/odradek-operator", "--lease-timings", TIMINGS,
                              env={"POD_NAME": name, WEBHOOK_LISTEN_ENV: f"127.0.0.1:{webhook}",
                                   WEBHOOK_HOSTS_ENV: "127.0.0.1", WEBHOOK_SECRET_ENV: f"{namespace}/webhook",
                                   WEBHOOK_CONFIGURATION_ENV: webhook_configuration})
        op = OperatorProcess(proc, log)
        started.append(op)
        (port,) = wait_until(lambda: proc.poll() is None and set(listening_ports(proc.pid)) - {webhook}, 60,
                             f"{name}'s metrics port")
        op.metrics_url = f"http://127.0.0.1:{port}/metrics"
        return op
    webhook_configuration = webhook_configuration_name(namespace)
    yield start
    for op in started:
        if op.proc.poll() is None:
            control_plane_module.terminate(op.proc, 15)
    path = f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{webhook_configuration}"
    if k8s.get(path):
        k8s.call("DELETE", path)


def test_standby_finishes_the_roll_of_a_killed_leader(k8s, namespace, operators, fake_controller):
    ns, c = namespace, "ha"

    def apply(config):
        obj = {"apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekCluster",
               "metadata": {"name": c, "namespace": ns, "labels": LABEL,
                            "annotations": {ANNOTATION: fake_controller.url}},
               "spec": spec(config=config)}
        k8s.apply(k8s.cr_path(ns, "odradekclusters", c), obj)

    first = operators("op-a")
    wait_until(lambda: holder(k8s, ns).startswith("op-a_"), 60, "op-a to lead")
    # The webhook on op-b's port only, for this namespace's evictions, before op-b publishes its CA.
    port = control_plane_module.free_port()
    register_eviction_webhook(k8s, port, webhook_configuration_name(ns), {"kubernetes.io/metadata.name": ns})
    second = operators("op-b", port)
    wait_until(lambda: "standing by" in second.log.read_text(), 60, "op-b to stand by")
    assert leader_gauge(first) == 1 and leader_gauge(second) == 0

    apply({"retention.ms": "1000"})
    old = brokers_up(k8s, ns, c)
    standby_answers_evictions(k8s, ns, second, f"{c}-brokers-0")
    watch = PodWatch(k8s, ns)
    try:
        apply({"retention.ms": "2000"})
        new = wait_until(lambda: (h := template_hash(k8s, ns, c)) not in old and h, 60, "the new pod template")
        order = roll(k8s, ns, c, new, kill_after_first=lambda: os.kill(first.proc.pid, signal.SIGKILL))
        wait_until(lambda: not k8s.cluster(ns, c)["status"].get("rolling"), 60, "the roll to finish")
    finally:
        watch.stop()
    assert order == [f"{c}-brokers-2", f"{c}-brokers-1", f"{c}-brokers-0"]
    # each broker restarted exactly once: its first pod and the one the roll made
    assert {n: len(watch.uids.get(n, ())) for n in order} == {n: 2 for n in order}, watch.uids
    assert holder(k8s, ns).startswith("op-b_") and lease(k8s, ns)["spec"]["leaseTransitions"] >= 1
    assert leader_gauge(second) == 1
    log = second.log.read_text()
    assert "leading (lease held by op-b_" in log and "expired" in log, second.log_tail()


def standby_answers_evictions(k8s, ns, standby, pod):
    """A dry-run eviction of a broker pod is denied by ``standby`` (and marks nothing)."""
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": ns}}

    def denied():
        try:
            k8s.call("POST", f"/api/v1/namespaces/{ns}/pods/{pod}/eviction", eviction, query=[("dryRun", "All")])
        except k8s.ApiException as e:
            return e.status == evictions.DENIED and "Odradek operator" in (e.body or "") and e.body
        return False   # allowed: the standby did not answer yet (its CA not published yet: failurePolicy Ignore)
    wait_until(denied, 60, "the standby to deny the eviction", 0.5)
    assert "eviction of" in standby.log.read_text() and "standing by" in standby.log.read_text()
    annotations = k8s.get(f"/api/v1/namespaces/{ns}/pods/{pod}")["metadata"].get("annotations") or {}
    assert "odradek.dev/manual-rolling-update" not in annotations


def roll(k8s, ns, c, new, kill_after_first) -> list[str]:
    """Play the kubelet through a roll to the template hash ``new``; once the first broker was
    restarted (and before it is ready), ``kill_after_first()``. The restart order."""
    order: list[str] = []
    deadline = time.monotonic() + 240
    while len(order) < 3:
        assert time.monotonic() < deadline, f"rolled {order}; status: {k8s.cluster(ns, c)['status']}"
        ensure_pods(k8s, ns, f"{c}-brokers")
        for name, h in hashes(k8s, ns, c).items():
            if h != new or name in order:
                continue
            order.append(name)
            if len(order) == 1:
                kill_after_first()
                started = time.monotonic()
                wait_until(lambda: holder(k8s, ns).startswith("op-b_"), 60, "op-b to take the lease over")
                print(f"\nop-b took the lease over {time.monotonic() - started:.1f}s after op-a was killed")
            still_old = [n for n, x in hashes(k8s, ns, c).items() if x != new]
            assert len(still_old) == 3 - len(order), f"restarted more than one broker at a time: {still_old}"
            mark_ready(k8s, ns, name)
        time.sleep(0.2)
    return order
