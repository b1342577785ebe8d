"""Kafka users as the operator's ``OdradekUser`` declares them: one user's SCRAM credential,
its principal's ACLs and its quotas, in Kafka's ZooKeeper layout, written with the brokers' own
stores (``scram_store`` for ``/config/users/<user>`` through ``zk_data.ENTITY_CONFIG``, ``acl_store`` for ``/kafka-acl*`` and its
change notifications), so that every broker sees them as it sees ``kafka-configs`` and
``kafka-acls`` changes.

Owns: the check of a whole ``UserSpec`` before anything is written (Kafka's ACL names in any of
Kafka's spellings; the operations Kafka's ``kafka-acls`` allows per resource type; SCRAM
mechanism and iterations as AlterUserScramCredentials checks them), and the sync itself:
credential and quota keys in one read-modify-write of the user's znode (written only when they
differ: a password that already matches the stored credential is left alone), then the ACLs
pattern by pattern. Entity names are sanitized as Kafka's ``Sanitizer`` does (``CN=a`` ->
``CN%3Da``, ``zk_data.ENTITY_CONFIG.sanitize``). Blocking: the controller runs these calls in a thread,
as the active controller.
"""

from __future__ import annotations

from typing import Any, Callable

from odradek.broker.security.acl import Entry, Operation, Pattern, PatternType, Permission, ResourceType, \
    creation_problem
from odradek.broker.security.acl_store import AclStore
from odradek.broker.security.scram_store import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, ScramStore, \
    credential_from_password
from odradek.broker.zk.configs import EntityConfigs
from odradek.broker.zk.znodes import Znodes
from odradek.cluster.zk_data import ENTITY_CONFIG
from odradek.cluster.control_plane_users import UserAcl, UserSpec, UserState
from odradek.config.keys import ConfigType
from odradek.config.quotas import USER_CLIENT_QUOTAS
from odradek.errors import ErrorCode, KafkaError

