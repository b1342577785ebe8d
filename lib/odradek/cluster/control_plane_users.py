"""The control-plane contract for Kafka users (docs/control-plane.md, "Users"): the routes and
bodies through which the operator (an ``OdradekUser``) makes one user's SCRAM credential, ACLs
and quotas what its spec says. Part of ``control_plane``'s contract, kept in its own module
because that one is full; it uses the same ``Route``/``Request`` types and validation helpers
(``control_plane_base``). The quota keys are the registry's (``odradek.config.quotas``).

``PUT /internal/v1/users/{name}`` is a whole-user sync (``UserSpec``): the credential, the
ACLs whose principal is ``principal`` and the quota keys become exactly what the body says
(``scram: null`` removes any SCRAM credential, an empty ``acls`` removes the principal's ACLs,
absent quota keys are removed). The body is checked whole before anything is written, so a bad
ACL changes nothing. ``GET`` describes the user, ``DELETE`` removes all three. Resource types,
operations and pattern types are Kafka's names in any of Kafka's spellings (``TOPIC``/``Topic``,
``DESCRIBE_CONFIGS``/``DescribeConfigs``, ``PREFIXED``); the controller checks them (the ACL
model lives with the brokers' authorizer).
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Mapping

from odradek.cluster.control_plane_base import PREFIX, Request, Route, _bad, _field
from odradek.config.quotas import USER_CLIENT_QUOTAS


@dataclass(frozen=True, slots=True)
class ScramPassword:
    """The password the credential is derived from (the controller salts it, as Kafka's
    ``kafka-configs --zookeeper`` does); the control plane is mutual TLS in a secured cluster."""

    password: str
    mechanism: str = "SCRAM-SHA-512"
    iterations: int = 4096

    def to_json(self) -> dict:
        return {"mechanism": self.mechanism, "password": self.password, "iterations": self.iterations}

    @classmethod
    def from_json(cls, body: Any) -> "ScramPassword":
        if not isinstance(body, dict):
            raise _bad("'scram' must be an object with 'password' or null")
        password = _field(body, "password", str)
        if not password:
            raise _bad("the SCRAM password must not be empty")
        return cls(password, _field(body, "mechanism", str, "SCRAM-SHA-512"), _field(body, "iterations", int, 4096))


@dataclass(frozen=True, slots=True)
class UserAcl:
    """One ACL of the user's principal, in Kafka's terms (names as given; the controller checks)."""

    resource_type: str
    name: str
    pattern_type: str = "LITERAL"
    operation: str = "ALL"
    host: str = "*"
    permission: str = "ALLOW"

    def to_json(self) -> dict:
        return {"resource_type": self.resource_type, "name": self.name, "pattern_type": self.pattern_type,
                "operation": self.operation, "host": self.host, "permission": self.permission}

    @classmethod
    def from_json(cls, body: Any) -> "UserAcl":
        if not isinstance(body, dict):
            raise _bad("each of 'acls' must be an object")
        return cls(_field(body, "resource_type", str), _field(body, "name", str),
                   _field(body, "pattern_type", str, "LITERAL"), _field(body, "operation", str),
                   _field(body, "host", str, "*"), _field(body, "permission", str, "ALLOW"))


def _quotas(value: Any) -> dict[str, float]:
    if not isinstance(value, dict):
        raise _bad("'quotas' must be an object")
    out = {}
    for key, v in value.items():
        if key not in USER_CLIENT_QUOTAS:
            raise _bad(f"unknown user quota '{key}' (known: {', '.join(USER_CLIENT_QUOTAS)})")
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
            raise _bad(f"quota '{key}' must be a number >= 0")
        out[key] = float(v)
    return out


@dataclass(frozen=True, slots=True)
class UserSpec:
    """What ``PUT /users/{name}`` makes the user: ``principal`` is the one its ACLs name
    (``User:<name>`` for SCRAM users, ``User:CN=<name>`` for certificate users)."""

    principal: str
    scram: ScramPassword | None = None
    acls: tuple[UserAcl, ...] = ()
    quotas: Mapping[str, float] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"principal": self.principal, "scram": None if self.scram is None else self.scram.to_json(),
                "acls": [a.to_json() for a in self.acls], "quotas": dict(self.quotas)}

    @classmethod
    def from_json(cls, body: Mapping) -> "UserSpec":
        principal = _field(body, "principal", str)
        if not principal.startswith("User:") or principal == "User:" or principal == "User:*":
            raise _bad(f"'principal' must be User:<name> of one user, not {principal!r}")
        scram = body.get("scram")
        return cls(principal, None if scram is None else ScramPassword.from_json(scram),
                   tuple(UserAcl.from_json(a) for a in _field(body, "acls", list, [], nullable=True)),
                   _quotas(_field(body, "quotas", dict, {}, nullable=True)))


@dataclass(frozen=True, slots=True)
class UserState:
    """A user as the cluster stores it: SCRAM mechanisms with their iterations, the principal's
    ACLs (Kafka's canonical names), the quota keys; ``changed`` lists what a PUT or DELETE wrote
    (``scram``, ``acls``, ``quotas``)."""

    name: str
    principal: str
    scram: Mapping[str, int] = field(default_factory=dict)
    acls: tuple[UserAcl, ...] = ()
    quotas: Mapping[str, float] = field(default_factory=dict)
    changed: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"name": self.name, "principal": self.principal, "scram": dict(self.scram),
                "acls": [a.to_json() for a in self.acls], "quotas": dict(self.quotas), "changed": list(self.changed)}

    @classmethod
    def from_json(cls, d: Mapping) -> "UserState":
        return cls(d["name"], d["principal"], dict(d["scram"]), tuple(UserAcl(**a) for a in d["acls"]),
                   dict(d["quotas"]), tuple(d["changed"]))


USER = Route("GET", PREFIX + "/users/{name}", UserState.from_json)
PUT_USER = Route("PUT", PREFIX + "/users/{name}", UserState.from_json)
DELETE_USER = Route("DELETE", PREFIX + "/users/{name}", UserState.from_json)
USER_ROUTES = (USER, PUT_USER, DELETE_USER)


def describe_user(name: str, principal: str | None = None) -> Request[UserState]:
    """``principal`` (default ``User:<name>``) names whose ACLs are listed."""
    return Request(USER, USER.path(name=name) + _principal_query(principal))


def put_user(name: str, spec: UserSpec) -> Request[UserState]:
    return Request(PUT_USER, PUT_USER.path(name=name), spec.to_json())


def delete_user(name: str, principal: str | None = None) -> Request[UserState]:
    return Request(DELETE_USER, DELETE_USER.path(name=name) + _principal_query(principal))


def _principal_query(principal: str | None) -> str:
    return "" if principal is None else "?" + urllib.parse.urlencode({"principal": principal})
