"""OdradekConnect and OdradekConnector against the real kube-apiserver, with the operator running
as a process (the shared ``operator`` fixture).

No kubelet: Connect workers never run here, so an OdradekConnect stays NotReady; what is checked
is every object it makes (owner references, the worker configuration, the storage OdradekTopics,
the workers' OdradekUser and its ACLs) and its status. OdradekConnector is reconciled against
``connect_fake`` (Kafka Connect's REST API as 3.9 answers), reached through the OdradekConnect's
``odradek.dev/connect-url`` annotation, whose loopback origin the test operator trusts; and once
against Apache Kafka 3.9's own Connect worker (the compat suite's jars), started here with the
worker configuration the operator wrote, on the shared dev cluster whose controller the
OdradekCluster names: the storage topics the operator makes there are the ones the worker
takes, and a file connector moves records."""

from __future__ import annotations

import subprocess
import uuid

import httpx
import pytest
from confluent_kafka import Consumer

from bench import kafka_ecosystem
from odradek.dev.processes import candidate_port
from odradek.dev.waiting import wait_until
from odradek.operator import connect, connect_plugins
from tests.compat.test_mirror_maker import LOG4J, ecosystem
from tests.operator.connect_fake import FakeConnect
from tests.operator.test_operator_k8s_users import secret_data
from tests.support.k8s import condition, ready_check
from tests.support.tools import stop_process, tool_missing

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(600)]

CLUSTER = {"brokers": {"replicas": 1, "storage": {"type": "ephemeral"}}, "controller": {"replicas": 1},
           "zookeeper": {"managed": {"replicas": 1}},
           "listeners": [{"name": "tls", "port": 9092, "tls": True, "authentication": {"type": "scram-sha-512"}}],
           "authorization": {"type": "simple"}}
API = "/apis/odradek.dev/v1alpha1"
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
# not published for 3.9.2 (the compat suite's runtime): 3.9.1's, the same minor release
BASIC_AUTH_EXTENSION = "org.apache.kafka:connect-basic-auth-extension:3.9.1"


def apply_connect(k8s, namespace: str, name: str, spec: dict, labels=None, annotations=None) -> dict:
    return k8s.apply(k8s.cr_path(namespace, "odradekconnects", name), {
        "apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekConnect",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}, "annotations": annotations or {}},
        "spec": spec})


def apply_connector(k8s, namespace: str, name: str, spec: dict, annotations=None) -> dict:
    return k8s.apply(k8s.cr_path(namespace, "odradekconnectors", name), {
        "apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekConnector",
        "metadata": {"name": name, "namespace": namespace, "labels": {"odradek.dev/connect": "k"},
                     "annotations": annotations or {}},
        "spec": spec})


