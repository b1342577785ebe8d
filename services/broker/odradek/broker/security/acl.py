"""Kafka's ACL model: resource types, operations, permissions, pattern types (with Kafka's wire
codes), the ``Acl`` binding, the filters of DescribeAcls/DeleteAcls, and the JSON one resource
znode holds in ZooKeeper (Kafka's ``AclEntry`` format).

A binding is a resource pattern (type, name, LITERAL or PREFIXED) plus an entry (principal,
host, operation, permission). Names on the wire are Kafka's enum codes; names in ZooKeeper
are Kafka's CamelCase spellings (``Topic``, ``DescribeConfigs``, ``Allow``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from odradek.cluster.zk_data import ACL

WILDCARD = "*"                 # a LITERAL resource name matching every name, and "any host"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


class _Spelled:
    """Kafka's CamelCase spelling of an enum member in ZooKeeper (``DESCRIBE_CONFIGS`` -> ``DescribeConfigs``)."""
    name: str

    @property
    def zk_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))


class ResourceType(_Spelled, IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class Operation(_Spelled, IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(_Spelled, IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


SPECIFIC_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID,
                  ResourceType.DELEGATION_TOKEN, ResourceType.USER)
_OPERATIONS = {o.zk_name: o for o in Operation if o > Operation.ANY}
_PERMISSIONS = {p.zk_name: p for p in (Permission.ALLOW, Permission.DENY)}

# Kafka's implied operations: an ALLOW of any of these also allows DESCRIBE (DESCRIBE_CONFIGS).
IMPLIES = {Operation.DESCRIBE: frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE,
                                          Operation.ALTER}),
           Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS})}


@dataclass(frozen=True, slots=True)
class Pattern:
    type: ResourceType
    name: str
    pattern: PatternType

    def covers(self, name: str) -> bool:
        """Does this pattern apply to the resource of that name (same type assumed)?"""
        if self.pattern == PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == name or self.name == WILDCARD


@dataclass(frozen=True, slots=True)
class Entry:
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def applies_to(self, principal: str, host: str) -> bool:
        return (self.principal == principal or self.principal == WILDCARD_PRINCIPAL) and self.host in (host, WILDCARD)

    def to_json(self) -> dict:
        return {"principal": self.principal, "permissionType": self.permission.zk_name,
                "operation": self.operation.zk_name, "host": self.host}


def encode_entries(entries) -> bytes:
    """The znode body of one resource (``zk_data.ACL``), entries in Kafka's order."""
    ordered = sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission))
    return ACL.encode([e.to_json() for e in ordered])


def decode_entries(data: bytes | None) -> frozenset[Entry]:
    return frozenset(Entry(a["principal"], a["host"], _OPERATIONS[a["operation"]], _PERMISSIONS[a["permissionType"]])
                     for a in ACL.decode(data))


@dataclass(frozen=True, slots=True)
class Filter:
    """A DescribeAcls / DeleteAcls filter (None: any value), matched as Kafka's AclBindingFilter."""
    type: ResourceType
    name: str | None
    pattern: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    @classmethod
    def of(cls, request) -> Filter:
        return cls(ResourceType(request.resource_type_filter), request.resource_name_filter,
                   PatternType(getattr(request, "pattern_type_filter", PatternType.LITERAL)),
                   request.principal_filter, request.host_filter, Operation(request.operation),
                   Permission(request.permission_type))

    def invalid(self) -> str | None:
        """Why this filter can match nothing Kafka would accept, or None."""
        if PatternType.UNKNOWN in (self.pattern,) or self.type == ResourceType.UNKNOWN:
            return "the filter's resource type or pattern type is unknown"
        if self.operation == Operation.UNKNOWN or self.permission == Permission.UNKNOWN:
            return "the filter's operation or permission type is unknown"
        return None

    def matches_pattern(self, p: Pattern) -> bool:
        if self.type != ResourceType.ANY and self.type != p.type:
            return False
        if self.pattern not in (PatternType.ANY, PatternType.MATCH) and self.pattern != p.pattern:
            return False
        if self.name is None:
            return True
        if self.pattern in (PatternType.ANY, p.pattern):
            return self.name == p.name
        return p.covers(self.name)

    def matches_entry(self, e: Entry) -> bool:
        return ((self.principal is None or self.principal == e.principal)
                and (self.host is None or self.host == e.host)
                and self.operation in (Operation.ANY, e.operation)
                and self.permission in (Permission.ANY, e.permission))


def creation_problem(pattern: Pattern, entry: Entry) -> str | None:
    """Why Kafka would refuse to create this binding (INVALID_REQUEST), or None."""
    if pattern.type not in SPECIFIC_TYPES:
        return f"Invalid resource type {pattern.type.name}"
    if pattern.pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid pattern type {pattern.pattern.name}"
    if pattern.type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not pattern.name:
        return "Resource name should not be empty"
    if entry.operation in (Operation.ANY, Operation.UNKNOWN):
        return f"Invalid operation {entry.operation.name}"
    if entry.permission not in (Permission.ALLOW, Permission.DENY):
        return f"Invalid permission type {entry.permission.name}"
    kind, _, name = entry.principal.partition(":")
    if not kind or not name:
        return f"Could not parse principal from `{entry.principal}` (no colon is present separating the " \
               f"principal type from the principal name)"
    return None
