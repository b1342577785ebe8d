"""OdradekMirrorMaker2, pure: its spec checked (``parse_mirror_maker``) and every object it owns,
built (``build_mirror_maker``), as Strimzi's KafkaMirrorMaker2 but in Kafka's dedicated mode.

Apache Kafka's own MirrorMaker 2 in dedicated mode (``connect-mirror-maker.sh mm2.properties
--clusters <target>``): the process runs the Connect herder and MirrorMaker's three connectors
(source, checkpoint, heartbeat) itself, configured by one file, so one Deployment and one
ConfigMap are the whole runtime. Strimzi runs them as connectors of a Connect cluster instead,
which needs a REST client, three connector configurations kept in step and a Connect cluster
tied to the target; dedicated mode gives the same flows with nothing to reconcile at run time
(docs/migration.md says the same for users). Kafka's ``dedicated.mode.enable.internal.rest``
(KIP-710) lets several replicas share the work.

MirrorMaker 2 ``m`` from ``spec.source`` (alias ``s``) into OdradekCluster ``c`` (alias ``t``):

- ``m-mirrormaker2-config`` ConfigMap: ``mm2.properties`` (``mm2_properties``): the clusters and
  the one flow ``s->t``, ``topicsPattern``/``groupsPattern``, the replication policy, checkpoints
  and group offset sync; the replication factors (``REPLICATION_DEFAULTS``: Kafka's, capped at
  the target's brokers, unless ``spec.config`` sets them); the target on the chosen listener with the cluster CA and the user's
  credential read from its mounted Secret through ``DirectoryConfigProvider`` (KIP-297), the
  source with ``spec.source.config`` and the settings ``spec.source.secretConfig`` reads from the
  source's Secret, mounted the same way (no secret in the ConfigMap). Topic ACL sync is off:
  users and ACLs are declared on Odradek, and the user has no right to alter ACLs.
- ``m-mirrormaker2`` Deployment running it (``spec.image``, OdradekConnect's image); a
  ConfigMap change rolls it (its hash on the template). A pod is Ready once its MirrorMaker has
  its connectors (``READY_PATTERN``): it wrote their configuration to the config topic as the
  flow's leader, or found it there, or started one of them or their tasks; the herders' log lines
  that say so go to a file (the ConfigMap's ``log4j.properties``) an exec probe reads. Kafka's
  internal REST server (KIP-710) serves only the herders' internal routes, no status to ask, and
  an open port says nothing of a config topic the process cannot write.
- ``m-mirrormaker2`` OdradekUser, when the listener authenticates, with least privilege
  (``user_acls``): the mirrored topics, MirrorMaker's internal topics on the target, its herder's
  group and the mirrored groups. Kafka's ACLs name topics literally or by prefix, not by regular
  expression: a pattern's ACL is its longest literal prefix (``acl_names``).

No I/O: ``mirrormaker2_run`` observes the cluster, calls these and applies what they return.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from odradek.operator import builders, certs, connect
from odradek.operator.connect import ClusterAccess, properties_text
from odradek.operator.spec import MirrorMaker2Spec, MirrorSource, SpecError

CONFIG_DIR = "/etc/odradek/mm2"
CONFIG_FILE = "mm2.properties"
CA_DIR, USER_DIR, SOURCE_DIR = f"{CONFIG_DIR}/cluster-ca", f"{CONFIG_DIR}/user", f"{CONFIG_DIR}/source"
REST_PORT = 8080                  # the internal REST server of a multi-node dedicated cluster (KIP-710)
MM2_LABEL = "odradek.dev/mirrormaker2"
LOG4J_FILE = "log4j.properties"
STATE_LOG = "/tmp/mm2-herder.log"   # the herders' lines the readiness probe reads (/tmp: an emptyDir)
HERDER_LOGGERS = ("org.apache.kafka.connect.mirror.MirrorHerder",
                  "org.apache.kafka.connect.runtime.distributed.DistributedHerder")
# The herders' lines (an extended regular expression) saying a process has MirrorMaker's
# connectors (one flow per process: --clusters <target>): as the flow's leader it wrote their
# configuration to the config topic (MirrorHerder: "MirrorSourceConnector connector configured for
# s->t.") or found it there ("This node is a leader for s->t and configuration for ... is already up
# to date."); or it started one of them or of their tasks, which a worker does only once their
# configuration is in the config topic (DistributedHerder: "Starting connector Mirror...",
# "Starting task Mirror...-0"). Not "Failed to configure ... connector", nor leadership alone.
READY_PATTERN = ("connector configured for |and configuration for [^ ]+ is already up to date"
                 "|Starting (connector|task) Mirror")
POLICIES = {"default": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
            "identity": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"}
LOCATIONS = ("source", "target")
DIRECTORY_PROVIDER = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
# mm2.properties keys the operator owns: refused in spec.config and spec.source.config, bare or
# behind a cluster alias or flow prefix (``s.``, ``s->t.``).
OWNED_KEYS = ("clusters", "bootstrap.servers", "enabled", "topics", "topics.exclude", "groups",
              "replication.policy.class", "replication.policy.separator", "sync.topic.acls.enabled",
              "emit.checkpoints.enabled", "emit.checkpoints.interval.seconds", "sync.group.offsets.enabled",
              "sync.group.offsets.interval.seconds", "offset-syncs.topic.location", "config.providers",
              "dedicated.mode.enable.internal.rest")
OWNED_PREFIXES = ("security.", "ssl.", "sasl.", "config.providers.", "listeners", "rest.")
# Kafka's defaults for the replication factors (MirrorMakerConfig, DistributedConfig), which the
# operator caps at the target's brokers unless spec.config sets them: the mirrored topics' 2, the
# internal topics' 3 (not -1, the cluster's default.replication.factor, which may be 1)
REPLICATION_DEFAULTS = {"replication.factor": 2, **{f"{k}replication.factor": 3 for k in (
    "offset-syncs.topic.", "checkpoints.topic.", "heartbeats.topic.", "config.storage.", "offset.storage.",
    "status.storage.")}}
TOPIC_OPS = ["Create", "Write", "Describe", "DescribeConfigs", "AlterConfigs", "Alter"]
INTERNAL_OPS = ["Read", "Write", "Describe", "Create", "DescribeConfigs"]


def names(mm2: str) -> dict[str, str]:
    return {"deployment": f"{mm2}-mirrormaker2", "config": f"{mm2}-mirrormaker2-config", "user": f"{mm2}-mirrormaker2"}


def labels(mm2: str, cluster: str) -> dict[str, str]:
    return {**builders.labels(cluster, "mirrormaker2"), "app.kubernetes.io/instance": mm2, MM2_LABEL: mm2}


def selector(mm2: str) -> dict[str, str]:
    return {"app.kubernetes.io/instance": mm2, "app.kubernetes.io/component": "mirrormaker2"}


def _setting(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _bare(key: str) -> str:
    """``key`` without a leading alias or flow prefix (``kafka.``, ``kafka->odradek.``)."""
    flow = re.match(r"^[^.]+->[^.]+\.", key)
    return key[flow.end():] if flow else key


def _owned(key: str) -> bool:
    candidates = {key, _bare(key), key.split(".", 1)[-1]}
    return any(k in OWNED_KEYS or k.startswith(OWNED_PREFIXES) for k in candidates)


def _settings(raw: Mapping[str, Any] | None, where: str) -> dict[str, str]:
    out = {str(k): _setting(v) for k, v in (raw or {}).items()}
    owned = sorted(k for k in out if _owned(k))
    if owned:
        raise SpecError(f"{where}: {', '.join(owned)} are set by the operator")
    return dict(sorted(out.items()))


def _source(raw: Mapping[str, Any]) -> MirrorSource:
    if not raw.get("bootstrapServers"):
        raise SpecError("spec.source.bootstrapServers: the source cluster's bootstrap servers are required")
    config = {str(k): _setting(v) for k, v in (raw.get("config") or {}).items()}
    bad = sorted(k for k in config if k in ("bootstrap.servers", "config.providers") or k.startswith("config.providers."))
    if bad:
        raise SpecError(f"spec.source.config: {', '.join(bad)} are set by the operator")
    secret_config = {str(k): str(v) for k, v in (raw.get("secretConfig") or {}).items()}
    if secret_config and not raw.get("secretName"):
        raise SpecError("spec.source.secretConfig: needs spec.source.secretName, the Secret it reads")
    clash = sorted(set(secret_config) & set(config))
    if clash:
        raise SpecError(f"spec.source: {', '.join(clash)} both in config and secretConfig")
    return MirrorSource(bootstrap_servers=str(raw["bootstrapServers"]), alias=raw.get("alias") or MirrorSource.alias,
                        config=dict(sorted(config.items())), secret_name=raw.get("secretName"),
                        secret_config=dict(sorted(secret_config.items())))


def _choice(spec: Mapping[str, Any], key: str, default: str, allowed: Any) -> str:
    value = spec.get(key, default)
    if value not in allowed:
        raise SpecError(f"spec.{key}: {value!r} is not one of {', '.join(allowed)}")
    return value


def parse_mirror_maker(spec: Mapping[str, Any], cluster: str) -> MirrorMaker2Spec:
    """An OdradekMirrorMaker2's ``spec`` (of target OdradekCluster ``cluster``) with the defaults
    filled in; ``SpecError`` for what the schema cannot say."""
    d = MirrorMaker2Spec
    source = _source(spec.get("source") or {})
    target_alias = spec.get("targetAlias") or cluster
    if source.alias == target_alias:
        raise SpecError(f"spec.source.alias: {source.alias!r} is also the target's alias (spec.targetAlias)")
    for alias in (source.alias, target_alias):
        if not re.fullmatch(r"[A-Za-z0-9_-]+", alias):
            raise SpecError(f"cluster alias {alias!r}: letters, digits, '-' and '_' only (it prefixes keys and topics)")
    checkpoints = spec.get("checkpoints") or {}
    config = _settings(spec.get("config"), "spec.config")
    connect.check_factors(config, REPLICATION_DEFAULTS)
    return MirrorMaker2Spec(
        source=source, cluster=spec.get("cluster"), target_alias=target_alias,
        replicas=int(spec.get("replicas", d.replicas)), image=spec.get("image") or d.image,
        listener=spec.get("listener"), topics_pattern=spec.get("topicsPattern") or d.topics_pattern,
        topics_exclude_pattern=spec.get("topicsExcludePattern"),
        groups_pattern=spec.get("groupsPattern") or d.groups_pattern,
        replication_policy=_choice(spec, "replicationPolicy", d.replication_policy, POLICIES),
        offset_syncs_topic_location=_choice(spec, "offsetSyncsTopicLocation", d.offset_syncs_topic_location,
                                            LOCATIONS),
        emit_checkpoints=bool(checkpoints.get("enabled", d.emit_checkpoints)),
        emit_checkpoints_interval_seconds=int(checkpoints.get("intervalSeconds", d.emit_checkpoints_interval_seconds)),
        sync_group_offsets=bool(checkpoints.get("syncGroupOffsets", d.sync_group_offsets)),
        sync_group_offsets_interval_seconds=int(checkpoints.get("syncGroupOffsetsIntervalSeconds",
                                                                d.sync_group_offsets_interval_seconds)),
        config=config, resources=spec.get("resources"),
        jvm_heap=spec.get("jvmHeap") or d.jvm_heap)


# -- mm2.properties ---------------------------------------------------------------------------

def _dir(directory: str, key: str) -> str:
    return "${dir:" + directory + ":" + key + "}"


def mm2_properties(spec: MirrorMaker2Spec, access: ClusterAccess) -> dict[str, str]:
    """MirrorMaker 2's configuration (``mm2.properties``, without the per-pod
    ``rest.advertised.host.name`` the container appends)."""
    s, t = spec.source.alias, spec.target_alias
    flow = f"{s}->{t}."
    out = {"clusters": f"{s}, {t}", f"{s}.bootstrap.servers": spec.source.bootstrap_servers,
           f"{t}.bootstrap.servers": access.bootstrap, f"{flow}enabled": "true",
           f"{flow}topics": spec.topics_pattern, f"{flow}groups": spec.groups_pattern,
           "replication.policy.class": POLICIES[spec.replication_policy],
           "emit.checkpoints.enabled": _setting(spec.emit_checkpoints),
           "emit.checkpoints.interval.seconds": str(spec.emit_checkpoints_interval_seconds),
           "sync.group.offsets.enabled": _setting(spec.sync_group_offsets),
           "sync.group.offsets.interval.seconds": str(spec.sync_group_offsets_interval_seconds),
           "offset-syncs.topic.location": spec.offset_syncs_topic_location,
           "sync.topic.acls.enabled": "false",
           **{k: connect.replication_factor(spec.config, k, default, access.brokers)
              for k, default in REPLICATION_DEFAULTS.items()},
           "dedicated.mode.enable.internal.rest": "true", "listeners": f"http://:{REST_PORT}",
           "rest.advertised.port": str(REST_PORT), **spec.config}
    if spec.topics_exclude_pattern:
        out[f"{flow}topics.exclude"] = spec.topics_exclude_pattern
    out |= {f"{t}.{k}": v for k, v in connect.client_security(access, USER_DIR, CA_DIR).items()}
    out |= {f"{s}.{k}": v for k, v in spec.source.config.items()}
    out |= {f"{s}.{k}": _dir(SOURCE_DIR, key) for k, key in spec.source.secret_config.items()}
    if access.authentication or spec.source.secret_config:
        out |= {"config.providers": "dir", "config.providers.dir.class": DIRECTORY_PROVIDER}
    return dict(sorted(out.items()))


# -- the user ---------------------------------------------------------------------------------

def _alternatives(regex: str) -> list[str]:
    """``regex`` split at its top-level ``|`` (outside groups and classes)."""
    out, depth, start, i = [], 0, 0, 0
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            i += 2
            continue
        depth += 1 if c in "([" else -1 if c in ")]" else 0
        if c == "|" and depth == 0:
            out.append(regex[start:i])
            start = i + 1
        i += 1
    return [*out, regex[start:]]


def literal_prefix(regex: str) -> tuple[str, bool]:
    """(the literal text every match of ``regex`` starts with, whether it is all of the match)."""
    out, i = [], 0
    regex = regex.removeprefix("^").removesuffix("$")
    while i < len(regex):
        c = regex[i]
        if c == "\\" and i + 1 < len(regex) and not regex[i + 1].isalnum():
            out.append(regex[i + 1])
            i += 2
            continue
        if c in ".^$*+?()[]{}|\\":
            if c in "?*{" and out:   # the previous character is optional
                out.pop()
            return "".join(out), False
        out.append(c)
        i += 1
    return "".join(out), True


def acl_names(patterns: str, prefix: str = "") -> list[tuple[str, str]]:
    """(name, patternType) of the ACL resources covering every name Kafka's comma-separated list of
    regular expressions ``patterns`` matches, each behind ``prefix`` (the remote-topic prefix).
    ``*`` (every resource) when an alternative has no literal start."""
    out: list[tuple[str, str]] = []
    for regex in (p.strip() for p in patterns.split(",") if p.strip()):
        for alternative in _alternatives(regex):
            text, exact = literal_prefix(alternative)
            if not text and not prefix:
                return [("*", "literal")]
            out.append((prefix + text, "literal" if exact else "prefix"))
    return sorted(set(out))


def _acl(rtype: str, name: str, pattern: str, ops: list[str]) -> dict:
    resource = {"type": rtype, "name": name, **({"patternType": "prefix"} if pattern == "prefix" else {})}
    return {"resource": resource, "operations": list(ops)}


def internal_topics(spec: MirrorMaker2Spec) -> list[str]:
    """MirrorMaker's own topics on the target: its herder's config, offset and status topics, the
    checkpoints, the heartbeats (its own and the source's, mirrored), the offset syncs when kept
    there: named for the *other* cluster, the source (Kafka's MirrorSourceConfig.offsetSyncsTopic;
    on the source it is ``mm2-offset-syncs.<target>.internal``)."""
    s = spec.source.alias
    out = [f"mm2-configs.{s}.internal", f"mm2-offsets.{s}.internal", f"mm2-status.{s}.internal",
           f"{s}.checkpoints.internal", "heartbeats", f"{s}.heartbeats"]
    if spec.offset_syncs_topic_location == "target":
        out.append(f"mm2-offset-syncs.{s}.internal")
    return out


def user_acls(spec: MirrorMaker2Spec) -> list[dict]:
    """The target user's ACLs, least privilege: the mirrored topics (Create, Write, Describe,
    DescribeConfigs, AlterConfigs for the config sync, Alter for new partitions; Read when group
    offsets are synced: committing an offset reads the topic), the internal topics, the herder's
    group ``<source>-mm2`` and, with offset sync, the mirrored groups (Read, Describe)."""
    remote = f"{spec.source.alias}." if spec.replication_policy == "default" else ""
    topic_ops = TOPIC_OPS + (["Read"] if spec.sync_group_offsets else [])
    acls = [_acl("topic", n, p, topic_ops) for n, p in acl_names(spec.topics_pattern, remote)]
    acls += [_acl("topic", n, "literal", INTERNAL_OPS) for n in internal_topics(spec)]
    acls.append(_acl("group", f"{spec.source.alias}-mm2", "literal", ["Read", "Describe"]))
    if spec.sync_group_offsets:
        acls += [_acl("group", n, p, ["Read", "Describe"]) for n, p in acl_names(spec.groups_pattern)]
    return acls


def build_user(mm2: str, namespace: str, spec: MirrorMaker2Spec, access: ClusterAccess) -> list[dict]:
    """MirrorMaker's OdradekUser on the target, when its listener authenticates."""
    if not access.authentication:
        return []
    return [{"apiVersion": f"{builders.GROUP}/{builders.VERSION}", "kind": "OdradekUser",
             "metadata": {"name": names(mm2)["user"], "namespace": namespace, "labels": labels(mm2, access.cluster)},
             "spec": {"cluster": access.cluster, "authentication": {"type": access.authentication},
                      "authorization": {"type": "simple", "acls": user_acls(spec)}}}]