def test_connect_on_a_secured_cluster_gets_its_workers_topics_and_least_privileged_user(k8s, operator, namespace):
    k8s.apply_cluster(namespace, "c", CLUSTER)
    cr = apply_connect(k8s, namespace, "k", {"replicas": 2, "exactlyOnceSourceSupport": "enabled",
                                             "config": {"offset.flush.interval.ms": 1000},
                                             "restApi": {"authentication": {"type": "basic"}},
                                             "plugins": [{"name": "basic-auth", "artifacts": [
                                                 {"maven": BASIC_AUTH_EXTENSION}]}]},
                       labels={"odradek.dev/cluster": "c"})
    owned = {kind: wait_until(lambda kind=kind, n=n: k8s.get(path.format(ns=namespace, n=n)), 60, f"{kind} {n}", 0.2)
             for kind, n, path in (
                 ("Deployment", "k-connect", "/apis/apps/v1/namespaces/{ns}/deployments/{n}"),
                 ("Service", "k-connect-api", "/api/v1/namespaces/{ns}/services/{n}"),
                 ("ConfigMap", "k-connect-config", "/api/v1/namespaces/{ns}/configmaps/{n}"),
                 ("NetworkPolicy", "k-connect-network-policy",
                  "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies/{n}"),
                 ("OdradekUser", "k-connect", API + "/namespaces/{ns}/odradekusers/{n}"),
                 ("Secret", "k-connect-rest", "/api/v1/namespaces/{ns}/secrets/{n}"))}
    for kind, obj in owned.items():
        assert [(r["kind"], r["name"], r["uid"], r.get("controller")) for r in obj["metadata"]["ownerReferences"]] \
            == [("OdradekConnect", "k", cr["metadata"]["uid"], True)], kind
    assert owned["Deployment"]["spec"]["replicas"] == 2
    # spec.plugins: fetched by an init container of the Odradek image into a volume on plugin.path
    pod = owned["Deployment"]["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    assert init["image"] == "ghcr.io/odradek/odradek:0.1.0" and init["command"][:3] == [
        "python", "-m", "odradek.operator.connect_plugins"]
    assert {"name": "plugins", "mountPath": "/mnt/connect-plugins", "readOnly": True} in \
        pod["containers"][0]["volumeMounts"]
    # basic authentication: the login the operator made, kept across reconciliations
    login = secret_data(k8s, namespace, "k-connect-rest")
    assert login["username"] == "odradek-operator" and len(login["password"]) == 32
    props = owned["ConfigMap"]["data"]["connect-distributed.properties"].splitlines()
    assert f"bootstrap.servers=c-bootstrap.{namespace}.svc:9092" in props
    assert "security.protocol=SASL_SSL" in props and "exactly.once.source.support=enabled" in props
    assert "offset.flush.interval.ms=1000" in props
    assert "plugin.path=/opt/kafka/plugins,/mnt/connect-plugins" in props
    assert f"rest.extension.classes={connect.BASIC_AUTH_EXTENSION}" in props
    user = owned["OdradekUser"]["spec"]
    assert user["cluster"] == "c" and user["authentication"] == {"type": "scram-sha-512"}
    assert {"resource": {"type": "transactionalId", "name": "k-", "patternType": "prefix"},
            "operations": ["Write", "Describe"]} in user["authorization"]["acls"]
    # the storage topics: compacted, Kafka's partition counts, kept when the Connect cluster goes;
    # Kafka's replication factor 3 capped at the cluster's one broker, on the topics and the workers
    assert "config.storage.replication.factor=1" in props and "status.storage.replication.factor=1" in props
    for suffix, partitions in (("configs", 1), ("offsets", 25), ("status", 5)):
        topic = k8s.topic(namespace, f"k-connect-{suffix}")
        assert topic["spec"] == {"cluster": "c", "topicName": f"k-{suffix}", "partitions": partitions,
                                 "replicas": 1, "config": {"cleanup.policy": "compact"}}
        assert not topic["metadata"].get("ownerReferences")

    def reported():
        st = (k8s.get(k8s.cr_path(namespace, "odradekconnects", "k")) or {}).get("status") or {}
        return st if condition({"status": st}, "Ready") and st.get("readyReplicas") is not None else None
    status = wait_until(reported, 60, "the OdradekConnect's status", 0.2)
    ready = condition({"status": status}, "Ready")
    assert ready["status"] == "False" and ready["reason"] == "ChildrenNotReady"
    assert ready["message"].startswith("workers 0/2 ready") and "OdradekUser k-connect not Ready" in ready["message"]
    assert status["url"] == f"http://k-connect-api.{namespace}.svc:8083" and status["user"] == "k-connect"
    assert status["topics"] == ["k-configs", "k-offsets", "k-status"]
    assert secret_data(k8s, namespace, "k-connect-rest") == login


def test_connector_is_created_stopped_restarted_refused_and_deleted_through_the_rest_api(k8s, operator, namespace):
    fake = FakeConnect()
    try:
        # its OdradekCluster is not needed for the connector: the REST API is what it talks to
        apply_connect(k8s, namespace, "k", {"cluster": "absent"}, annotations={"odradek.dev/connect-url": fake.url})
        path = k8s.cr_path(namespace, "odradekconnectors", "src")
        cr = apply_connector(k8s, namespace, "src", {"class": FILE_SOURCE, "tasksMax": 2,
                                                     "config": {"file": "/tmp/in.txt", "topic": "lines"}})
        done = wait_until(ready_check(lambda: k8s.get(path), cr["metadata"]["generation"]), 60, "connector Ready", 0.2)
        assert fake.connectors["src"]["config"] == {"connector.class": FILE_SOURCE, "tasks.max": "2", "name": "src",
                                                    "file": "/tmp/in.txt", "topic": "lines"}
        assert done["status"]["connectorStatus"]["connector"]["state"] == "RUNNING"
        assert [t["id"] for t in done["status"]["connectorStatus"]["tasks"]] == [0, 1]
        # spec.state stopped (KIP-875): tasks shut down, configuration kept
        cr = k8s.merge(path, {"spec": {"state": "stopped"}})
        done = wait_until(ready_check(lambda: k8s.get(path), cr["metadata"]["generation"]), 60, "stopped", 0.2)
        assert done["status"]["connectorStatus"]["connector"]["state"] == "STOPPED"
        assert ("PUT", "stop") in fake.calls
        # the restart annotation is acted on once, then removed
        k8s.merge(path, {"metadata": {"annotations": {"odradek.dev/restart": "true"}}})
        wait_until(lambda: "odradek.dev/restart" not in (k8s.get(path)["metadata"].get("annotations") or {}),
                   60, "the restart annotation acted on", 0.2)
        assert fake.calls.count(("POST", "restart")) == 1
        # a class Kafka Connect cannot find: NotReady with its message, the old config kept
        cr = k8s.merge(path, {"spec": {"class": "com.example.Missing"}})
        refused = wait_until(lambda: (c := condition(k8s.get(path), "Ready")) and c["reason"] == "ConnectorRefused"
                             and c, 60, "the refusal", 0.2)
        assert "Class could not be found" in refused["message"]
        assert fake.connectors["src"]["config"]["connector.class"] == FILE_SOURCE
        k8s.delete(path)
        wait_until(lambda: k8s.get(path) is None and "src" not in fake.connectors, 60, "the connector deleted", 0.2)
        assert fake.calls[-1] == ("DELETE", "/connectors/src")
    finally:
        fake.close()


