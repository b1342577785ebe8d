"""OdradekUser against a real kube-apiserver and a real Odradek dev cluster with SCRAM and the
ACL authorizer on: the Secret, a real Kafka client (confluent-kafka, SASL SCRAM-SHA-512 with
the Secret's password) whose ACLs decide, deletion, bad specs.

The dev broker (conftest's ``scram_dev_cluster``, shared with the Connect module) has the harness's
PLAINTEXT listener (its tools; ``User:ANONYMOUS`` is the super user there) and a SASL_PLAINTEXT
listener with SCRAM-SHA-512 for the users; no ACL means deny.
The OdradekCluster points the operator at the dev controller (``odradek.dev/controller-url``).
"""

from __future__ import annotations

import base64
import os
import subprocess
import uuid

import httpx
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from cryptography import x509

from odradek.cluster import control_plane, control_plane_users
from odradek.cluster.control_plane_http import call_blocking
from odradek.dev.waiting import wait_until
from odradek.operator import gateway_acls
from tests.support.gateway import GatewayProcess
from tests.support.k8s import condition, need, ready_check

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(3000)]  # the first API-server test may pay the Kubernetes build

@pytest.fixture(scope="module")
def scram_cluster(scram_dev_cluster):
    """conftest's SCRAM cluster: its status and SASL_PLAINTEXT bootstrap, with this module's topics."""
    st = scram_dev_cluster.status()
    for topic in ("orders", "payroll"):
        call_blocking(st["controller_url"], control_plane.create_topic(control_plane.CreateTopic(topic, 1, 1)), 10)
    return st, scram_dev_cluster.endpoints["SASL"][0]


@pytest.fixture
def odc(k8s, operator, namespace, scram_cluster):
    st, bootstrap = scram_cluster
    k8s.apply_cluster(namespace, "dev", {"brokers": {"replicas": 1}, "controller": {"replicas": 1},
                                         "zookeeper": {"external": {"connect": st["zookeeper"]}}},
                      {"odradek.dev/controller-url": st["controller_url"]})
    return st["controller_url"], bootstrap


def stored(url: str, name: str, principal: str | None = None) -> control_plane_users.UserState:
    return call_blocking(url, control_plane_users.describe_user(name, principal), timeout=5)


