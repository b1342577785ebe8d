"""The secured dev cluster: ``odradek dev up --security sasl_ssl``.

Under ``<data-dir>/security`` it makes a CA and the brokers' certificate (``odradek.certs``),
an admin password, and ``client.properties`` (Kafka's ``--command-config`` file). Every
broker then has one listener, ``SASL_SSL://127.0.0.1:<port>``, SCRAM-SHA-512 only, which is
both the client listener and the inter-broker listener (the brokers log in as ``admin``); the
ACL authorizer is on with ``super.users=User:admin``. ``admin``'s SCRAM credential is written
to ZooKeeper (``/config/users/admin``, as ``kafka-configs --zookeeper`` would) after ZooKeeper
starts and before any broker does, so the brokers' own logins succeed from the first fetch.
The HTTP gateway serves HTTPS (``gateway.pem``, from the same CA) and requires a bearer token
(``--require-auth``): ``dev up`` makes one for the admin (``gateway_token`` in the security
block), mapped in ``gateway-tokens.json`` to ``admin``'s SCRAM credential, so the gateway's
requests reach the brokers as ``User:admin`` and as no one without the token.

The cluster's own traffic is secured as well (``cluster_config``, given to the controllers
and the brokers): the internal HTTP APIs take mutual TLS with the brokers' certificate
(``control.plane.ssl.*``, only that certificate's CN admitted), and every process
authenticates to ZooKeeper with a digest and creates znodes with Kafka's ACLs
(``zookeeper.set.acl``); the admin's credential is written with the same digest. ZooKeeper
serves TLS only (``zookeeper_tls``: the same certificate, a client certificate from the CA
required) and every process connects with it (``zookeeper.ssl.*``).

The security block (``status --json``'s ``"security"``) is what every dev tool reads to
connect (``odradek.dev.access.KafkaAccess``).
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path

from odradek.cluster import paths, zk_session
from odradek.cluster.zk_session import ZkSecurity, ZkTimeouts
from odradek.config.cluster_security import (CONTROL_PLANE_KEYSTORE, CONTROL_PLANE_PEER_CN, CONTROL_PLANE_TRUSTSTORE,
                                             ZK_SET_ACL, ZK_SSL_CLIENT_ENABLE, ZK_SSL_KEYSTORE, ZK_SSL_TRUSTSTORE)
from odradek.config.cluster_security import ZK_DIGEST_FILE as ZK_DIGEST_FILE_KEY
from odradek.dev.access import KafkaAccess, jaas_config
from odradek.certs import CertificateAuthority
from odradek.dev.zookeeper import ServerTls

CHOICES = ("none", "sasl_ssl")
PROTOCOL, MECHANISM, LISTENER = "SASL_SSL", "SCRAM-SHA-512", "SASL_SSL"
ADMIN = "admin"
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"   # Kafka's name: turns Odradek's authorizer on
DIRECTORY = "security"
PASSWORD_FILE = "admin.password"
ZK_DIGEST_FILE = "zookeeper.digest"
PROCESS_CN = "odradek-broker"    # the one certificate of the dev cluster's processes
GATEWAY_TOKENS, GATEWAY_CERT = "gateway-tokens.json", "gateway.pem"


def prepare(root: Path) -> dict:
    """Certificates, the admin password and the client properties file: the security block."""
    directory = root / DIRECTORY
    directory.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority.create("Odradek dev CA")
    ca.write_ca(directory / "ca.pem")
    ca.write_issued(directory / "broker.pem", "127.0.0.1", "localhost", common_name=PROCESS_CN)
    block = {"protocol": PROTOCOL, "mechanism": MECHANISM, "ca_file": str(directory / "ca.pem"),
             "username": ADMIN, "password": secrets.token_urlsafe(18),
             "client_properties": str(directory / "client.properties"),
             "gateway_token": secrets.token_urlsafe(24)}
    ca.write_issued(directory / GATEWAY_CERT, "127.0.0.1", "localhost", common_name="odradek-gateway")
    for path, text in ((Path(block["client_properties"]), KafkaAccess("", block).properties()),
                       (directory / PASSWORD_FILE, block["password"]),
                       (directory / GATEWAY_TOKENS, gateway_tokens(block)),
                       (directory / ZK_DIGEST_FILE, f"odradek:{secrets.token_urlsafe(18)}\n")):
        path.touch(mode=0o600, exist_ok=True)   # they hold passwords
        path.write_text(text)
    return block


def broker_config(block: dict, port: int) -> list[str]:
    """A broker's ``--config`` entries: its one SASL_SSL listener on ``port`` and the rest."""
    directory = Path(block["ca_file"]).parent
    settings = {
        "listeners": f"{LISTENER}://127.0.0.1:{port}",
        "inter.broker.listener.name": LISTENER,
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        f"listener.name.{LISTENER.lower()}.{MECHANISM.lower()}.sasl.jaas.config":
            jaas_config(MECHANISM, block["username"], block["password"]),
        "ssl.keystore.location": str(directory / "broker.pem"),
        "ssl.truststore.location": block["ca_file"],
        "authorizer.class.name": AUTHORIZER,
        "super.users": f"User:{block['username']}",
    }
    return [f"{k}={v}" for k, v in settings.items()]


