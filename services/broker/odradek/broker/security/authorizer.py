"""The ACL authorizer (Kafka's AclAuthorizer, ZooKeeper mode) and the one check handlers use.

Decision for (principal, host, operation, resource), as Kafka's: a super user (``super.users``)
is allowed everything; otherwise the entries of every pattern covering the resource (LITERAL
name, LITERAL ``*``, PREFIXED) decide: none at all -> ``allow.everyone.if.no.acl.found``; a
DENY for this principal (or ``User:*``) and host (or ``*``) with the operation or ALL -> denied
(DENY wins); else an ALLOW with the operation, ALL, or an operation implying it (READ, WRITE,
DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) -> allowed.

``User:ANONYMOUS`` (every PLAINTEXT client, every TLS client without a certificate, and a SASL
connection before it authenticates) is a super user only if ``super.users`` names it, as in
Kafka; naming it is logged as a warning at start, since it makes every such client one.

Handlers call ``allowed(ctx, op, type, name)``: with no authorizer configured it is one
attribute check, so the produce and fetch paths cost nothing more.
"""

from __future__ import annotations

import logging
from odradek.broker.security.acl import (CLUSTER_NAME, IMPLIES, WILDCARD, Entry, Operation, PatternType, Permission,
                                         ResourceType)
from odradek.broker.security.acl_store import AclStore
from odradek.broker.security.session import ANONYMOUS, RequestContext, current
from odradek.broker.zk.znodes import Znodes
from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger("odradek.authorizer")

DENIED = "Authorization failed."           # Kafka's message for a denied topic in CreateTopics
CLUSTER_DENIED = "Cluster authorization failed."


def host_of(address: str) -> str:
    """The client's IP from ``host:port`` (IPv6 brackets removed)."""
    return address.rsplit(":", 1)[0].strip("[]") if ":" in address else address


class Authorizer:
    def __init__(self, super_users: str, allow_if_no_acl: bool, store: AclStore) -> None:
        self.super_users = frozenset(p.strip() for p in super_users.split(";") if p.strip())
        if ANONYMOUS in self.super_users:
            log.warning("super.users names %s: every client of a PLAINTEXT listener, and every TLS client without "
                        "a certificate, is then a super user", ANONYMOUS)
        self.allow_if_no_acl = allow_if_no_acl
        self.store = store

    def start(self) -> None:
        self.store.start()

    def authorize(self, who: RequestContext, op: Operation, rtype: ResourceType, name: str,
                  log_denied: bool = True) -> bool:
        principal = who.principal
        if principal in self.super_users:
            return True
        host = host_of(who.client_address)
        entries = self.store.snapshot.matching(rtype, name)
        allowed = self._decide(entries, principal, host, op)
        if not allowed and log_denied:
            log.info("Principal = %s is Denied Operation = %s from host = %s on resource = %s:LITERAL:%s",
                     principal, op.name, host, rtype.name, name)
        return allowed

    def _decide(self, entries: list[Entry], principal: str, host: str, op: Operation) -> bool:
        if not entries:
            return self.allow_if_no_acl
        mine = [e for e in entries if e.applies_to(principal, host)]
        if any(e.permission == Permission.DENY and e.operation in (op, Operation.ALL) for e in mine):
            return False
        granting = IMPLIES.get(op, frozenset((op,))) | {Operation.ALL}
        return any(e.permission == Permission.ALLOW and e.operation in granting for e in mine)

    def authorize_any(self, who: RequestContext, op: Operation, rtype: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: is ``op`` allowed on at least one resource of this
        type (InitProducerId's WRITE-on-any-topic)? An ALLOW pattern counts unless a DENY for
        the principal covers it (same LITERAL name, ``*``, or a PREFIXED prefix of its name)."""
        principal = who.principal
        if principal in self.super_users:
            return True
        host = host_of(who.client_address)
        bindings = {p: es for p, es in self.store.snapshot.bindings.items() if p.type == rtype}
        if not bindings:
            return self.allow_if_no_acl
        mine = [(p, e) for p, es in bindings.items() for e in es
                if e.applies_to(principal, host) and e.operation in (op, Operation.ALL)]
        denies = [p for p, e in mine if e.permission == Permission.DENY]
        for p, e in mine:
            if e.permission == Permission.ALLOW and not any(
                    d.covers(p.name) and (d.pattern == PatternType.PREFIXED or p.pattern == PatternType.LITERAL
                                         or d.name == WILDCARD)
                    for d in denies):
                return True
        return False


def allowed(ctx, op: Operation, rtype: ResourceType, name: str = CLUSTER_NAME, log_denied: bool = True) -> bool:
    """May the current connection's principal do ``op`` on this resource? (Always, with no
    authorizer configured.) ``log_denied=False`` where a denial only filters a listing, as
    Kafka's authorizer logger does not report those."""
    authorizer = ctx.authorizer
    return authorizer is None or authorizer.authorize(current(), op, rtype, name, log_denied)


def require_cluster(ctx, op: Operation) -> None:
    """CLUSTER_AUTHORIZATION_FAILED unless ``op`` is allowed on the cluster."""
    if not allowed(ctx, op, ResourceType.CLUSTER):
        raise KafkaError(ErrorCode.cluster_authorization_failed, CLUSTER_DENIED)


# Kafka's AclEntry.supportedOperations: what include_*_authorized_operations reports on
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE, Operation.DELETE,
                         Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                           Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE),
}
OPERATIONS_OMITTED = -2147483648   # Kafka's sentinel when the client did not ask for them


def authorized_operations(ctx, rtype: ResourceType, name: str = CLUSTER_NAME, wanted: bool = True) -> int:
    """Kafka's bit field (bit ``op.value``) of the operations the current principal may perform on
    the resource (every supported one with no authorizer); the sentinel unless ``wanted``."""
    if not wanted:
        return OPERATIONS_OMITTED
    ops = SUPPORTED_OPERATIONS[rtype]
    return sum(1 << op.value for op in ops if allowed(ctx, op, rtype, name, log_denied=False))


def allowed_any(ctx, op: Operation, rtype: ResourceType) -> bool:
    authorizer = ctx.authorizer
    return authorizer is None or authorizer.authorize_any(current(), op, rtype)


def authorizer_of(config, znodes: Znodes) -> Authorizer | None:
    """The broker's authorizer over the ACLs ZooKeeper holds, or None when ``authorizer.class.name`` is empty."""
    if not config.authorizer_class_name:
        return None
    return Authorizer(config.super_users, config.allow_everyone_if_no_acl_found, AclStore(znodes))