# Kafka's kafka-acls (AclCommand.ResourceTypeToValidOperations), for the resource types a user's
# ACLs may name.
VALID_OPERATIONS = {
    ResourceType.TOPIC: {Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE, Operation.DELETE,
                         Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, Operation.ALL},
    ResourceType.GROUP: {Operation.READ, Operation.DESCRIBE, Operation.DELETE, Operation.ALL},
    ResourceType.CLUSTER: {Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                           Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE,
                           Operation.ALL},
    ResourceType.TRANSACTIONAL_ID: {Operation.DESCRIBE, Operation.WRITE, Operation.ALL},
}
SCRAM_MECHANISMS = tuple(MECHANISMS.values())
_PATTERNS = {"literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED, "prefix": PatternType.PREFIXED}


def _key(word: str) -> str:
    """Kafka's spellings of one name compare equal: ``DESCRIBE_CONFIGS``, ``DescribeConfigs``."""
    return word.replace("_", "").replace("-", "").lower()


def _lookup(word: str, allowed, what: str):
    found = next((m for m in allowed if _key(m.name) == _key(word)), None)
    if found is None:
        names = ", ".join(m.zk_name for m in allowed)
        raise KafkaError(ErrorCode.invalid_request, f"unknown ACL {what} '{word}' (one of: {names})")
    return found


def parse_acl(acl: UserAcl, principal: str) -> tuple[Pattern, Entry]:
    """One ACL in Kafka's model; INVALID_REQUEST with a one-line reason otherwise."""
    rtype = _lookup(acl.resource_type, tuple(VALID_OPERATIONS), "resource type")
    pattern = _PATTERNS.get(acl.pattern_type.lower())
    if pattern is None:
        raise KafkaError(ErrorCode.invalid_request, f"unknown ACL pattern type '{acl.pattern_type}' "
                                                    f"(literal or prefix)")
    operation = _lookup(acl.operation, [o for o in Operation if o > Operation.ANY], "operation")
    if operation not in VALID_OPERATIONS[rtype]:
        valid = ", ".join(sorted(o.zk_name for o in VALID_OPERATIONS[rtype]))
        raise KafkaError(ErrorCode.invalid_request, f"operation {operation.zk_name} is not valid for a "
                                                    f"{rtype.zk_name} resource (valid: {valid})")
    permission = _lookup(acl.permission, (Permission.ALLOW, Permission.DENY), "permission")
    p, e = Pattern(rtype, acl.name, pattern), Entry(principal, acl.host, operation, permission)
    problem = creation_problem(p, e)
    if problem:
        raise KafkaError(ErrorCode.invalid_request, problem)
    return p, e


def _check_scram(spec: UserSpec) -> None:
    scram = spec.scram
    if scram is None:
        return
    if scram.mechanism not in SCRAM_MECHANISMS:
        raise KafkaError(ErrorCode.unsupported_sasl_mechanism, f"Unknown SCRAM mechanism {scram.mechanism} "
                                                               f"(one of: {', '.join(SCRAM_MECHANISMS)})")
    if not MIN_ITERATIONS <= scram.iterations <= MAX_ITERATIONS:
        raise KafkaError(ErrorCode.unacceptable_credential, f"iterations must be in [{MIN_ITERATIONS}, "
                                                            f"{MAX_ITERATIONS}], not {scram.iterations}")


class UserAdmin:
    """``zk``: the controller's kazoo client (the store's session, with its ZooKeeper ACLs)."""

    def __init__(self, zk: Callable[[], Any]) -> None:
        znodes = Znodes(zk)
        self.scram = ScramStore(EntityConfigs(znodes))
        self.acls = AclStore(znodes)

    def describe(self, name: str, principal: str | None = None, changed: tuple[str, ...] = ()) -> UserState:
        principal = principal or f"User:{name}"
        config = self.scram.config(ENTITY_CONFIG.sanitize(name))
        scram = {m: int(text.rsplit("iterations=", 1)[1]) for m, text in config.items() if m in SCRAM_MECHANISMS}
        quotas = {k: float(v) for k, v in config.items() if k in USER_CLIENT_QUOTAS}
        acls = tuple(_as_user_acl(p, e) for p, entries in sorted(self._mine(principal).items(), key=_order)
                     for e in sorted(entries, key=lambda e: (e.operation, e.host, e.permission)))
        return UserState(name, principal, scram, acls, quotas, changed)

    def sync(self, name: str, spec: UserSpec) -> UserState:
        """Make the user what ``spec`` says; checks everything before writing anything."""
        _check_scram(spec)
        wanted: dict[Pattern, set[Entry]] = {}
        for acl in spec.acls:
            p, e = parse_acl(acl, spec.principal)
            wanted.setdefault(p, set()).add(e)
        changed = []
        groups = self._write_config(ENTITY_CONFIG.sanitize(name), spec)
        changed += groups
        if self._write_acls(spec.principal, {p: frozenset(es) for p, es in wanted.items()}):
            changed.append("acls")
        return self.describe(name, spec.principal, tuple(changed))

    def delete(self, name: str, principal: str | None = None) -> UserState:
        """Remove the user's credentials, quotas and its principal's ACLs."""
        return self.sync(name, UserSpec(principal or f"User:{name}"))

    # -- writing ---------------------------------------------------------------------------------
    def _write_config(self, user: str, spec: UserSpec) -> list[str]:
        """Credential and quota keys in one read-modify-write; which of them changed."""
        scram = spec.scram
        keep = scram is not None and self.scram.verify(user, scram.mechanism, scram.password) and \
            f"iterations={scram.iterations}" in self.scram.config(user).get(scram.mechanism, "")
        credential = None
        if scram is not None and not keep:
            credential = credential_from_password(scram.mechanism, scram.password, scram.iterations)
        quotas = {k: _number(k, v) for k, v in spec.quotas.items()}
        changed: list[str] = []

        def change(config: dict) -> None:
            changed.clear()
            before = dict(config)
            for m in SCRAM_MECHANISMS:
                if scram is None or m != scram.mechanism:
                    config.pop(m, None)
            if credential is not None:
                config[scram.mechanism] = credential
            for k in USER_CLIENT_QUOTAS:
                config.pop(k, None)
            config.update(quotas)
            if any(before.get(m) != config.get(m) for m in SCRAM_MECHANISMS):
                changed.append("scram")
            if any(before.get(k) != config.get(k) for k in USER_CLIENT_QUOTAS):
                changed.append("quotas")
        self.scram.update_config(user, change)
        return changed

    def _mine(self, principal: str) -> dict[Pattern, frozenset[Entry]]:
        return {p: mine for p, entries in self.acls.read_all().items()
                if (mine := frozenset(e for e in entries if e.principal == principal))}

    def _write_acls(self, principal: str, wanted: dict[Pattern, frozenset[Entry]]) -> bool:
        current = self._mine(principal)
        if current == wanted:
            return False
        for p in sorted(set(current) | set(wanted), key=_order):
            if current.get(p, frozenset()) != wanted.get(p, frozenset()):
                self.acls.update(p, lambda before, p=p: frozenset(e for e in before if e.principal != principal)
                                 | wanted.get(p, frozenset()))
        return True


def _number(key: str, value: float) -> str:
    """The text Kafka stores for a quota: the byte rates are LONGs, request_percentage and
    controller_mutation_rate DOUBLEs (the registry's types)."""
    return repr(float(value)) if USER_CLIENT_QUOTAS[key].type.code == ConfigType.DOUBLE else str(int(value))


def _order(item) -> tuple:
    p = item[0] if isinstance(item, tuple) else item
    return p.type, p.pattern, p.name


def _as_user_acl(p: Pattern, e: Entry) -> UserAcl:
    return UserAcl(p.type.name, p.name, p.pattern.name, e.operation.name, e.host, e.permission.name)
