"""The managed ZooKeeper ensemble's configuration: ``zoo.cfg`` in the ConfigMap
``<c>-zookeeper-config``, TLS only, as Strimzi runs ZooKeeper (docs/security.md, "ZooKeeper TLS").

- Clients: ``secureClientPort`` 2181 (Netty) and no plaintext client port; a client
  certificate from the cluster CA required (``ssl.clientAuth=need``), which ZooKeeper's X.509
  provider makes the session's ``x509:<subject DN>`` identity. The brokers and the controller
  connect with their own certificates (``client_settings``: Kafka's ``zookeeper.ssl.*``) and
  check the server's against the cluster CA and the client Service's name.
- Quorum: ``sslQuorum=true`` (followers and elections over TLS) with ZooKeeper's own
  certificate (``<c>-zookeeper-certs``, issued by ``certs``) and the cluster CA, client
  certificates required. Host names are not checked, between peers nor of clients (as
  Strimzi): pods have no stable addresses, and the NetworkPolicy and the cluster CA decide who
  may connect.
- Stores are PEM files (``ssl.*.type=PEM``, ZooKeeper 3.5.5+): the certificate, the CA and the
  key in one file (``certs.keystore_file``).

The file is mounted and passed to ``zkServer.sh`` by path, so the image's entrypoint (the
official image's contract: it still writes ``myid`` from ``ZOO_MY_ID``) generates nothing that
is used. Pure functions; ``builders.build_zookeeper`` renders the pod around them.
"""

from __future__ import annotations

import hashlib

from odradek.config.cluster_security import (ZK_SSL_CLIENT_ENABLE, ZK_SSL_ENDPOINT_IDENTIFICATION, ZK_SSL_KEYSTORE,
                                             ZK_SSL_TRUSTSTORE)

CLIENT_PORT = 2181        # the secure client port: the one the Services and connect strings name
PEER_PORT, ELECTION_PORT = 2888, 3888
CONFIG_DIR = "/etc/odradek/zookeeper-config"
CONFIG_FILE = "zoo.cfg"
CERTS_DIR = "/etc/odradek/certs"
# The official image's data directory (its entrypoint writes myid there), on the PersistentVolume.
# The transaction log goes there too (no dataLogDir): the image's /datalog is an emptyDir in the
# pod, and a log there would lose every change since the last snapshot at each restart.
DATA_DIR = "/data"


def config_map_name(cluster: str) -> str:
    return f"{cluster}-zookeeper-config"


def _server(cluster: str, namespace: str, i: int) -> str:
    """``server.<myid>``: the peer's stable name; no client port after ``;`` (TLS only)."""
    return (f"server.{i + 1}={cluster}-zookeeper-{i}.{cluster}-zookeeper-headless.{namespace}.svc"
            f":{PEER_PORT}:{ELECTION_PORT}")


def _stores(prefix: str) -> list[str]:
    return [f"{prefix}.keyStore.location={CERTS_DIR}/zookeeper/zookeeper.pem", f"{prefix}.keyStore.type=PEM",
            f"{prefix}.trustStore.location={CERTS_DIR}/cluster-ca/ca.crt", f"{prefix}.trustStore.type=PEM",
            f"{prefix}.clientAuth=need", f"{prefix}.hostnameVerification=false"]


TICK_MS = 2000   # ZooKeeper's unit of time: sessions expire on its ticks


def zoo_cfg(cluster: str, namespace: str, replicas: int) -> str:
    """``zoo.cfg`` of an ensemble of ``replicas`` servers."""
    lines = [f"dataDir={DATA_DIR}",
             f"tickTime={TICK_MS}", "initLimit=5", "syncLimit=2",
             "autopurge.snapRetainCount=3", "autopurge.purgeInterval=1",
             "maxClientCnxns=60", f"standaloneEnabled={'false' if replicas > 1 else 'true'}",
             "admin.enableServer=false", "4lw.commands.whitelist=srvr,ruok,stat,mntr",
             *(_server(cluster, namespace, i) for i in range(replicas)),
             f"secureClientPort={CLIENT_PORT}",
             "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
             "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider",
             *_stores("ssl"),
             "sslQuorum=true", "portUnification=false", *_stores("ssl.quorum")]
    return "".join(f"{line}\n" for line in lines)


def build_config_map(cluster: str, namespace: str, replicas: int, labels: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": config_map_name(cluster), "namespace": namespace, "labels": labels},
            "data": {CONFIG_FILE: zoo_cfg(cluster, namespace, replicas)}}


def config_hash(config_map: dict) -> str:
    """What a ZooKeeper restart must pick up (the pod template's annotation: a change rolls it)."""
    return hashlib.sha256(config_map["data"][CONFIG_FILE].encode()).hexdigest()[:16]


def client_settings(keystore: str, truststore: str) -> dict[str, str]:
    """A broker's or the controller's ``zookeeper.ssl.*`` for the managed ensemble: TLS with its
    own certificate (``keystore``), the server checked against the cluster CA (``truststore``)
    and the name in the connect string (the client Service's, in ZooKeeper's certificate)."""
    return {ZK_SSL_CLIENT_ENABLE: "true", ZK_SSL_KEYSTORE: keystore, ZK_SSL_TRUSTSTORE: truststore,
            ZK_SSL_ENDPOINT_IDENTIFICATION: "HTTPS"}
