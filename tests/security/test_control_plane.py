"""The cluster's own traffic secured (issue 17, item 4): mutual TLS on the internal HTTP APIs
of the controller and the brokers, ZooKeeper digest authentication and Kafka's znode ACLs.

One two-broker dev cluster for the module, with ``control.plane.ssl.*``, ``zookeeper.set.acl``
and ``zookeeper.digest.credentials.file`` on (certificates from ``odradek.certs``, as the
package's conftest makes them). It still elects leaders, creates topics and replicates; forged pushes
to the controller's and a broker's API are refused and logged, and change nothing: plain
HTTP, no client certificate and a certificate from another CA at the TLS layer, a certificate
of the cluster CA whose CN is not one of the cluster's processes with 403 before any handler.
A ZooKeeper client without the digest reads Odradek's znodes but cannot change them, nor read
credentials.
"""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import Permissions

from odradek.cluster import control_plane as cp
from odradek.cluster import paths
from odradek.cluster.control_plane_http import call_blocking, send_blocking
from odradek.cluster.control_plane_tls import ControlPlaneTls
from odradek.certs import CertificateAuthority
from odradek.dev.harness import Cluster, start_cluster, stop_cluster
from odradek.dev.waiting import wait_until

TOPIC = "guarded"
ZK_USER, ZK_PASSWORD = "odradek", "zk-secret"
REFUSED = "refused the connection from 127.0.0.1:"


@dataclass
class Guarded:
    cluster: Cluster
    tls: ControlPlaneTls      # the cluster's own identity: what a legitimate peer presents
    ca_file: str
    stranger_cert: str        # chain + key from another CA
    user_cert: str            # chain + key of CN=alice from the cluster CA
    controller_url: str
    broker_url: str           # broker 1's internal API

    def logs(self) -> str:
        return "".join(p.read_text(errors="replace") for p in (self.cluster.data_dir / "logs").glob("*.log"))


@pytest.fixture(scope="module")
def guarded(tmp_path_factory) -> Guarded:
    certs = tmp_path_factory.mktemp("plane-certs")
    ca, other_ca = CertificateAuthority.create(), CertificateAuthority.create("another CA")
    ca.write_ca(certs / "ca.pem")
    ca.write_issued(certs / "odradek.pem", "127.0.0.1", "localhost", common_name="odradek")
    # a Kafka user's certificate from the same CA: not a process of the cluster
    ca.write_issued(certs / "alice.pem", "alice@example.com", common_name="alice")
    other_ca.write_issued(certs / "stranger.pem", "127.0.0.1", common_name="odradek")
    (certs / "zk-digest").write_text(f"{ZK_USER}:{ZK_PASSWORD}\n")
    config = {"control.plane.ssl.keystore.location": str(certs / "odradek.pem"),
              "control.plane.ssl.truststore.location": str(certs / "ca.pem"),
              "control.plane.ssl.peer.common.name.pattern": "odradek|broker-[0-9]+",
              "zookeeper.set.acl": "true",
              "zookeeper.digest.credentials.file": str(certs / "zk-digest")}
    cluster = start_cluster(tmp_path_factory.mktemp("guarded"), brokers=2,
                            extra=tuple(a for k, v in config.items() for a in ("--config", f"{k}={v}")))
    try:
        tls = ControlPlaneTls.from_settings(config)
        url = cluster.status()["controller_url"]
        view = call_blocking(url, cp.cluster(), timeout=10, tls=tls)
        broker_url = next(b.internal_url for b in view.metadata.brokers if b.id == 1)
        yield Guarded(cluster, tls, str(certs / "ca.pem"), str(certs / "stranger.pem"), str(certs / "alice.pem"),
                      url, broker_url)
    finally:
        stop_cluster(cluster)


@pytest.fixture(scope="module")
def topic(guarded: Guarded) -> str:
    guarded.cluster.create_topic(TOPIC, partitions=2, replication_factor=2)
    return TOPIC


def _metadata(guarded: Guarded):
    return call_blocking(guarded.controller_url, cp.cluster(), timeout=10, tls=guarded.tls).metadata