def cluster_config(block: dict) -> list[str]:
    """``--config`` entries for the controllers and the brokers alike: control-plane mutual TLS,
    ZooKeeper over TLS and its digest authentication with Kafka's znode ACLs."""
    directory = Path(block["ca_file"]).parent
    settings = {CONTROL_PLANE_KEYSTORE: str(directory / "broker.pem"), CONTROL_PLANE_TRUSTSTORE: block["ca_file"],
                CONTROL_PLANE_PEER_CN: re.escape(PROCESS_CN),
                ZK_SET_ACL: "true", ZK_DIGEST_FILE_KEY: str(directory / ZK_DIGEST_FILE),
                ZK_SSL_CLIENT_ENABLE: "true", ZK_SSL_KEYSTORE: str(directory / "broker.pem"),
                ZK_SSL_TRUSTSTORE: block["ca_file"]}
    return [f"{k}={v}" for k, v in settings.items()]


def zookeeper_tls(block: dict | None) -> ServerTls | None:
    """ZooKeeper's TLS server side (None without security): the processes' certificate, and
    only clients with a certificate from the dev CA."""
    if block is None:
        return None
    return ServerTls(str(Path(block["ca_file"]).parent / "broker.pem"), block["ca_file"])


def gateway_tokens(block: dict) -> str:
    """The gateway's tokens file: the admin's token, acting on the brokers as ``admin``."""
    return json.dumps({"tokens": [{"token": block["gateway_token"], "name": block["username"],
                                   "kafka_username": block["username"], "kafka_password_file": PASSWORD_FILE}]})


def gateway_arguments(block: dict) -> list[str]:
    """The gateway's options: HTTPS, a token required on every route, and its ``--kafka-*``
    options (it reaches the brokers over SASL_SSL; each request as its token's user)."""
    directory = Path(block["ca_file"]).parent
    return ["--kafka-security-protocol", block["protocol"], "--kafka-sasl-mechanism", block["mechanism"],
            "--kafka-sasl-username", block["username"],
            "--kafka-sasl-password-file", str(directory / PASSWORD_FILE),
            "--kafka-ssl-ca-location", block["ca_file"],
            "--auth-file", str(directory / GATEWAY_TOKENS), "--require-auth",
            "--ssl-certfile", str(directory / GATEWAY_CERT), "--ssl-keyfile", str(directory / GATEWAY_CERT)]


def create_admin(zookeeper: str, cluster: str, block: dict, timeouts: ZkTimeouts = ZkTimeouts()) -> None:
    """Write the admin's SCRAM credential into the cluster's ZooKeeper chroot."""
    from odradek.broker.security.scram_store import ScramStore
    from odradek.broker.zk.configs import EntityConfigs
    from odradek.broker.zk.znodes import Znodes
    zk_security = ZkSecurity.from_settings(dict(c.split("=", 1) for c in cluster_config(block)))
    zk_session.ensure_chroot(zookeeper, cluster, timeouts, zk_security)
    zk = zk_session.client(zookeeper, timeouts, paths.chroot(cluster), zk_security)
    zk.start(timeout=timeouts.connection_s)
    try:
        ScramStore(EntityConfigs(Znodes(lambda: zk))).set_password(block["username"], block["mechanism"], block["password"])
    finally:
        zk.stop()
        zk.close()


def summary(block: dict) -> str:
    """The lines ``dev up`` and ``dev status`` print about the cluster's security."""
    return (f"  security:          {block['protocol']} ({block['mechanism']}), user {block['username']!r}, "
            f"password {block['password']!r}\n"
            f"  CA certificate:    {block['ca_file']}\n"
            f"  gateway token:     {block['gateway_token']!r} (Authorization: Bearer; https, the CA above)\n"
            f"  client properties: {block['client_properties']} (Kafka tools: --command-config)")