# -- the Deployment ---------------------------------------------------------------------------

def secret_mounts(mm2: str, spec: MirrorMaker2Spec, access: ClusterAccess) -> dict[str, tuple[str, str]]:
    """The Secrets the pod mounts: directory -> (volume name, Secret name); ``mm2.properties``
    reads its credentials from these directories (the lag check too: ``mirrormaker2_lag``)."""
    out = {}
    if access.tls:
        out[CA_DIR] = ("cluster-ca", certs.secret_names(access.cluster)["cluster_ca_cert"])
    if access.authentication:
        out[USER_DIR] = ("user", names(mm2)["user"])
    if spec.source.secret_name:
        out[SOURCE_DIR] = ("source", spec.source.secret_name)
    return out


def _volumes(mm2: str, spec: MirrorMaker2Spec, access: ClusterAccess) -> tuple[list[dict], list[dict]]:
    mounts = [{"name": "config", "mountPath": f"{CONFIG_DIR}/config", "readOnly": True}]
    volumes = [{"name": "config", "configMap": {"name": names(mm2)["config"]}}]
    for path, (name, secret) in secret_mounts(mm2, spec, access).items():
        mounts.append({"name": name, "mountPath": path, "readOnly": True})
        volumes.append({"name": name, "secret": {"secretName": secret}})
    return mounts, volumes