def test_the_secured_cluster_elects_creates_and_replicates(guarded: Guarded, topic: str):
    from confluent_kafka import Consumer, Producer
    assert guarded.controller_url.startswith("https://") and guarded.broker_url.startswith("https://")
    producer = Producer({"bootstrap.servers": guarded.cluster.bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce(topic, value=b"v%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    wait_until(lambda: all(len(p.isr) == 2 for p in _metadata(guarded).topic(topic).partitions), 30,
               "both replicas of every partition in the ISR")
    consumer = Consumer({"bootstrap.servers": guarded.cluster.bootstrap, "group.id": "guarded",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen: list[bytes] = []
    wait_until(lambda: (m := consumer.poll(1)) is not None and not m.error() and seen.append(m.value())
               or len(seen) >= 20, 60, "the 20 records back")
    consumer.close()


def _forger_contexts(guarded: Guarded) -> dict[str, ssl.SSLContext | None]:
    """How a forger reaches a TLS API: plain HTTP (None), TLS without a client certificate, TLS
    with a certificate from another CA (each trusting the server, to reach the client check)."""
    anonymous = ssl.create_default_context(cafile=guarded.ca_file)
    stranger = ssl.create_default_context(cafile=guarded.ca_file)
    stranger.load_cert_chain(guarded.stranger_cert)
    return {"plain HTTP": None, "no client certificate": anonymous, "another CA": stranger}


def _refused(url: str, request: cp.Request, context: ssl.SSLContext | None) -> bool:
    """True when the call does not get through (no HTTP answer at all)."""
    if context is None:
        url = url.replace("https://", "http://")
    data = None if request.body is None else json.dumps(request.body).encode()
    req = urllib.request.Request(url + request.path, data=data, method=request.method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as resp:
            resp.read()
    except urllib.error.HTTPError:
        return False  # an HTTP answer: the request reached the application
    except (urllib.error.URLError, ssl.SSLError, ConnectionError, http.client.HTTPException):
        return True
    return False


def test_forged_pushes_are_refused_and_change_nothing(guarded: Guarded, topic: str):
    before = _metadata(guarded)
    forged_snapshot = replace(before, controller_id="forger", controller_epoch=before.controller_epoch + 1000,
                              topics=())
    forged = {guarded.broker_url: cp.push_metadata(forged_snapshot),
              guarded.controller_url: cp.delete_topic(topic)}
    for url, request in forged.items():
        for how, context in _forger_contexts(guarded).items():
            assert _refused(url, request, context), f"{how} to {url} got through"
    wait_until(lambda: guarded.logs().count(REFUSED) >= 6, 10, "the six refusals logged")
    assert all(" WARNING " in line for line in guarded.logs().splitlines() if REFUSED in line)
    user = ssl.create_default_context(cafile=guarded.ca_file)
    user.load_cert_chain(guarded.user_cert)
    for url, request in forged.items():  # TLS passes; the CN check refuses before any handler runs
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(url + request.path, method=request.method,
                                                          data=json.dumps(request.body or {}).encode()),
                                   timeout=10, context=user)
        assert refused.value.code == 403 and json.loads(refused.value.read())["error_code"] == 31
    assert guarded.logs().count("does not match odradek|broker-[0-9]+") == 2
    after = _metadata(guarded)
    assert after.topic(topic) == before.topic(topic) and after.controller_epoch == before.controller_epoch
    status, answer = send_blocking(guarded.broker_url, cp.status(), timeout=10, tls=guarded.tls)
    assert status == 200 and {(p["topic"], p["partition"]) for p in answer["partitions"]} >= {(topic, 0), (topic, 1)}


def _zk(guarded: Guarded, auth: bool = False) -> KazooClient:
    """A session on the cluster's chroot: a stranger's, or with Odradek's digest (``auth``)."""
    status = guarded.cluster.status()
    zk = KazooClient(hosts=status["zookeeper"] + paths.chroot(status["cluster"]),
                     auth_data=[("digest", f"{ZK_USER}:{ZK_PASSWORD}")] if auth else None)
    zk.start(timeout=30)
    return zk


def test_zookeeper_acls_let_others_read_but_not_write(guarded: Guarded, topic: str):
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    admin = guarded.cluster.admin()
    upsert = UserScramCredentialUpsertion("zk-acl-user", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          b"password")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=60)
    zk = _zk(guarded)
    try:
        assert zk.get(paths.topic(topic))[0]  # world READ
        assert sorted(zk.get_children(paths.BROKER_IDS)) == ["1", "2"]
        acl, _ = zk.get_acls(paths.topic(topic))
        assert {(a.id.scheme, a.perms) for a in acl} == {("digest", Permissions.ALL), ("world", Permissions.READ)}
        assert next(a.id.id for a in acl if a.id.scheme == "digest").startswith(ZK_USER + ":")
        for forgery in (lambda: zk.set(paths.topic(topic), b"{}"),
                        lambda: zk.delete(paths.CONTROLLER),
                        lambda: zk.create(paths.broker(99), b"{}", ephemeral=True),
                        lambda: zk.create(paths.delete_topic(topic), b"{}"),
                        lambda: zk.get("/config/users/zk-acl-user")):  # a sensitive path: creator only
            with pytest.raises(NoAuthError):
                forgery()
    finally:
        zk.stop()
        zk.close()
    odradek = _zk(guarded, auth=True)  # reading a sensitive znode's ACL needs its creator's identity too
    try:
        assert {(a.id.scheme, a.perms) for a in odradek.get_acls("/config/users/zk-acl-user")[0]} == {
            ("digest", Permissions.ALL)}
    finally:
        odradek.stop()
        odradek.close()
    assert _metadata(guarded).topic(topic) is not None
