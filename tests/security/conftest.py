"""A secured three-broker cluster shared by the security tests: the PLAINTEXT listener of
``--listen`` (the harness's), SECURE (SASL_SSL), MTLS (SSL, client certificates requested),
INTERNAL (SASL_SSL with PLAIN, the inter-broker listener), REPL (SSL, client certificates
required by ``listener.name.repl.ssl.client.auth``) and REAUTH (SASL_SSL with PLAIN, sessions of
``REAUTH_MS``: ``listener.name.reauth.connections.max.reauth.ms``); certificates from
``odradek.certs``.

The ACL authorizer is on, with the brokers' own principal (``User:admin``, their inter-broker
PLAIN login) as the super user Kafka requires for replication. ``allow.everyone.if.no.acl.found``
is true so that tests of other areas, whose topics and groups carry no ACLs, are not affected;
tests/security/test_acls.py puts ACLs on its own ``acl-`` resources (and tests default-deny there).
The PLAIN users ``ana`` and ``bert`` are test_acls.py's restricted principals."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from odradek.certs import CertificateAuthority
from odradek.dev.harness import Cluster, start_cluster, stop_cluster

PLAIN_USERS = {"admin": "admin-secret", "paula": "paula-secret", "ana": "ana-secret", "bert": "bert-secret"}
REAUTH_MS = 3000
INTERNAL_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
                 'password="admin-secret" ' + " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items()) + ";")


@dataclass
class Secured:
    cluster: Cluster
    ca_file: str
    client_cert: str          # PEM chain + key of CN=alice, from the cluster's CA
    stranger_cert: str        # PEM chain + key from another CA
    endpoints: dict[str, list[str]]   # listener -> host:port of every broker

    def bootstrap(self, listener: str) -> str:
        return ",".join(self.endpoints[listener])


def listener_endpoints(data_dir: Path, brokers: int) -> dict[str, list[str]]:
    """Each broker's listeners, as its start-up log line states them."""
    out: dict[str, list[str]] = {}
    for b in range(1, brokers + 1):
        text = next((data_dir / "logs").glob(f"broker-{b}*.log")).read_text()
        line = re.search(r"serving Kafka on (.*), internal API", text).group(1)
        for name, address in re.findall(r"(\w+)://([\d.]+:\d+)", line):
            out.setdefault(name, []).append(address)
    return out


@pytest.fixture(scope="package")
def secured(tmp_path_factory) -> Secured:
    certs = tmp_path_factory.mktemp("certs")
    ca, other_ca = CertificateAuthority.create(), CertificateAuthority.create("another CA")
    ca.write_ca(certs / "ca.pem")
    ca.write_issued(certs / "broker.pem", "127.0.0.1", "localhost")
    ca.write_issued(certs / "alice.pem", "alice@example.com", common_name="alice", organization="Example",
                    unit="eng")
    other_ca.write_issued(certs / "mallory.pem", "mallory@example.com", common_name="mallory")
    config = {
        "listeners": "SECURE://127.0.0.1:0,MTLS://127.0.0.1:0,INTERNAL://127.0.0.1:0,REPL://127.0.0.1:0,"
                     "REAUTH://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL,MTLS:SSL,INTERNAL:SASL_SSL,REPL:SSL,"
                                          "REAUTH:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": INTERNAL_JAAS,
        "listener.name.secure.plain.sasl.jaas.config": INTERNAL_JAAS,
        "listener.name.reauth.plain.sasl.jaas.config": INTERNAL_JAAS,
        "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
        "listener.name.repl.ssl.client.auth": "required",
        "ssl.keystore.location": str(certs / "broker.pem"),
        "ssl.truststore.location": str(certs / "ca.pem"),
        "ssl.client.auth": "requested",
        "group.initial.rebalance.delay.ms": "0",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "true",
    }
    data_dir = tmp_path_factory.mktemp("secured")
    cluster = start_cluster(data_dir, brokers=3, min_insync_replicas=2,
                            extra=tuple(arg for k, v in config.items() for arg in ("--config", f"{k}={v}")))
    try:
        yield Secured(cluster, str(certs / "ca.pem"), str(certs / "alice.pem"), str(certs / "mallory.pem"),
                      listener_endpoints(data_dir, 3))
    finally:
        stop_cluster(cluster)


@pytest.fixture(scope="package")
def dev_secured(tmp_path_factory) -> Cluster:
    """``odradek dev up --security sasl_ssl`` with its gateway: RF 3, min.insync.replicas 2, shared by
    test_dev_secured.py and the hostile-tenant modules (test_hostile_*.py)."""
    # 10 s ZooKeeper sessions, as the verify runs' clusters (Kafka's default is 18 s): a SIGKILLed broker
    # keeps its leaderships, and its restart waits, until its session expires (leader kills, a coordinator move)
    c = start_cluster(tmp_path_factory.mktemp("dev-secured"), brokers=3, replication_factor=3,
                      min_insync_replicas=2, gateway=True,
                      extra=("--security", "sasl_ssl", "--config", "zookeeper.session.timeout.ms=10000"))
    try:
        yield c
    finally:
        stop_cluster(c)
