"""What users do with Odradek on Kubernetes, on a cluster where pods really run: helm install a
cluster, kubectl apply topics, produce and consume over HTTP through the gateway Service, lose a
broker pod, change a broker setting, scale 3 -> 4 -> 3 brokers with spec.autoRebalance,
spark-submit a job against the gateway. In file order."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import httpx
import pytest

from support import BROKERS, CLUSTER, IMAGE, NAMESPACE, ROOT, cluster_ready, pods_ready, previous_image
from odradek.client import GatewayClient, GatewayError
from odradek.dev.waiting import wait_until
from odradek.verify import History, check

OFFSETS = "__consumer_offsets"

# The first test's setup builds the images and starts the node and the release (minutes).
pytestmark = [pytest.mark.k8s, pytest.mark.timeout(1800)]


def apply_topic(kube, name: str, partitions: int, replicas: int) -> None:
    kube.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekTopic",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"cluster": CLUSTER, "partitions": partitions, "replicas": replicas}}))


def all_in_sync(gw: GatewayClient, topic: str, rf: int) -> bool:
    return all(sum(r["in_sync"] for r in p["replicas"]) == rf for p in gw.partition_details(topic))


def read_all(gw: GatewayClient, topic: str) -> list[dict]:
    """Every record of every partition, from offset 0 to the high watermark (JSON range reads)."""
    records = []
    for partition in gw.partitions(topic):
        offset, end = 0, gw.offsets(topic, partition)[1]
        while offset < end:
            batch, offset = gw.read_json(topic, partition, offset, end, max_bytes=4 << 20)
            records += batch
    return records


def values(records: list[dict]) -> Counter:
    return Counter(base64.b64decode(r["value"]).decode() for r in records)


class Producer(threading.Thread):
    """Produces numbered values in small batches until stopped; remembers what was acknowledged
    (the gateway answers a batch only when Kafka's acks=all producer has) and what failed, also
    as the verifier's operations log (``history``, for ``odradek.verify.check``)."""

    def __init__(self, gateway, topic: str, prefix: str):
        super().__init__(daemon=True)
        self.gateway, self.topic, self.prefix = gateway, topic, prefix
        self.acked: list[str] = []
        self.failures: list[str] = []
        self.history = History()
        self.stop = threading.Event()

    def run(self) -> None:
        n = 0
        with self.gateway.client(timeout=120) as gw:
            while not self.stop.is_set():
                batch = [f"{self.prefix}-{n + i}" for i in range(100)]
                n += len(batch)
                for v in batch:
                    self.history.invoke(self.prefix, "send", v)
                try:
                    results = gw.produce(self.topic, [{"value": v.encode()} for v in batch])
                except (GatewayError, OSError, httpx.HTTPError) as e:   # the gateway restarting: refused
                    self.failures.append(f"{type(e).__name__}: {e}")
                    for v in batch:   # it may have been written: unknown
                        self.history.info(self.prefix, "send", v, error=self.failures[-1])
                    self.stop.wait(0.5)
                    continue
                for value, result in zip(batch, results):
                    if result.offset is not None:
                        self.acked.append(value)
                        self.history.ok(self.prefix, "send", value, partition=result.partition, offset=result.offset)
                    else:
                        self.failures.append(str(result))
                        self.history.info(self.prefix, "send", value, error=self.failures[-1])

    def finish(self) -> None:
        self.stop.set()
        self.join(180)


class ReadyBrokers(threading.Thread):
    """How many broker pods are Ready (and not terminating), every second until ``finish()``."""

    def __init__(self, kube):
        super().__init__(daemon=True)
        self.kube, self.seen, self.stop = kube, [], threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            pods = self.kube.get("pods", "-l", BROKERS)["items"]
            self.seen.append(sum(p["metadata"].get("deletionTimestamp") is None and any(
                c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
                for p in pods))
            self.stop.wait(1)

    def finish(self) -> list[int]:
        self.stop.set()
        self.join(30)
        return self.seen


def test_helm_install_brings_every_pod_ready(kube, release):
    assert cluster_ready(kube)
    pods = pods_ready(kube)
    components = Counter(p["metadata"]["labels"].get("app.kubernetes.io/component", "operator") for p in pods)
    # two operator replicas (the chart's default): one leads, the other stands by
    assert components == {"broker": 3, "zookeeper": 1, "controller": 1, "gateway": 1, "operator": 2}, components
    status = kube.get("odradekcluster", CLUSTER)["status"]
    assert status["brokers"] == "3/3"
    claims = kube.get("pvc")["items"]
    assert sorted(c["metadata"]["name"] for c in claims if c["status"]["phase"] == "Bound") == [
        f"data-{CLUSTER}-brokers-{i}" for i in range(3)] + [f"data-{CLUSTER}-zookeeper-0"]


def broker_images(kube) -> dict[str, str]:
    """Ready broker pod -> its broker container's image."""
    return {p["metadata"]["name"]: p["spec"]["containers"][0]["image"] for p in kube.get("pods", "-l", BROKERS)["items"]
            if p["metadata"].get("deletionTimestamp") is None
            and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))}