def log4j_properties(state_log: str = STATE_LOG) -> str:
    """The image's logging (Kafka's ``connect-log4j.properties`` on stdout) plus the herders'
    lines, bare, in ``state_log`` for the readiness probe."""
    herders = "".join(f"log4j.logger.{logger}=INFO, herder\n" for logger in HERDER_LOGGERS)
    return ("log4j.rootLogger=INFO, stdout\nlog4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %X{connector.context}%m (%c:%L)%n\n"
            "log4j.logger.org.reflections=ERROR\n" + herders +
            f"log4j.appender.herder=org.apache.log4j.FileAppender\nlog4j.appender.herder.File={state_log}\n"
            "log4j.appender.herder.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.herder.layout.ConversionPattern=%m%n\n")


def readiness_probe(state_log: str = STATE_LOG) -> dict:
    """Ready once the herders' lines in ``state_log`` match ``READY_PATTERN``."""
    return {"exec": {"command": ["grep", "-q", "-E", READY_PATTERN, state_log]}}


def build_deployment(mm2: str, namespace: str, spec: MirrorMaker2Spec, access: ClusterAccess,
                     properties: str) -> dict:
    """``connect-mirror-maker.sh`` on the ConfigMap's file plus this pod's internal REST address
    (the shell appends it: the file is read-only), for the target's flows only (``--clusters``),
    logging as ``log4j_properties`` says; the herders' file is emptied first (a restarted
    container must not find the lines of its previous run)."""
    local = f"/tmp/{CONFIG_FILE}"
    script = (f': > {STATE_LOG} && cat {CONFIG_DIR}/config/{CONFIG_FILE} > {local} && '
              f'echo "rest.advertised.host.name=$POD_IP" >> {local} && '
              f'export KAFKA_LOG4J_OPTS=-Dlog4j.configuration=file:{CONFIG_DIR}/config/{LOG4J_FILE} && '
              f'exec {connect.KAFKA_HOME}/bin/connect-mirror-maker.sh {local} --clusters {spec.target_alias}')
    mounts, volumes = _volumes(mm2, spec, access)
    alive = {"tcpSocket": {"port": REST_PORT}}   # the internal REST server: the JVM is up
    return connect.jvm_deployment(names(mm2)["deployment"], namespace, spec, "mirrormaker2", script, alive, mounts,
                                  volumes, properties, labels(mm2, access.cluster), selector(mm2), REST_PORT,
                                  readiness=readiness_probe())


def build_mirror_maker(mm2: str, namespace: str, spec: MirrorMaker2Spec, access: ClusterAccess) -> list[dict]:
    """Every object the OdradekMirrorMaker2 owns, in apply order: the user, the ConfigMap, the Deployment."""
    properties = properties_text(mm2_properties(spec, access))
    config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": names(mm2)["config"], "namespace": namespace,
                               "labels": labels(mm2, access.cluster)},
                  "data": {CONFIG_FILE: properties, LOG4J_FILE: log4j_properties()}}
    return [*build_user(mm2, namespace, spec, access), config_map,
            build_deployment(mm2, namespace, spec, access, properties)]
