"""The keys that secure the cluster's own traffic, read by brokers and the controller alike:
the control plane's mutual TLS (``control.plane.ssl.*``) and ZooKeeper's digest
authentication and znode ACLs (``zookeeper.set.acl``, ``zookeeper.digest.credentials.file``).
docs/security.md ("Control plane", "ZooKeeper") says what each does.

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
)

CONTROL_PLANE_KEYS = (CONTROL_PLANE_KEYSTORE, CONTROL_PLANE_TRUSTSTORE, CONTROL_PLANE_ENDPOINT_IDENTIFICATION,
                      CONTROL_PLANE_PEER_CN)
ZOOKEEPER_SECURITY_KEYS = (ZK_SET_ACL, ZK_DIGEST_FILE)
