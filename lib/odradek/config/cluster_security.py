"""The keys that secure the cluster's own traffic, read by brokers and the controller alike:
the control plane's mutual TLS (``control.plane.ssl.*``), ZooKeeper's digest authentication and
znode ACLs (``zookeeper.set.acl``, ``zookeeper.digest.credentials.file``) and ZooKeeper client
TLS (Kafka's ``zookeeper.ssl.*``). docs/security.md ("Control plane", "ZooKeeper", "ZooKeeper
TLS") says what each does.

Naming: the control-plane keys are the broker's ``ssl.*`` keys with the ``control.plane.``
prefix (Kafka prefixes a key to scope it, as ``listener.name.<l>.ssl.*`` and
``control.plane.listener.name`` do), so that the Kafka listeners and the control plane can
use different certificates and, above all, different CAs. Values are file paths, never key
material, so that DescribeConfigs shows nothing secret.
"""

from __future__ import annotations

import re

from odradek.config.keys import BOOLEAN, ConfigKey, ConfigType, ValueType, one_of, registry
from odradek.config.security import TEXT


def _pattern(s: str) -> str:
    try:
        re.compile(s)
    except re.error as e:
        raise ValueError(f"not a regular expression: {e}") from None
    return s


PATTERN = ValueType(ConfigType.STRING, _pattern, "a regular expression (Python's re), empty: none")

CONTROL_PLANE_KEYSTORE = "control.plane.ssl.keystore.location"
CONTROL_PLANE_TRUSTSTORE = "control.plane.ssl.truststore.location"
CONTROL_PLANE_ENDPOINT_IDENTIFICATION = "control.plane.ssl.endpoint.identification.algorithm"
CONTROL_PLANE_PEER_CN = "control.plane.ssl.peer.common.name.pattern"
ZK_SET_ACL = "zookeeper.set.acl"
ZK_DIGEST_FILE = "zookeeper.digest.credentials.file"
ZK_SSL_CLIENT_ENABLE = "zookeeper.ssl.client.enable"
ZK_SSL_KEYSTORE = "zookeeper.ssl.keystore.location"
ZK_SSL_KEYSTORE_TYPE = "zookeeper.ssl.keystore.type"
ZK_SSL_TRUSTSTORE = "zookeeper.ssl.truststore.location"
ZK_SSL_TRUSTSTORE_TYPE = "zookeeper.ssl.truststore.type"
ZK_SSL_ENDPOINT_IDENTIFICATION = "zookeeper.ssl.endpoint.identification.algorithm"

CLUSTER_SECURITY_CONFIGS: dict[str, ConfigKey] = registry(
    ConfigKey(CONTROL_PLANE_KEYSTORE, TEXT, "",
              "PEM file with this process's certificate chain and private key for the internal HTTP API "
              "(set: the API serves HTTPS and requires client certificates)"),
    ConfigKey(CONTROL_PLANE_TRUSTSTORE, TEXT, "",
              "PEM file of the CA every control-plane peer's certificate must chain to (required with the keystore)"),
    ConfigKey(CONTROL_PLANE_ENDPOINT_IDENTIFICATION, one_of("https", ""), "https",
              "whether a control-plane client checks the server certificate's host name (https) or not (empty)"),
    ConfigKey(CONTROL_PLANE_PEER_CN, PATTERN, "",
              "regular expression a control-plane client certificate's CN must match (empty: any certificate "
              "from the CA)"),
    ConfigKey(ZK_SET_ACL, BOOLEAN, "false",
              "create every znode with Kafka's ACLs: its creator may do all, others only read "
              "(credentials: nothing)"),
    ConfigKey(ZK_DIGEST_FILE, TEXT, "",
              "file holding user:password for ZooKeeper's digest authentication (Kafka: the JAAS Client section)"),
    ConfigKey(ZK_SSL_CLIENT_ENABLE, BOOLEAN, "false",
              "connect to ZooKeeper over TLS (its secureClientPort), with the zookeeper.ssl.* files"),
    ConfigKey(ZK_SSL_KEYSTORE_TYPE, one_of("PEM"), "PEM", "format of the ZooKeeper client certificate (PEM only)"),
    ConfigKey(ZK_SSL_KEYSTORE, TEXT, "",
              "PEM file with the certificate chain and private key presented to ZooKeeper (its ssl.clientAuth)"),
    ConfigKey(ZK_SSL_TRUSTSTORE_TYPE, one_of("PEM"), "PEM", "format of the ZooKeeper truststore (PEM only)"),
    ConfigKey(ZK_SSL_TRUSTSTORE, TEXT, "",
              "PEM file of the CA the ZooKeeper servers' certificates must chain to (required with TLS)"),
    ConfigKey(ZK_SSL_ENDPOINT_IDENTIFICATION, one_of("HTTPS", "https", ""), "HTTPS",
              "whether the ZooKeeper server's certificate must name the host of zookeeper.connect (HTTPS) or not "
              "(empty)"),
)

CONTROL_PLANE_KEYS = (CONTROL_PLANE_KEYSTORE, CONTROL_PLANE_TRUSTSTORE, CONTROL_PLANE_ENDPOINT_IDENTIFICATION,
                      CONTROL_PLANE_PEER_CN)
ZOOKEEPER_TLS_KEYS = (ZK_SSL_CLIENT_ENABLE, ZK_SSL_KEYSTORE_TYPE, ZK_SSL_KEYSTORE, ZK_SSL_TRUSTSTORE_TYPE,
                      ZK_SSL_TRUSTSTORE, ZK_SSL_ENDPOINT_IDENTIFICATION)
ZOOKEEPER_SECURITY_KEYS = (ZK_SET_ACL, ZK_DIGEST_FILE, *ZOOKEEPER_TLS_KEYS)
