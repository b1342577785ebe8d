"""The gateway's own Kafka rights on a cluster with ``authorization`` (docs/schema-registry.md, "On
Kubernetes"): its schema registry keeps its schemas in ``_schemas`` and elects its primary in a
group, as the gateway's certificate principal ``User:CN=<c>-gateway,O=odradek``, which is no
super user and had no ACL, so the registry could not start there. The operator grants that
principal exactly what the registry does (``registry_acls``), through the active controller's
users route, and takes those ACLs away again when the gateway or the authorization goes.

Kafka's checks, per ACL (the brokers' authorizer as Kafka's):

- topic ``_schemas``: CREATE (created at the registry's start), DESCRIBE (metadata; ListOffsets,
  the end offset every write and every "not found" read waits for), READ (the reader's and the
  elector's fetches), WRITE (the primary's records; an idempotent producer's InitProducerId is
  allowed by WRITE on a topic, KIP-679, so no IDEMPOTENT_WRITE on the cluster);
- group ``schema-registry``: READ (join, sync, heartbeat: the primary's election) and DESCRIBE
  (FindCoordinator; the followers find the primary with DescribeGroups);
- group ``schema-registry-reader``: READ and DESCRIBE (the reader's consumer carries that group
  id, so it finds its coordinator; it assigns its partition itself and commits nothing).

Nothing else is touched: the users route is a whole-user sync, so the operator reads the
principal's ACLs and quotas first and writes them back with its own added (or removed); an ACL
or quota an administrator gave the gateway's principal is kept (a SCRAM credential under its
name would go: none is made, the gateway logs in with its certificate), and a cluster already
holding them is not written at all. The user name it granted to is kept in the ``GRANTED`` annotation
(which kopf leaves out of its diffs, as ``maintenance`` keeps its ids), to revoke exactly that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from odradek.cluster.control_plane_users import UserAcl, UserSpec
from odradek.operator import admin, certs
from odradek.operator.spec import ClusterSpec

GRANTED = "operator.odradek.dev/gateway-acls"   # the Kafka user name the registry's ACLs were granted to
# The gateway's defaults (its --schema-registry-topic and --schema-registry-group, which the
# operator does not set; tests/operator/test_operator_gateway_users.py compares them).
REGISTRY_TOPIC, REGISTRY_GROUP = "_schemas", "schema-registry"
TOPIC_OPERATIONS = ("CREATE", "DESCRIBE", "READ", "WRITE")
GROUP_OPERATIONS = ("DESCRIBE", "READ")


def user_name(cluster: str) -> str:
    """The gateway's Kafka user name: its certificate's subject (its principal without ``User:``)."""
    return certs.principal(cluster, "gateway").removeprefix("User:")


def registry_acls(topic: str = REGISTRY_TOPIC, group: str = REGISTRY_GROUP) -> tuple[UserAcl, ...]:
    """What the schema registry needs on its topic and its two groups (see the module's docstring)."""
    on_topic = tuple(UserAcl("TOPIC", topic, "LITERAL", op) for op in TOPIC_OPERATIONS)
    return on_topic + tuple(UserAcl("GROUP", name, "LITERAL", op)
                            for name in (group, f"{group}-reader") for op in GROUP_OPERATIONS)


def wanted(spec: ClusterSpec) -> bool:
    """Whether the gateway's principal needs the registry's ACLs: a gateway runs on a cluster whose
    brokers check ACLs (without ``authorization`` every principal may do everything)."""
    return spec.gateway.replicas > 0 and spec.authorization is not None


@dataclass(frozen=True)
class GrantOutcome:
    granted: str | None           # the new value of ``GRANTED`` ("" removes it; None: unchanged)
    problem: str | None = None    # the controller failed: look again later


def _acl(entry: Mapping[str, Any]) -> UserAcl:
    return UserAcl(**entry)


def sync(connect: Callable[[], admin.ControllerClient], cluster: str, spec: ClusterSpec,
         annotations: Mapping[str, str]) -> GrantOutcome:
    """Grant the registry's ACLs when ``wanted``, revoke those granted before otherwise (the
    controller is called only then)."""
    before = annotations.get(GRANTED) or ""
    name = user_name(cluster) if wanted(spec) else before
    if not name:
        return GrantOutcome(None)
    principal = f"User:{name}"
    ours = set(registry_acls())
    try:
        client = connect()
        current = client.describe_user(name, principal)
        have = {_acl(a) for a in current["acls"]}
        keep = have | ours if wanted(spec) else have - ours
        if keep != have:
            client.put_user(name, UserSpec(principal, None, tuple(sorted(keep, key=_order)), current["quotas"]))
    except (admin.Unreachable, admin.AdminError) as e:
        return GrantOutcome(None, f"the gateway's schema registry ACLs: {e}")
    return GrantOutcome(name if wanted(spec) else "")


def _order(acl: UserAcl) -> tuple:
    return (acl.resource_type, acl.name, acl.pattern_type, acl.operation, acl.host, acl.permission)