def secret_data(k8s, ns: str, name: str) -> dict[str, str] | None:
    secret = k8s.child(ns, "Secret", name)
    return None if secret is None else {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def client_config(bootstrap: str, user: str, password: str) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": password}


def produce(config: dict, topic: str) -> KafkaError | None:
    """The delivery error of one record (None: delivered)."""
    outcome = []
    p = Producer({**config, "message.timeout.ms": 10000, "error_cb": lambda e: None})
    p.produce(topic, b"v", on_delivery=lambda err, msg: outcome.append(err))
    p.flush(15)
    assert outcome, f"no delivery report for {topic}"
    return outcome[0]


def logs_in(config: dict) -> bool:
    errors = []
    admin = AdminClient({**config, "error_cb": errors.append})
    try:
        admin.list_topics(timeout=5)
        return True
    except KafkaException:
        return False


def ready(k8s, ns, name, generation=None):
    return ready_check(lambda: k8s.user(ns, name), generation)


def failed(k8s, ns, name):
    return lambda: (u := k8s.user(ns, name)) and (u.get("status") or {}).get("phase") == "Failed" and u


ALICE_ACLS = {"type": "simple", "acls": [
    {"resource": {"type": "topic", "name": "orders"}, "operations": ["Read", "Write", "Describe"]},
    {"resource": {"type": "group", "name": "alice-", "patternType": "prefix"}, "operations": ["Read"]}]}


def test_scram_user_logs_in_with_its_secret_and_its_acls_decide(k8s, namespace, odc):
    ns, (url, bootstrap) = namespace, odc
    k8s.apply_user(ns, "alice", "dev", {"authentication": {"type": "scram-sha-512"}, "authorization": ALICE_ACLS,
                                        "quotas": {"producerByteRate": 1048576, "requestPercentage": 50}})
    u = wait_until(ready(k8s, ns, "alice"), 60, "the user to be Ready", 0.05)
    assert (u["status"]["username"], u["status"]["principal"], u["status"]["secret"]) == ("alice", "User:alice", "alice")
    secret = k8s.child(ns, "Secret", "alice")
    assert secret["metadata"]["ownerReferences"][0]["kind"] == "OdradekUser"
    data = secret_data(k8s, ns, "alice")
    assert len(data["password"]) == 32
    assert data["sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                        f'username="alice" password="{data["password"]}";')
    state = stored(url, "alice")
    assert state.scram == {"SCRAM-SHA-512": 4096}
    assert state.quotas == {"producer_byte_rate": 1048576.0, "request_percentage": 50.0}
    assert len(state.acls) == 4

    config = client_config(bootstrap, "alice", data["password"])
    assert produce(config, "orders") is None
    denied = produce(config, "payroll")
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, denied
    consumer = Consumer({**config, "group.id": f"alice-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["orders"])
        msg = wait_until(lambda: (m := consumer.poll(0.5)) is not None and m.error() is None and m, 30, "a record")
        assert msg.value() == b"v"
    finally:
        consumer.close()

    # drift: ACLs removed behind the operator's back (as kafka-acls --remove would) come back
    call_blocking(url, control_plane_users.put_user("alice", control_plane_users.UserSpec(
        "User:alice", control_plane_users.ScramPassword(data["password"]), quotas=state.quotas)), timeout=5)
    wait_until(lambda: len(stored(url, "alice").acls) == 4, 30, "the operator to restore the ACLs")

    # a user's quota reaches the broker (its config change notification) and throttles it
    k8s.apply_user(ns, "slow", "dev", {"authentication": {"type": "scram-sha-512"}, "quotas": {"producerByteRate": 10},
                                       "authorization": {"type": "simple", "acls": [
                                           {"resource": {"type": "topic", "name": "orders"}, "operations": ["Write"]}]}})
    wait_until(ready(k8s, ns, "slow"), 60, "the slow user")
    throttles = []
    slow = Producer({**client_config(bootstrap, "slow", secret_data(k8s, ns, "slow")["password"]),
                     "throttle_cb": lambda e: throttles.append(e.throttle_time), "linger.ms": 0})
    for _ in range(10):   # 10 B/s: the first few hundred bytes pass (Kafka's 11 one-second samples)
        slow.produce("orders", b"s" * 200)
        slow.flush(15)
        if throttles:
            break
    assert max(throttles, default=0) > 0, throttles

    # the password comes from another Secret once the spec says so; the Secret follows
    k8s.core.create_namespaced_secret(ns, {"metadata": {"name": "alice-pw"},
                                           "stringData": {"pw": "alice-chosen-secret"}})
    cr = k8s.apply_user(ns, "alice", "dev", {
        "authentication": {"type": "scram-sha-512",
                           "password": {"valueFrom": {"secretKeyRef": {"name": "alice-pw", "key": "pw"}}}},
        "authorization": ALICE_ACLS})
    wait_until(ready(k8s, ns, "alice", cr["metadata"]["generation"]), 60, "the new password")
    assert secret_data(k8s, ns, "alice")["password"] == "alice-chosen-secret"
    assert stored(url, "alice").quotas == {}
    assert not logs_in(client_config(bootstrap, "alice", data["password"]))
    assert produce(client_config(bootstrap, "alice", "alice-chosen-secret"), "orders") is None

    # deletion: the login fails and the ACLs are gone
    k8s.delete(k8s.cr_path(ns, "odradekusers", "alice"))
    wait_until(lambda: k8s.user(ns, "alice") is None, 30, "the OdradekUser to go (finalizer)")
    state = stored(url, "alice")
    assert (state.scram, state.acls, state.quotas) == ({}, (), {})
    assert not logs_in(client_config(bootstrap, "alice", "alice-chosen-secret"))


def test_bad_user_specs_get_a_clear_status_and_change_nothing(k8s, namespace, odc):
    ns, (url, _) = namespace, odc
    k8s.apply_user(ns, "bob", "dev", {"authentication": {"type": "scram-sha-512"}, "authorization": {
        "type": "simple", "acls": [{"resource": {"type": "topic", "name": "orders"}, "operations": ["Read"]},
                                   {"resource": {"type": "topic", "name": "orders"}, "operations": ["Fly"]}]}})
    u = wait_until(failed(k8s, ns, "bob"), 30, "the unknown operation to be refused")
    c = condition(u, "Ready")
    assert c["status"] == "False" and c["reason"] == "INVALID_REQUEST"
    assert "unknown ACL operation 'Fly'" in c["message"], c
    assert k8s.child(ns, "Secret", "bob") is None
    state = stored(url, "bob")
    assert (state.scram, state.acls) == ({}, ())

    k8s.apply_user(ns, "carol", "dev", {"authorization": {"type": "simple", "acls": [
        {"resource": {"type": "queue", "name": "x"}, "operations": ["Read"]}]}})
    u = wait_until(failed(k8s, ns, "carol"), 30, "the unknown resource type to be refused")
    assert "unknown ACL resource type 'queue'" in condition(u, "Ready")["message"]

    # (not a bad spec: a tls user gets a certificate of the cluster's clients CA, CN=dave)
    k8s.apply_user(ns, "dave", "dev", {"authentication": {"type": "tls"}})
    assert wait_until(ready(k8s, ns, "dave"), 30, "the tls user")["status"]["principal"] == "User:CN=dave"
    data, ca = secret_data(k8s, ns, "dave"), secret_data(k8s, ns, "dev-clients-ca-cert")["ca.crt"]
    assert set(data) == {"user.crt", "user.key", "ca.crt"} and data["ca.crt"] == ca
    cert = x509.load_pem_x509_certificate(data["user.crt"].encode())
    assert cert.subject.rfc4514_string() == "CN=dave"
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.encode()))

    k8s.apply_user(ns, "erin", "dev", {"authentication": {"type": "scram-sha-512", "password": {
        "valueFrom": {"secretKeyRef": {"name": "missing", "key": "pw"}}}}})
    u = wait_until(lambda: (x := k8s.user(ns, "erin")) and condition(x, "NotReady") and x, 30, "NotReady")
    assert "Secret" in condition(u, "NotReady")["message"] and "missing" in condition(u, "NotReady")["message"]
    assert stored(url, "erin").scram == {}
    for name in ("bob", "carol", "dave", "erin"):
        k8s.delete(k8s.cr_path(ns, "odradekusers", name))
    wait_until(lambda: all(k8s.user(ns, n) is None for n in ("bob", "carol", "dave", "erin")), 30, "deletions")


def test_kubectl_explain_documents_the_user_spec(k8s, k8s_bins, control_plane, tmp_path):
    def explain():   # the short name reaches discovery a moment after the CRD is established
        proc = subprocess.run([str(need(k8s_bins, "kubectl")), "explain", "odu.spec.authorization.acls"],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, **control_plane.env(), "KUBECACHEDIR": str(tmp_path)})
        return proc.returncode == 0 and proc
    proc = wait_until(explain, 30, "kubectl explain odu", 1.0)
    assert "KIND:" in proc.stdout and "OdradekUser" in proc.stdout
    for field in ("resource", "operations", "host", "IdempotentWrite"):
        assert field in proc.stdout, proc.stdout


# -- issue 30: the operator cannot be turned against Secrets it does not own ---------------------

def test_a_user_named_like_a_secret_it_does_not_own_is_refused_and_the_secret_untouched(k8s, namespace, odc):
    """An OdradekUser named like the cluster's ZooKeeper digest Secret, or like a Secret someone
    else made, would have taken it over (forced apply stripping its keys, garbage collection with
    the user), and one whose password source is the digest Secret would have copied it into its
    own: refused with SecretConflict, nothing written, nothing collected."""
    ns, (url, _) = namespace, odc
    digest = wait_until(lambda: k8s.child(ns, "Secret", "dev-zookeeper-digest"), 30, "the cluster's digest Secret")
    k8s.core.create_namespaced_secret(ns, {"metadata": {"name": "payments-db"}, "stringData": {"password": "hunter2"}})
    theirs = k8s.child(ns, "Secret", "payments-db")
    for name in ("dev-zookeeper-digest", "payments-db"):
        k8s.apply_user(ns, name, "dev", {"authentication": {"type": "scram-sha-512"}})
        u = wait_until(failed(k8s, ns, name), 30, f"{name} refused")
        c = condition(u, "Ready")
        assert (c["status"], c["reason"]) == ("False", "SecretConflict"), c
        assert stored(url, name).scram == {}   # no credential made from the Secret's password
    assert "is named like a Secret of OdradekCluster dev" in condition(k8s.user(ns, "dev-zookeeper-digest"),
                                                                          "Ready")["message"]
    assert "is not owned by OdradekUser payments-db" in condition(k8s.user(ns, "payments-db"), "Ready")["message"]
    # nor copied out of the cluster's Secrets through a password source
    k8s.apply_user(ns, "copier", "dev", {"authentication": {"type": "scram-sha-512", "password": {
        "valueFrom": {"secretKeyRef": {"name": "dev-zookeeper-digest", "key": "credentials"}}}}})
    c = condition(wait_until(failed(k8s, ns, "copier"), 30, "the copy refused"), "Ready")
    assert c["reason"] == "SecretConflict" and "must come from a Secret of your own" in c["message"], c
    assert k8s.child(ns, "Secret", "copier") is None and stored(url, "copier").scram == {}
    for before in (digest, theirs):
        after = k8s.child(ns, "Secret", before["metadata"]["name"])
        assert (after["data"], after["metadata"]["resourceVersion"], after["metadata"].get("ownerReferences")) == \
            (before["data"], before["metadata"]["resourceVersion"], before["metadata"].get("ownerReferences"))
    for name in ("dev-zookeeper-digest", "payments-db", "copier"):
        k8s.delete(k8s.cr_path(ns, "odradekusers", name))
    wait_until(lambda: all(k8s.user(ns, n) is None for n in ("dev-zookeeper-digest", "payments-db", "copier")), 30,
               "deletions")
    # not theirs to collect: no owner reference of a user was ever added
    assert k8s.child(ns, "Secret", "payments-db")["data"] == theirs["data"]
    assert k8s.child(ns, "Secret", "dev-zookeeper-digest")["metadata"]["ownerReferences"] == \
        digest["metadata"]["ownerReferences"]


def test_an_http_controller_url_is_ignored_and_no_password_sent_there(k8s, operator, namespace):
    """``odradek.dev/controller-url`` naming plain http outside the namespace (here loopback by
    another name than the one the test operator trusts): the operator keeps to the controller
    Service (none runs here), says so on the cluster, and never calls the URL."""
    from tests.support.fake_peers import serve_json
    server, url = serve_json(lambda method, path, body: (404, {}))
    try:
        # The session's operator still calls the fake controllers of earlier tests, by
        # 127.0.0.1 and a port this server may have been given again: a call to the lured URL
        # is one addressed to localhost.
        collector = url.replace("127.0.0.1", "localhost")
        k8s.apply_cluster(namespace, "lured", {"zookeeper": {"external": {"connect": "zk:2181"}}},
                          {"odradek.dev/controller-url": collector})
        cr = wait_until(lambda: condition(k8s.cluster(namespace, "lured"), "ControllerUrlRefused")
                        and k8s.cluster(namespace, "lured"), 30, "the refusal on the cluster")
        c = condition(cr, "ControllerUrlRefused")
        assert c["status"] == "True" and c["reason"] == "UntrustedControllerUrl" and "is not https" in c["message"], c
        k8s.apply_user(namespace, "victim", "lured", {"authentication": {"type": "scram-sha-512"}})
        u = wait_until(lambda: (x := k8s.user(namespace, "victim")) and condition(x, "NotReady") and x, 30, "NotReady")
        assert "no controller endpoints" in condition(u, "NotReady")["message"], condition(u, "NotReady")
        lured = [r for r in server.requests if r[1].startswith("localhost")]
        assert lured == [], server.requests
    finally:
        server.shutdown()
        server.server_close()


def test_the_gateways_principal_is_granted_the_schema_registrys_acls_which_suffice(k8s, operator, namespace,
                                                                                   scram_cluster, tmp_path):
    """On a cluster with authorization the operator grants the gateway's certificate principal the
    registry's ACLs (gateway_acls); a gateway whose principal has exactly those, on brokers that
    deny what no ACL allows, runs its registry: registers and reads a schema."""
    (st, bootstrap), ns = scram_cluster, namespace
    url = st["controller_url"]
    k8s.apply_cluster(ns, "gwacl", {"brokers": {"replicas": 1}, "controller": {"replicas": 1},
                                    "zookeeper": {"external": {"connect": st["zookeeper"]}},
                                    "listeners": [{"name": "scram", "port": 9092, "tls": False,
                                                   "authentication": {"type": "scram-sha-512"}}],
                                    "authorization": {"type": "simple"}, "gateway": {"replicas": 1}},
                      {"odradek.dev/controller-url": url})
    wanted = set(gateway_acls.registry_acls())
    wait_until(lambda: set(stored(url, "CN=gwacl-gateway,O=odradek", "User:CN=gwacl-gateway,O=odradek").acls)
               == wanted, 90, "the operator to grant the gateway's principal the registry's ACLs")

    topic, group = f"schemas-{uuid.uuid4().hex[:6]}", f"registry-{uuid.uuid4().hex[:6]}"
    call_blocking(url, control_plane_users.put_user("registry", control_plane_users.UserSpec(
        "User:registry", control_plane_users.ScramPassword("registry-secret"),
        gateway_acls.registry_acls(topic, group))), timeout=5)
    (tmp_path / "registry.pw").write_text("registry-secret\n")
    gateway = GatewayProcess(bootstrap, tmp_path / "gateway.log", "--kafka-security-protocol", "SASL_PLAINTEXT",
                             "--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-username", "registry",
                             "--kafka-sasl-password-file", str(tmp_path / "registry.pw"),
                             "--schema-registry-topic", topic, "--schema-registry-group", group)
    try:
        media = {"content-type": "application/vnd.schemaregistry.v1+json"}
        answer = httpx.post(f"{gateway.url}/subjects/orders-value/versions", json={"schema": '"string"'},
                            headers=media, timeout=90)
        assert answer.status_code == 200, (answer.text, gateway.log.read_text()[-3000:])
        assert httpx.get(f"{gateway.url}/schemas/ids/{answer.json()['id']}", timeout=30).json() == {"schema": '"string"'}
    finally:
        gateway.stop()
