"""``odradek acls list|add|remove``: Kafka ACLs, through the Kafka protocol.

CreateAcls, DescribeAcls and DeleteAcls through librdkafka's admin client (confluent-kafka),
with the options of Kafka's ``kafka-acls`` (``--allow-principal``/``--deny-principal``,
``--operation``, ``--host``, ``--topic``/``--group``/``--cluster``/``--transactional-id``,
``--resource-pattern-type``), so it works against Odradek and Apache Kafka alike. The
cluster: ``--bootstrap-server`` with ``--command-config``, or a dev cluster's ``--data-dir``.
"""

from __future__ import annotations

import argparse
import itertools

from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)

from odradek.admin_cli import run, table
from odradek.dev import access

TIMEOUT_S = 30
CLUSTER_NAME = "kafka-cluster"   # Kafka's one cluster resource
OPERATIONS = [op.name for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)]


def _name(member) -> str:
    """Kafka's spelling of an enum member: IDEMPOTENT_WRITE -> IdempotentWrite, BROKER -> Cluster."""
    if member is ResourceType.BROKER:
        return "Cluster"
    return "".join(part.capitalize() for part in member.name.split("_"))


def _operation(text: str) -> str:
    key = text.replace("-", "_").upper()
    key = {"IDEMPOTENTWRITE": "IDEMPOTENT_WRITE", "CLUSTERACTION": "CLUSTER_ACTION",
           "DESCRIBECONFIGS": "DESCRIBE_CONFIGS", "ALTERCONFIGS": "ALTER_CONFIGS"}.get(key, key)
    if key not in OPERATIONS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(_name(AclOperation[o]) for o in OPERATIONS)}")
    return key


def _resources(args) -> list[tuple[ResourceType, str]]:
    return ([(ResourceType.TOPIC, t) for t in args.topic] + [(ResourceType.GROUP, g) for g in args.group]
            + [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
            + ([(ResourceType.BROKER, CLUSTER_NAME)] if args.cluster else []))


def _principals(args) -> list[tuple[str, AclPermissionType]]:
    return ([(p, AclPermissionType.ALLOW) for p in args.allow_principal]
            + [(p, AclPermissionType.DENY) for p in args.deny_principal])


def _row(b: AclBinding) -> dict:
    return {"principal": b.principal, "host": b.host, "operation": _name(b.operation),
            "permission": _name(b.permission_type), "resource_type": _name(b.restype), "name": b.name,
            "pattern_type": _name(b.resource_pattern_type)}


def _print(rows: list[dict]) -> None:
    keys = ["principal", "host", "operation", "permission", "resource_type", "name", "pattern_type"]
    print(table([[r[k] for k in keys] for r in rows], [k.upper().replace("_", "-") for k in keys]))


def add_acls(admin: AdminClient, args) -> dict:
    resources, principals = _resources(args), _principals(args)
    if not resources or not principals or not args.operation:
        raise SystemExit("odradek acls add: give a resource (--topic, --group, --cluster, --transactional-id), "
                         "--allow-principal or --deny-principal, and --operation")
    pattern = ResourcePatternType[args.resource_pattern_type.upper()]
    bindings = [AclBinding(restype, name, pattern, principal, args.host, AclOperation[op], permission)
                for (restype, name), (principal, permission), op
                in itertools.product(resources, principals, args.operation)]
    for future in admin.create_acls(bindings, request_timeout=TIMEOUT_S).values():
        future.result()
    rows = [_row(b) for b in bindings]
    if not args.json:
        print(f"added {len(rows)} ACL(s):")
        _print(rows)
    return {"added": rows}


def _filters(args, principals: list[tuple[str | None, AclPermissionType]]) -> list[AclBindingFilter]:
    pattern = ResourcePatternType[args.resource_pattern_type.upper()]
    resources = _resources(args) or [(ResourceType.ANY, None)]
    operations = [AclOperation[op] for op in args.operation] or [AclOperation.ANY]
    host = None if args.host == "*" and args.command == "list" else args.host
    return [AclBindingFilter(restype, name, pattern, principal, host, op, permission)
            for (restype, name), (principal, permission), op in itertools.product(resources, principals, operations)]


def list_acls(admin: AdminClient, args) -> dict:
    principals = [(p, AclPermissionType.ANY) for p in args.principal] or [(None, AclPermissionType.ANY)]
    rows = []
    for f in _filters(args, principals):
        rows += [_row(b) for b in admin.describe_acls(f, request_timeout=TIMEOUT_S).result()]
    rows.sort(key=lambda r: (r["resource_type"], r["name"], r["principal"], r["operation"]))
    if not args.json:
        _print(rows)
    return {"acls": rows}


def remove_acls(admin: AdminClient, args) -> dict:
    if not _resources(args):
        raise SystemExit("odradek acls remove: give the resource (--topic, --group, --cluster, --transactional-id)")
    principals = _principals(args) or [(None, AclPermissionType.ANY)]
    rows = []
    for future in admin.delete_acls(_filters(args, principals), request_timeout=TIMEOUT_S).values():
        rows += [_row(b) for b in future.result()]
    if not args.json:
        print(f"removed {len(rows)} ACL(s)" + (":" if rows else ""))
        if rows:
            _print(rows)
    return {"removed": rows}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="odradek acls", description="Kafka ACLs, through the Kafka protocol")
    common = access.common_parser()
    sub = ap.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("list", parents=[common], help="the ACLs matching the options (all by default)")
    add = sub.add_parser("add", parents=[common], help="create ACLs: every principal x operation x resource")
    rm = sub.add_parser("remove", parents=[common], help="delete the ACLs of a resource matching the options")
    ls.add_argument("--principal", action="append", default=[], help="e.g. User:alice (repeatable)")
    for sp in (add, rm):
        sp.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL")
        sp.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
    for sp, patterns, default in ((ls, ("any", "match", "literal", "prefixed"), "any"),
                                  (add, ("literal", "prefixed"), "literal"),
                                  (rm, ("any", "match", "literal", "prefixed"), "literal")):
        sp.add_argument("--operation", action="append", default=[], type=_operation,
                        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                             "AlterConfigs, IdempotentWrite, All (repeatable)")
        sp.add_argument("--host", default="*", help="the client host the ACL applies to (default: any)")
        sp.add_argument("--topic", action="append", default=[])
        sp.add_argument("--group", action="append", default=[])
        sp.add_argument("--transactional-id", action="append", default=[])
        sp.add_argument("--cluster", action="store_true", help="the cluster resource (kafka-cluster)")
        sp.add_argument("--resource-pattern-type", choices=patterns, default=default)
    return ap


COMMANDS = {"list": list_acls, "add": add_acls, "remove": remove_acls}


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    return run("odradek acls", COMMANDS, args, AdminClient(access.from_arguments(args).confluent()))