def read_partitions(gw: GatewayClient, topic: str) -> dict[int, list[tuple[int, str]]]:
    """The verifier's final read: every partition's (offset, value) up to its high watermark."""
    out: dict[int, list[tuple[int, str]]] = {}
    for partition in gw.partitions(topic):
        offset, end = 0, gw.offsets(topic, partition)[1]
        out[partition] = []
        while offset < end:
            batch, offset = gw.read_json(topic, partition, offset, end, max_bytes=4 << 20)
            out[partition] += [(r["offset"], base64.b64decode(r["value"]).decode()) for r in batch]
    return out


def test_upgrade_from_the_previous_release_loses_nothing(kube, gateway):
    """The cluster was installed with release N-1's image (e2e/images/previous-release); setting
    this release's rolls the brokers one at a time, old and new brokers serving side by side
    meanwhile, under acks=all load: the verifier's checker finds no acknowledged record lost."""
    previous = previous_image()
    wait_until(lambda: cluster_ready(kube) and not kube.get("odradekcluster", CLUSTER)["status"].get("rolling"),
               600, "the cluster Ready and not rolling", 3)
    assert set(broker_images(kube).values()) == {previous}
    apply_topic(kube, "upgrade", partitions=3, replicas=3)
    with gateway.client() as gw:
        wait_until(lambda: "upgrade" in gw.topics() and all_in_sync(gw, "upgrade", 3), 180, "topic upgrade in sync", 2)
    samples: list[dict[str, str]] = []
    sampling = threading.Event()

    def sample() -> None:   # the Ready brokers' images, every second of the roll
        while not sampling.is_set():
            samples.append(broker_images(kube))
            sampling.wait(1)

    # A cluster in use has its groups' topic before it is upgraded. Release N-1's brokers made it
    # at RF 1 when their controller saw fewer brokers than they did: this release's gateway,
    # starting mid-roll, joined its registry's group first (a CI run's rebalance storm, docs/groups.md).
    use_a_group(kube, gateway, "upgrade")
    producer = Producer(gateway, "upgrade", "upgrade")
    producer.start()
    wait_until(lambda: len(producer.acked) >= 1_000, 120, "produce running", 0.5)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    # docs/kubernetes.md, "Upgrades": the image and, in the same change, the brokers' control-plane
    # protocol kept at the replaced release's (1) while versions mix; raised by the next roll
    # (test_broker_setting_change_rolls_brokers_one_at_a_time)
    kube.kubectl("patch", "odradekcluster", CLUSTER, "-n", NAMESPACE, "--type", "merge", "-p",
                 json.dumps({"spec": {"image": IMAGE, "brokers": {"config": {"inter.broker.protocol.version": "1"}}}}))
    wait_until(lambda: (b := broker_images(kube)) and len(b) == 3 and set(b.values()) == {IMAGE}
               and cluster_ready(kube) and pods_ready(kube), 900, "every broker on this release and Ready", 3)
    sampling.set()
    sampler.join(30)
    acked_after = len(producer.acked)
    wait_until(lambda: len(producer.acked) >= acked_after + 1_000, 120, "produce after the upgrade", 0.5)
    producer.finish()
    with gateway.client() as gw:
        wait_until(lambda: all_in_sync(gw, "upgrade", 3), 300, "every replica back in sync", 2)
        final = read_partitions(gw, "upgrade")
    producer.history.read("final", final, complete=final)
    report = check(producer.history, "upgrade")
    print(f"upgrade {previous} -> {IMAGE}:\n{report.summary()}")
    assert not report.problems(), report.summary()
    assert min(len(s) for s in samples) >= 2, f"more than one broker down at once: {samples}"
    assert any(set(s.values()) == {previous, IMAGE} and len(s) >= 2 for s in samples), \
        f"never saw both releases serving during the roll: {samples}"
    for deployment in ("controller", "gateway"):
        spec = kube.get("deployment", f"{CLUSTER}-{deployment}")["spec"]["template"]["spec"]
        assert spec["containers"][0]["image"] == IMAGE, deployment
    assert offsets_replicas(kube) == {3}


