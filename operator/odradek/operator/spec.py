"""The OdradekCluster spec as frozen values, with the CRD's defaults stated once.

``crds/odradekclusters.odradek.dev.yaml`` is the source of truth: every ``default:`` there is
the default of the field here (``tests/operator/test_operator_spec.py`` walks the schema and
fails on drift). The API server applies the schema's defaults before the operator sees a
resource; these defaults serve the objects a user leaves out where the schema has none
(``spec.gateway``), the operator's own documented defaults (storage sizes) and the unit tests.

``validation.parse_cluster`` builds a ``ClusterSpec`` from the resource's ``spec`` dict, once,
raising ``SpecError``; the builders, the certificate plan and the reconcile read these fields,
never the dict (``SpecError`` is defined here so that ``listeners`` can raise it too). Only
what a broker restart must pick up is also kept as the user wrote it (``ClusterSpec.source``),
so the brokers' config hash stays what it was for existing clusters.

No operator imports at run time: ``listeners`` and ``validation`` import this module.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from odradek.operator.listeners import Listener

DEFAULT_IMAGE = "ghcr.io/odradek/odradek:0.1.0"
DEFAULT_ZOOKEEPER_IMAGE = "zookeeper:3.8"
PERSISTENT_CLAIM, EPHEMERAL = "persistent-claim", "ephemeral"


class SpecError(ValueError):
    """An invalid spec: retrying cannot help until the user edits the resource. ``reason`` is
    the Ready condition's reason: ``InvalidSpec``, or a refusal's own (``SecretConflict``...)."""

    def __init__(self, message: str, reason: str = "InvalidSpec") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class BrokerStorage:
    type: str = PERSISTENT_CLAIM
    size: str = "10Gi"                 # the operator's default (the CRD documents it; no schema default)
    storage_class: str | None = None   # ``class``
    delete_claim: bool = False

    @property
    def persistent(self) -> bool:
        return self.type == PERSISTENT_CLAIM


@dataclass(frozen=True)
class Pdb:
    """``brokers.pdb``: the brokers' PodDisruptionBudget (``enabled: false``: none)."""
    enabled: bool = True
    max_unavailable: int = 1


@dataclass(frozen=True)
class Brokers:
    replicas: int = 3
    storage: BrokerStorage = BrokerStorage()
    resources: Mapping[str, Any] | None = None
    config: Mapping[str, str] = field(default_factory=dict)  # checked settings, as sorted strings
    pdb: Pdb = Pdb()


@dataclass(frozen=True)
class Controller:
    replicas: int = 2
    resources: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Gateway:
    replicas: int = 0
    service_type: str = "ClusterIP"
    auth_secret: str | None = None
    resources: Mapping[str, Any] | None = None
    users: tuple[str, ...] = ()        # OdradekUsers (tls) the generated tokens map to


@dataclass(frozen=True)
class ZookeeperStorage:
    size: str = "5Gi"                  # the operator's default (no schema default)
    storage_class: str | None = None


@dataclass(frozen=True)
class ManagedZookeeper:
    replicas: int = 3
    image: str = DEFAULT_ZOOKEEPER_IMAGE
    storage: ZookeeperStorage = ZookeeperStorage()
    resources: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Zookeeper:
    """Managed unless ``external`` is given (the schema's default is ``{managed: {}}``)."""
    managed: ManagedZookeeper | None = ManagedZookeeper()
    external_connect: str | None = None

    @property
    def replicas(self) -> int:
        """The pods the operator runs (0 for an external ensemble)."""
        return self.managed.replicas if self.managed is not None else 0


@dataclass(frozen=True)
class CaSettings:
    """``clusterCa`` / ``clientsCa``."""
    validity_days: int = 365
    renewal_days: int = 30
    generate: bool = True              # ``generateCertificateAuthority``

    @property
    def validity(self) -> datetime.timedelta:
        return datetime.timedelta(days=self.validity_days)

    @property
    def renewal(self) -> datetime.timedelta:
        return datetime.timedelta(days=self.renewal_days)


@dataclass(frozen=True)
class Authorization:
    """``spec.authorization`` (type ``simple``, Kafka's AclAuthorizer)."""
    super_users: tuple[str, ...] = ()  # as written: ``alice`` or ``User:alice``


@dataclass(frozen=True)
class AutoRebalance:
    """``autoRebalance[]``: rebalance on scale (``add-brokers`` | ``remove-brokers``), with the
    OdradekRebalance template whose throttle and concurrency it takes (``template.name``)."""
    mode: str
    template: str | None = None


@dataclass(frozen=True)
class CredentialsSecret:
    """``tieredStorage.credentialsSecret``: the user's Secret holding the object store's access key
    (the key names default to those of an ObjectBucketClaim's Secret)."""
    name: str
    access_key_id_key: str = "AWS_ACCESS_KEY_ID"
    secret_access_key_key: str = "AWS_SECRET_ACCESS_KEY"

    @property
    def keys(self) -> tuple[tuple[str, str], ...]:
        """(its CRD field, the Secret's key) of the access key id, then of the secret access key."""
        return ("accessKeyIdKey", self.access_key_id_key), ("secretAccessKeyKey", self.secret_access_key_key)