def _worker_file(properties: str, bootstrap: str, port: int, plugins) -> str:
    """The operator's worker configuration with what differs outside a pod: the dev cluster's
    bootstrap (not its Service), a loopback REST listener, an existing plugin directory."""
    here = {"bootstrap.servers": bootstrap, "listeners": f"http://127.0.0.1:{port}",
            "rest.advertised.host.name": "127.0.0.1", "plugin.path": str(plugins)}
    lines = [line for line in properties.splitlines() if line.split("=", 1)[0] not in here]
    return "\n".join([*lines, *(f"{k}={v}" for k, v in here.items()), ""])


def _read(bootstrap: str, topic: str, count: int) -> list[str]:
    """The first ``count`` committed values of ``topic``, from its beginning."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "isolation.level": "read_committed"})
    values: list[str] = []

    def enough() -> bool:
        values.extend(m.value().decode() for m in c.consume(count, 0.5) if m.error() is None)
        return len(values) >= count
    try:
        c.subscribe([topic])
        wait_until(enough, 120, f"{count} records in {topic}", 0)
    finally:
        c.close()
    return values


def mount(root, config_dir: str, volumes: dict[str, dict[str, str]]) -> None:
    """What a pod mounts under ``config_dir`` (subdirectory -> its files: a ConfigMap's, a
    Secret's key by key), laid out under ``root``, paths into ``config_dir`` rewritten to ``root``."""
    for sub, items in volumes.items():
        (root / sub).mkdir(parents=True)
        for key, value in items.items():
            (root / sub / key).write_text(value.replace(config_dir, str(root)))


def _basic_auth_jar(tmp_path):
    """Kafka's connect-basic-auth-extension from Maven Central (in the image, part of the
    distribution's libs; not among the compat suite's jars), fetched as spec.plugins are."""
    plugin = connect_plugins.parse_plugins([{"name": "rest", "artifacts": [{"maven": BASIC_AUTH_EXTENSION}]}])
    try:
        (jar,) = connect_plugins.fetch(connect_plugins.MAVEN_CENTRAL, plugin, tmp_path / "libs")
    except connect_plugins.FetchError as e:
        tool_missing(f"Maven Central unreachable for {BASIC_AUTH_EXTENSION}: {e}")
    return jar


def test_kafkas_own_worker_logs_in_with_the_operators_config_user_and_acls_and_its_rest_api_asks_for_a_login(
        k8s, operator, namespace, scram_dev_cluster, tmp_path):
    """The operator's worker configuration for a SASL_SSL/SCRAM listener, its OdradekUser's ACLs
    applied on a cluster that denies what no ACL allows, exactly-once source on, and basic
    authentication on the REST API: Kafka 3.9's own worker starts on them, takes the storage
    topics the operator made, and a file connector the operator reconciles (with its login)
    delivers every line once; a REST call without the login gets 401."""
    ecosystem()
    st, port, group = scram_dev_cluster.status(), candidate_port(), f"k-{uuid.uuid4().hex[:6]}"
    k8s.apply_cluster(namespace, "dev", {"brokers": {"replicas": 1}, "controller": {"replicas": 1},
                                         "zookeeper": {"external": {"connect": st["zookeeper"]}},
                                         "listeners": CLUSTER["listeners"], "authorization": {"type": "simple"}},
                      {"odradek.dev/controller-url": st["controller_url"]})
    topic = f"{group}-lines"
    apply_connect(k8s, namespace, "k", {
        "groupId": group, "exactlyOnceSourceSupport": "enabled", "restApi": {"authentication": {"type": "basic"}},
        "authorization": {"acls": [{"resource": {"type": "topic", "name": topic},
                                    "operations": ["Write", "Describe"]}]},
        "config": {"plugin.discovery": "service_load", "offset.flush.interval.ms": 1000,
                   "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                   "value.converter": "org.apache.kafka.connect.storage.StringConverter"}},
        labels={"odradek.dev/cluster": "dev"}, annotations={"odradek.dev/connect-url": f"http://127.0.0.1:{port}"})
    k8s.apply_topic(namespace, "lines", {"cluster": "dev", "topicName": topic, "partitions": 1})
    topics = ["lines", *(f"k-connect-{s}" for s in ("configs", "offsets", "status"))]
    for name in topics:   # made in the dev cluster by the operator, compacted, before any worker runs
        wait_until(ready_check(lambda name=name: k8s.topic(namespace, name)), 60, f"OdradekTopic {name}", 0.2)
    wait_until(ready_check(lambda: k8s.user(namespace, "k-connect")), 60, "the workers' OdradekUser", 0.2)
    configmap = wait_until(lambda: (c := k8s.child(namespace, "ConfigMap", "k-connect-config")) and
                           connect.REST_JAAS_FILE in c["data"] and c, 60, "the ConfigMap", 0.2)
    login = wait_until(lambda: secret_data(k8s, namespace, "k-connect-rest"), 60, "the REST API's Secret", 0.2)
    root = tmp_path / "mounts"   # the cluster CA: the dev cluster's (it signed the broker's certificate)
    mount(root, connect.CONFIG_DIR, {"worker": configmap["data"], "user": secret_data(k8s, namespace, "k-connect"),
                                     "rest-users": login,
                                     "cluster-ca": {"ca.crt": scram_dev_cluster.ca_file.read_text()}})
    (tmp_path / "plugins").mkdir()
    worker = _worker_file((root / "worker" / connect.CONFIG_FILE).read_text(),
                          scram_dev_cluster.endpoints["SECURE"][0], port, tmp_path / "plugins")
    (tmp_path / "worker.properties").write_text(worker)
    (tmp_path / "log4j.properties").write_text(LOG4J.format(log=tmp_path / "connect.log"))
    argv = kafka_ecosystem.java_argv(kafka_ecosystem.CONNECT_DISTRIBUTED, str(tmp_path / "worker.properties"),
                                     log4j=tmp_path / "log4j.properties")
    argv[argv.index("-cp") + 1] += f":{_basic_auth_jar(tmp_path)}"
    # what the Deployment's KAFKA_OPTS says, with the mount rewritten
    argv.insert(1, f"-Djava.security.auth.login.config={root / 'worker' / connect.REST_JAAS_FILE}")
    source = tmp_path / "lines.txt"
    lines = [f"line-{i}" for i in range(50)]
    source.write_text("".join(f"{line}\n" for line in lines))
    with open(tmp_path / "stdout", "wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    log, url = f"(log: {tmp_path / 'connect.log'})", f"http://127.0.0.1:{port}"
    auth = (login["username"], login["password"])
    try:
        wait_until(lambda: httpx.get(f"{url}/connectors", auth=auth, timeout=5).status_code == 200, 180,
                   f"the Connect worker's REST API {log}", 1)
        assert httpx.get(f"{url}/connectors", timeout=5).status_code == 401
        assert httpx.get(f"{url}/connectors", auth=(auth[0], "wrong"), timeout=5).status_code == 401
        assert httpx.post(f"{url}/connectors", json={"name": "x", "config": {"connector.class": FILE_SOURCE}},
                          timeout=5).status_code == 401
        path = k8s.cr_path(namespace, "odradekconnectors", "src")
        cr = apply_connector(k8s, namespace, "src", {"class": FILE_SOURCE, "config": {
            "file": str(source), "topic": topic, "exactly.once.support": "required"}})
        ready = ready_check(lambda: k8s.get(path), cr["metadata"]["generation"])
        # Ready once the connector runs; its task follows (the leader writes the task configs in a transaction)
        wait_until(lambda: (done := ready()) and [t["state"] for t in done["status"]["connectorStatus"]["tasks"]]
                   == ["RUNNING"], 120, f"the connector and its task RUNNING {log}", 0.5)
        assert _read(st["bootstrap_servers"], topic, len(lines)) == lines
        k8s.delete(path)
        wait_until(lambda: httpx.get(f"{url}/connectors", auth=auth, timeout=5).json() == [], 60,
                   "the connector deleted from the worker", 0.5)
    finally:
        stop_process(proc, 60)
        for name in topics:   # the shared dev cluster keeps no topic of this test
            k8s.delete(k8s.cr_path(namespace, "odradektopics", name))