def use_a_group(kube, gateway, topic: str) -> None:
    """A REST Proxy v2 consumer reads ``topic`` in a group until it has partitions: the brokers
    make ``__consumer_offsets`` on the way, with a replica on each of the three."""
    with gateway.client() as gw:
        http = gw.http
        v2 = {"content-type": "application/vnd.kafka.v2+json"}
        group = "e2e-first-group"
        made = http.post(f"/consumers/{group}", headers=v2, json={"format": "binary", "auto.offset.reset": "earliest"})
        assert made.status_code == 200, made.text
        base = f"/consumers/{group}/instances/{made.json()['instance_id']}"
        try:
            assert http.post(f"{base}/subscription", headers=v2, json={"topics": [topic]}).status_code == 204
            wait_until(lambda: http.get(f"{base}/records", params={"timeout": 1000},
                                        headers={"accept": "application/vnd.kafka.binary.v2+json"}).status_code == 200
                       and http.get(f"{base}/assignments").json().get("partitions"), 120, f"group {group} assigned", 1)
        finally:
            http.delete(base)
    wait_until(lambda: offsets_replicas(kube) == {3}, 120, f"{OFFSETS} on every broker", 3)


def test_topic_resource_creates_the_topic(kube, gateway):
    apply_topic(kube, "orders", partitions=6, replicas=3)
    with gateway.client() as gw:
        layout = wait_until(lambda: "orders" in gw.topics() and gw.partition_details("orders"), 180, "topic orders", 2)
        assert len(layout) == 6
        assert all(len(p["replicas"]) == 3 for p in layout)
        assert len({p["leader"] for p in layout}) == 3  # leaders spread over the three brokers
    wait_until(lambda: any(c["type"] == "Ready" and c["status"] == "True"
                           for c in kube.get("odradektopic", "orders").get("status", {}).get("conditions", [])),
               120, "OdradekTopic orders Ready", 2)


def test_http_produce_and_consume_100k_records(gateway):
    sent = Counter()
    with gateway.client(timeout=120) as gw:
        for start in range(0, 100_000, 5_000):
            batch = [{"key": f"k{i % 1000}".encode(), "value": f"v{i}".encode()} for i in range(start, start + 5_000)]
            results = gw.produce("orders", batch)
            assert all(r.offset is not None for r in results), [r for r in results if r.offset is None][:3]
            sent.update(r["value"].decode() for r in batch)
        received = read_all(gw, "orders")
    assert len(received) == 100_000
    assert values(received) == sent


