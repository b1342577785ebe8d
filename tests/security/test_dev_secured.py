"""``odradek dev up --security sasl_ssl`` (issue 17, item 6), on one shared cluster: RF 3,
min.insync.replicas 2, every broker with one SASL_SSL listener (SCRAM-SHA-512) for clients
and replication, the authorizer on, ``admin`` the super user.

- the cluster's own traffic: the controller's API over mutual TLS (https); ZooKeeper TLS only,
  a certificate from the cluster CA required (plaintext and a stranger's certificate refused),
  its root locked to the cluster's principals;
- ``dev status --json``'s security block, and its client properties file with Kafka's own
  ``kafka-topics --command-config``;
- ``odradek users`` and ``odradek acls`` against it; the HTTP gateway, which reaches it over SASL_SSL
  and serves HTTPS to callers with the admin's token (test_hostile_gateway.py: none without one);
- a short leader-kill ``odradek verify`` over SASL_SSL, idempotent producers: 0 lost,
  0 duplicated, 0 reordered.
"""

from __future__ import annotations

import json
import os
import random
import ssl
import subprocess
import sys
import urllib.request

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry
from kazoo.security import Permissions

from odradek.certs import CertificateAuthority
from odradek.cluster import paths, zk_session
from odradek.cluster.zk_session import LOCKED_OUTSIDE_CHROOT, ZkSecurity, ZkTimeouts
from odradek.cluster.zk_tls import ZkTls
from odradek.dev import security as dev_security
from odradek.dev.access import KafkaAccess
from odradek.dev.harness import Cluster
from odradek.verify import Config, run
from tests.support.kafka_tools import TOPIC_COMMAND, Endpoint, require_kafka

KILLS = 3


@pytest.fixture
def cluster(dev_secured) -> Cluster:
    return dev_secured