@dataclass(frozen=True)
class TieredStorage:
    """``tieredStorage``: the brokers' object store (``tiered_storage`` renders it). Defaults are the
    broker's (``odradek.config.tiered``); no ``credentials_secret``: boto3's default chain."""
    bucket: str
    enabled: bool = True
    endpoint: str = ""                 # empty: AWS S3 in ``region``
    region: str = "us-east-1"
    prefix: str = ""
    credentials_secret: CredentialsSecret | None = None
    task_interval_ms: int = 30000


@dataclass(frozen=True)
class ClusterSpec:
    image: str = DEFAULT_IMAGE
    image_pull_policy: str = "IfNotPresent"
    brokers: Brokers = Brokers()
    listeners: tuple["Listener", ...] = ()
    authorization: Authorization | None = None
    controller: Controller = Controller()
    gateway: Gateway = Gateway()
    zookeeper: Zookeeper = Zookeeper()
    cluster_ca: CaSettings = CaSettings()
    clients_ca: CaSettings = CaSettings()
    rack_topology_key: str | None = None
    network_policies: bool = True      # ``networkPolicies``: the NetworkPolicies of network_policies.py
    pod_template: Mapping[str, Any] = field(default_factory=dict)   # ``template.pod``, merged into every pod
    auto_rebalance: tuple[AutoRebalance, ...] = ()   # ``autoRebalance`` (autorebalance.py); none: off
    tiered_storage: TieredStorage | None = None      # ``tieredStorage`` (tiered_storage.py); none: off
    # The spec's own ``listeners``, ``authorization``, ``rack``, ``template`` as written: part of
    # the brokers' config hash in the form existing clusters hashed them.
    source: Mapping[str, Any] = field(default_factory=dict)


# -- Kafka Connect (``connect``, ``connectors``) ----------------------------------------------

DEFAULT_CONNECT_IMAGE = "odradek/connect:3.9.2"   # e2e/images/connect: Kafka 3.9.2 (bench/kafka/ecosystem/pom.xml)
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"


@dataclass(frozen=True)
class ConnectPlugin:
    """One of ``spec.plugins`` (``connect_plugins``): a directory of ``plugin.path`` and the Maven
    artifacts (``group:artifact:version``, each with an optional SHA-512 to pin it) it holds."""
    name: str
    artifacts: tuple[tuple[str, str | None], ...]   # (coordinates, sha512sum)


@dataclass(frozen=True)
class ConnectSpec:
    """An OdradekConnect's spec (``connect.parse_connect``; crds/odradekconnects.odradek.dev.yaml).
    ``group_id`` and the storage topics default from the resource's name, so they have no schema default."""
    cluster: str | None = None
    replicas: int = 1
    image: str = DEFAULT_CONNECT_IMAGE
    listener: str | None = None
    group_id: str = ""
    config_storage_topic: str = ""
    offset_storage_topic: str = ""
    status_storage_topic: str = ""
    exactly_once_source_support: str = "disabled"   # Kafka's default
    config: Mapping[str, str] = field(default_factory=dict)
    acls: tuple[Mapping[str, Any], ...] = ()        # ``authorization.acls``: the connectors' own
    resources: Mapping[str, Any] | None = None
    jvm_heap: str = "512m"
    rest_authentication: str = "none"               # ``restApi.authentication.type``: none or basic
    plugins: tuple[ConnectPlugin, ...] = ()
    plugin_repository: str = MAVEN_CENTRAL          # ``pluginRepository``


@dataclass(frozen=True)
class ConnectorSpec:
    """An OdradekConnector's spec (``connectors.parse_connector``; crds/odradekconnectors.odradek.dev.yaml)."""
    class_name: str                                 # ``class``
    connect: str | None = None
    tasks_max: int = 1
    state: str = "running"
    config: Mapping[str, str] = field(default_factory=dict)


# -- MirrorMaker 2 (``mirrormaker2``) -----------------------------------------------------------

@dataclass(frozen=True)
class MirrorSource:
    """``spec.source``: any Kafka cluster; ``config`` its client settings as written, ``secret_config``
    the settings read from the Secret ``secret_name`` (setting -> the Secret's key)."""
    bootstrap_servers: str
    alias: str = "source"
    config: Mapping[str, str] = field(default_factory=dict)
    secret_name: str | None = None
    secret_config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MirrorMaker2Spec:
    """An OdradekMirrorMaker2's spec (``mirrormaker2.parse_mirror_maker``;
    crds/odradekmirrormaker2s.odradek.dev.yaml). Interval and pattern defaults are Kafka's."""
    source: MirrorSource
    cluster: str | None = None
    target_alias: str = ""                          # default the OdradekCluster's name
    replicas: int = 1
    image: str = DEFAULT_CONNECT_IMAGE              # the same JVM image as OdradekConnect's
    listener: str | None = None
    topics_pattern: str = ".*"
    topics_exclude_pattern: str | None = None
    groups_pattern: str = ".*"
    replication_policy: str = "default"             # or ``identity`` (IdentityReplicationPolicy)
    offset_syncs_topic_location: str = "source"
    emit_checkpoints: bool = True                   # ``checkpoints.enabled``
    emit_checkpoints_interval_seconds: int = 60     # ``checkpoints.intervalSeconds``
    sync_group_offsets: bool = False                # ``checkpoints.syncGroupOffsets``
    sync_group_offsets_interval_seconds: int = 60   # ``checkpoints.syncGroupOffsetsIntervalSeconds``
    config: Mapping[str, str] = field(default_factory=dict)
    resources: Mapping[str, Any] | None = None
    jvm_heap: str = "512m"