def test_broker_pod_deleted_while_producing_loses_no_acknowledged_record(kube, gateway):
    apply_topic(kube, "durable", partitions=3, replicas=3)
    with gateway.client() as gw:
        wait_until(lambda: "durable" in gw.topics() and all_in_sync(gw, "durable", 3), 180, "topic durable in sync", 2)
    claim_uid = kube.get("pvc", f"data-{CLUSTER}-brokers-1")["metadata"]["uid"]
    old_pod = kube.get("pod", f"{CLUSTER}-brokers-1")["metadata"]["uid"]
    producer = Producer(gateway, "durable", "delete")
    producer.start()
    wait_until(lambda: len(producer.acked) >= 2_000, 120, "produce running", 0.5)
    kube.kubectl("delete", "pod", "-n", NAMESPACE, f"{CLUSTER}-brokers-1", "--wait=false")
    wait_until(lambda: kube.get("pod", f"{CLUSTER}-brokers-1")["metadata"]["uid"] != old_pod
               and pods_ready(kube, BROKERS) and len(pods_ready(kube, BROKERS)) == 3, 400, "broker 1 back and Ready",
               2)
    acked_at_return = len(producer.acked)
    wait_until(lambda: len(producer.acked) >= acked_at_return + 2_000, 120, "produce after the broker returned", 0.5)
    producer.finish()
    pod = kube.get("pod", f"{CLUSTER}-brokers-1")
    claim = next(v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"] if v["name"] == "data")
    assert kube.get("pvc", claim)["metadata"]["uid"] == claim_uid  # the same volume came back
    with gateway.client() as gw:
        wait_until(lambda: all_in_sync(gw, "durable", 3), 300, "broker 1 back in every ISR", 2)
        stored = values(read_all(gw, "durable"))
    lost = [v for v in producer.acked if v not in stored]
    print(f"acknowledged {len(producer.acked)}, failed batches {len(producer.failures)}, lost {len(lost)}")
    assert not lost, lost[:10]


def test_broker_setting_change_rolls_brokers_one_at_a_time(kube, gateway):
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods_ready(kube, BROKERS)}
    assert len(before) == 3
    watcher = ReadyBrokers(kube)
    producer = Producer(gateway, "durable", "roll")
    watcher.start()
    producer.start()
    kube.kubectl("patch", "odradekcluster", CLUSTER, "-n", NAMESPACE, "--type", "merge", "-p",
                 json.dumps({"spec": {"brokers": {"config": {"min.insync.replicas": "2",
                                                             "log.retention.hours": "72",
                                                             # raised after the upgrade (this release's)
                                                             "inter.broker.protocol.version": None}}}}))

    def rolled() -> bool:
        now = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods_ready(kube, BROKERS)}
        return len(now) == 3 and all(now[name] != uid for name, uid in before.items()) and cluster_ready(kube)

    wait_until(rolled, 900, "every broker restarted with the new setting", 3)
    seen_ready = watcher.finish()
    acked_after_roll = len(producer.acked)
    wait_until(lambda: len(producer.acked) >= acked_after_roll + 1_000, 120, "produce after the roll", 0.5)
    producer.finish()
    assert min(seen_ready) >= 2, f"more than one broker down at once: {seen_ready}"
    with gateway.client() as gw:
        stored = values(read_all(gw, "durable"))
    lost = [v for v in producer.acked if v not in stored]
    print(f"roll: acknowledged {len(producer.acked)}, failed batches {len(producer.failures)}, lost {len(lost)}")
    assert not lost, lost[:10]
    assert len(producer.failures) <= len(producer.acked) // 1000, producer.failures[:5]


def replicas_on(gateway, broker: int, topics=("orders", "durable")) -> int:
    with gateway.client() as gw:
        present = set(gw.topics())   # the test run alone (-k): no orders
        return sum(any(r["broker"] == broker for r in p["replicas"])
                   for t in topics if t in present for p in gw.partition_details(t))