def odradek(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odradek.cli", *args], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def as_user(cluster: Cluster, user: str, password: str) -> AdminClient:
    return AdminClient(KafkaAccess(cluster.bootstrap, {**cluster.security, "username": user,
                                                       "password": password}).confluent())


def test_status_reports_the_security_block(cluster):
    security = cluster.status()["security"]
    assert {k: security[k] for k in ("protocol", "mechanism", "username")} == {
        "protocol": "SASL_SSL", "mechanism": "SCRAM-SHA-512", "username": "admin"}
    assert os.path.exists(security["ca_file"]) and security["password"] and security["gateway_token"]
    assert cluster.status()["gateway"].startswith("https://")
    text = cluster.run("status").stdout
    assert security["client_properties"] in text and "SASL_SSL (SCRAM-SHA-512)" in text


def _refused(zk: KazooClient) -> None:
    """``zk`` never gets a session (kazoo keeps trying until the start timeout)."""
    try:
        with pytest.raises(KazooTimeoutError):
            zk.start(timeout=3)
    finally:
        zk.stop()
        zk.close()


def test_control_plane_and_zookeeper_are_secured(cluster, tmp_path):
    status = cluster.status()
    assert status["controller_url"].startswith("https://"), status
    connect, security = status["zookeeper"], cluster.security
    _refused(KazooClient(hosts=connect, connection_retry=KazooRetry(max_tries=-1, max_delay=0.5)))  # plaintext
    CertificateAuthority.create("a stranger's CA").write_issued(tmp_path / "stranger.pem", "127.0.0.1")
    stranger = ZkSecurity(tls=ZkTls(security["ca_file"], str(tmp_path / "stranger.pem")))
    _refused(zk_session.client(connect, ZkTimeouts(), security=stranger))
    # the processes' certificate from the cluster CA (and no digest): a session, and the root
    # and quota tree writable by the cluster's principals only
    own = ZkSecurity(tls=ZkTls(security["ca_file"], dev_security.zookeeper_tls(security).keystore))
    zk = zk_session.client(connect, ZkTimeouts(), security=own)
    zk.start(timeout=30)
    try:
        assert zk.exists(paths.chroot(status["cluster"]) + "/config/users/admin")
        for path in (*LOCKED_OUTSIDE_CHROOT, "/odradek", paths.chroot(status["cluster"])):
            assert {(a.id.scheme, a.perms) for a in zk.get_acls(path)[0]} == {
                ("digest", Permissions.ALL), ("x509", Permissions.ALL), ("world", Permissions.READ)}, path
    finally:
        zk.stop()
        zk.close()


def test_plaintext_and_wrong_password_are_refused(cluster):
    plaintext = AdminClient({"bootstrap.servers": cluster.bootstrap, "socket.timeout.ms": 3000})
    with pytest.raises(KafkaException):
        plaintext.list_topics(timeout=3)
    with pytest.raises(KafkaException):
        as_user(cluster, "admin", "not-the-password").list_topics(timeout=5)


def test_kafka_topics_takes_the_client_properties(cluster):
    require_kafka()
    cluster.create_topic("listed-by-kafka-topics", partitions=1, replication_factor=3)
    proc = Endpoint("odradek", cluster.bootstrap).tool(
        TOPIC_COMMAND, "--list", "--command-config", cluster.security["client_properties"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "listed-by-kafka-topics" in proc.stdout.split()


def test_the_gateway_produces_over_sasl_ssl(cluster):
    cluster.create_topic("through-the-gateway", partitions=1, replication_factor=3)
    body = json.dumps({"records": [{"value": {"n": 1}}]}).encode()
    request = urllib.request.Request(f"{cluster.gateway}/topics/through-the-gateway", data=body, method="POST",
                                     headers={"Content-Type": "application/vnd.kafka.json.v2+json",
                                              "Authorization": f"Bearer {cluster.security['gateway_token']}"})
    tls = ssl.create_default_context(cafile=cluster.security["ca_file"])   # https, the dev CA's certificate
    with urllib.request.urlopen(request, timeout=30, context=tls) as resp:
        assert json.loads(resp.read())["offsets"][0]["offset"] == 0


def test_users_add_list_remove(cluster):
    data_dir = str(cluster.data_dir)
    assert odradek("users", "add", "carol", "--password", "carol-secret", "--data-dir", data_dir).returncode == 0
    listed = json.loads(odradek("users", "list", "--json", "--data-dir", data_dir).stdout)["users"]
    assert {"user": "carol", "mechanism": "SCRAM-SHA-512", "iterations": 8192} in listed
    assert "admin" in {u["user"] for u in listed}
    as_user(cluster, "carol", "carol-secret").list_topics(timeout=10)   # she logs in
    removed = odradek("users", "remove", "carol", "--bootstrap-server", cluster.bootstrap,
                      "--command-config", cluster.security["client_properties"])
    assert removed.returncode == 0, removed.stderr
    with pytest.raises(KafkaException):
        as_user(cluster, "carol", "carol-secret").list_topics(timeout=5)


def test_acls_add_list_remove(cluster):
    data_dir = str(cluster.data_dir)
    added = odradek("acls", "add", "--allow-principal", "User:dave", "--operation", "Read", "--operation",
                    "Describe", "--topic", "dave-", "--resource-pattern-type", "prefixed", "--data-dir", data_dir)
    assert added.returncode == 0, added.stderr
    listed = json.loads(odradek("acls", "list", "--json", "--principal", "User:dave", "--data-dir", data_dir).stdout)
    assert sorted((a["operation"], a["name"], a["pattern_type"]) for a in listed["acls"]) == [
        ("Describe", "dave-", "Prefixed"), ("Read", "dave-", "Prefixed")]
    removed = odradek("acls", "remove", "--allow-principal", "User:dave", "--topic", "dave-",
                      "--resource-pattern-type", "prefixed", "--json", "--data-dir", data_dir)
    assert removed.returncode == 0, removed.stderr
    assert len(json.loads(removed.stdout)["removed"]) == 2
    assert json.loads(odradek("acls", "list", "--json", "--principal", "User:dave",
                              "--data-dir", data_dir).stdout)["acls"] == []


@pytest.mark.timeout(600)
def test_leader_kills_over_sasl_ssl_lose_and_duplicate_nothing(cluster, tmp_path):
    seed = int(os.environ.get("VERIFY_SEED", random.randrange(1 << 30)))
    print(f"VERIFY_SEED={seed}")
    cfg = Config(data_dir=cluster.data_dir, partitions=3, replication_factor=3, min_insync=2, producers=2,
                 clients=("confluent", "kafka-python"), rate=40, kills=KILLS, faults=("leader",), interval=1.0,
                 downtime=1.0, seed=seed, out=tmp_path / "verify", idempotent=True, session_timeout=10.0)
    report, _ = run(cfg)
    summary = report.summary(True)
    print(summary)
    assert report.faults == {"leader": KILLS}, summary
    assert report.acked > 200, summary
    assert report.lost == [] and report.duplicated == [] and report.reordered == [], summary
    assert report.problems(True) == [], summary


def test_the_schema_registry_serves_over_sasl_ssl_under_the_gateways_tokens(cluster):
    """The registry in the secured gateway: its _schemas topic reached over SASL_SSL, its paths
    under the gateway's tokens (401 without one), Confluent's client with the token registers."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    url = cluster.status()["schema_registry"]
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{url}/subjects", context=ssl.create_default_context(
            cafile=cluster.security["ca_file"]), timeout=30)
    assert refused.value.code == 401
    registry = SchemaRegistryClient({"url": url, "ssl.ca.location": cluster.security["ca_file"],
                                     "bearer.auth.credentials.source": "STATIC_TOKEN",
                                     "bearer.auth.token": cluster.security["gateway_token"],
                                     "bearer.auth.logical.cluster": "-", "bearer.auth.identity.pool.id": "-"})
    schema_id = registry.register_schema("secured-value", Schema('{"type": "string"}', "AVRO"))
    assert "secured-value" in registry.get_subjects() and registry.get_schema(schema_id).schema_str