def hosted_by(kube, pod: str) -> int:
    """The replicas a broker hosts, internal topics' included (its own partitioncount metric: the
    balancer moves the smallest partitions first, often __consumer_offsets' empty ones)."""
    line = next(x for x in broker_metrics(kube, pod).splitlines()
                if x.startswith("kafka_server_replicamanager_partitioncount "))
    return int(float(line.split()[1]))


def broker_metrics(kube, pod: str) -> str:
    script = ("import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9404/metrics').read().decode())")
    return kube.kubectl("exec", "-n", NAMESPACE, pod, "--", "python3", "-c", script)


def offsets_replicas(kube) -> set[int]:
    """How many brokers hold each of the 50 __consumer_offsets partitions (their log size
    series; the gateway shows no internal topic); empty until all 50 exist."""
    holders: Counter = Counter()
    for pod in pods_ready(kube, BROKERS):
        for line in broker_metrics(kube, pod["metadata"]["name"]).splitlines():
            if line.startswith("kafka_log_log_size{") and f'topic="{OFFSETS}"' in line:
                holders[re.search(r'partition="(\d+)"', line).group(1)] += 1
    return set(holders.values()) if len(holders) == 50 else set()


def auto_rebalance_idle(kube) -> bool:
    return (kube.get("odradekcluster", CLUSTER)["status"].get("autoRebalance") or {}).get("state") == "Idle"


def test_scale_up_and_down_rebalances_under_load_losing_nothing(kube, gateway):
    """spec.autoRebalance: 3 -> 4 brokers, the new one takes replicas; back to 3, broker 3
    drained before its pod goes; an acks=all producer throughout loses nothing; brokers 0-2 are
    never restarted (a broker restarts for its own configuration only: operator revisions.py).
    Alone: ``-k "upgrade or scale_up"`` (the release starts on N-1's image, without the rebalance API)."""
    apply_topic(kube, "durable", partitions=3, replicas=3)   # made above; applied again to run alone
    with gateway.client() as gw:
        wait_until(lambda: "durable" in gw.topics() and all_in_sync(gw, "durable", 3), 300, "durable in sync", 2)
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods_ready(kube, BROKERS)}
    assert len(before) == 3
    producer = Producer(gateway, "durable", "scale")
    producer.start()
    wait_until(lambda: len(producer.acked) >= 1_000, 120, "produce running", 0.5)
    auto = [{"mode": "add-brokers"}, {"mode": "remove-brokers"}]

    def scale(n: int) -> None:
        kube.kubectl("patch", "odradekcluster", CLUSTER, "-n", NAMESPACE, "--type", "merge", "-p",
                     json.dumps({"spec": {"autoRebalance": auto, "brokers": {"replicas": n}}}))

    scale(4)
    wait_until(lambda: len(pods_ready(kube, BROKERS)) == 4 and auto_rebalance_idle(kube) and cluster_ready(kube)
               and hosted_by(kube, f"{CLUSTER}-brokers-3") > 0, 1200, "broker 3 ready and holding replicas", 3)
    taken = hosted_by(kube, f"{CLUSTER}-brokers-3")
    scale(3)
    wait_until(lambda: kube.get("statefulset", f"{CLUSTER}-brokers")["spec"]["replicas"] == 3
               and len(pods_ready(kube, BROKERS)) == 3 and auto_rebalance_idle(kube) and cluster_ready(kube), 1200,
               "back to 3 brokers", 3)
    assert replicas_on(gateway, 3) == 0
    after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.get("pods", "-l", BROKERS)["items"]}
    assert {n: after.get(n) for n in before} == before, f"scaling restarted a broker: {before} -> {after}"
    acked_after = len(producer.acked)
    wait_until(lambda: len(producer.acked) >= acked_after + 1_000, 120, "produce after the scaling", 0.5)
    producer.finish()
    with gateway.client() as gw:
        wait_until(lambda: all_in_sync(gw, "durable", 3), 300, "durable in sync on 3 brokers", 2)
        stored = values(read_all(gw, "durable"))
    lost = [v for v in producer.acked if v not in stored]
    print(f"scale 3->4->3: broker 3 took {taken} replicas; acknowledged {len(producer.acked)}, "
          f"failed batches {len(producer.failures)}, lost {len(lost)}")
    assert not lost, lost[:10]


def test_broker_pod_eviction_becomes_the_operators_safe_roll(kube, gateway):
    """kubectl drain's call (the pods/eviction subresource) on broker 0 while broker 1 is down
    (its pod deleted: out of the ISR until it catches up), the chart's eviction webhook on: the
    eviction is denied with 429 and the operator restarts broker 0 itself, only once broker 1 is
    back (never fewer than two brokers Ready); acks=all producers lose nothing."""
    name, other = f"{CLUSTER}-brokers-0", f"{CLUSTER}-brokers-1"
    apply_topic(kube, "durable", partitions=3, replicas=3)   # made above; applied again to run alone
    with gateway.client() as gw:
        wait_until(lambda: "durable" in gw.topics() and all_in_sync(gw, "durable", 3), 300, "durable in sync", 2)
    old = kube.get("pod", name)["metadata"]["uid"]
    producer = Producer(gateway, "durable", "evict")
    watcher = ReadyBrokers(kube)
    producer.start()
    wait_until(lambda: len(producer.acked) >= 1_000, 120, "produce running", 0.5)
    watcher.start()
    kube.kubectl("delete", "pod", "-n", NAMESPACE, other, "--wait=false")
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NAMESPACE}}
    with pytest.raises(RuntimeError) as refused:
        kube.kubectl("create", "--raw", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/eviction", "-f", "-",
                     input=json.dumps(eviction))
    assert "Odradek operator" in str(refused.value), refused.value   # the webhook's answer, not the budget's
    wait_until(lambda: kube.get("pod", name)["metadata"]["uid"] != old and len(pods_ready(kube, BROKERS)) == 3,
               600, "the operator to restart the evicted broker and it to be Ready", 2)
    seen_ready = watcher.finish()
    acked_at_return = len(producer.acked)
    wait_until(lambda: len(producer.acked) >= acked_at_return + 1_000, 120, "produce after the restart", 0.5)
    producer.finish()
    assert min(seen_ready) >= 2, f"broker 0 restarted while broker 1 was down: {seen_ready}"
    assert "manual-rolling-update" not in json.dumps(kube.get("pod", name)["metadata"].get("annotations") or {})
    with gateway.client() as gw:
        stored = values(read_all(gw, "durable"))
    lost = [v for v in producer.acked if v not in stored]
    print(f"eviction: acknowledged {len(producer.acked)}, failed batches {len(producer.failures)}, lost {len(lost)}")
    assert not lost, lost[:10]


def test_spark_submit_counts_by_key_through_the_gateway(kube, gateway, tmp_path):
    apply_topic(kube, "order-counts", partitions=1, replicas=3)
    with gateway.client() as gw:
        wait_until(lambda: "order-counts" in gw.topics(), 180, "topic order-counts", 2)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_DIRS": str(tmp_path),
           "SSL_CERT_FILE": gateway.ca_file}   # the gateway's CA, for the source's clients (httpx)
    submit = Path(sys.executable).parent / "spark-submit"
    result = subprocess.run([str(submit), "--master", "local[2]", str(ROOT / "examples" / "spark_counts_by_key.py"),
                             "--gateway", gateway.url, "--token", gateway.token, "--input", "orders",
                             "--output", "order-counts"],
                            capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    with gateway.client() as gw:
        counts = {base64.b64decode(r["key"]).decode(): base64.b64decode(r["value"]).decode()
                  for r in read_all(gw, "order-counts")}
    assert counts == {f"k{i}": "100" for i in range(1000)}


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
