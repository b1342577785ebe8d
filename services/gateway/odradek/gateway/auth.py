"""Bearer-token auth. The tokens file (``--auth-file``, e.g. a mounted Kubernetes Secret) is JSON::

    {"tokens": [{"token": "s3cret", "name": "etl", "admin": false,
                 "topics": {"orders": "rw", "audit-*": "r"}, "groups": ["etl-*"]}]}

Rights per topic name pattern (fnmatch): ``r`` read, ``w`` write; ``groups``: the consumer
group id patterns the token may use (consumer instances, v3 group views; absent: any group,
leaving the decision to the brokers' group ACLs); ``admin`` allows topic and group
administration (create, delete, alter, offset reset). No file: every request is allowed
(``--require-auth`` refuses to start without one, and then every route but the probes needs a
token). A missing or unknown token answers 401 (40101, ``WWW-Authenticate: Bearer``); a token
without the right answers 403 (40301).

Principal propagation: an entry mapped to a Kafka principal acts on the brokers as that
principal (``principals``), so the brokers' ACLs decide too; an entry without a mapping acts as
the gateway's own principal. The mapping is what the gateway's security protocol can carry:
``kafka_username`` and ``kafka_password`` (or ``kafka_password_file``) under ``SASL_*``;
``kafka_ssl_certificate_location`` and ``kafka_ssl_key_location`` (a client certificate) under
``SSL``. A mapping the protocol cannot carry is refused when the file is read, never served as
the gateway's principal. Paths in the file are relative to it. Both checks apply: these rights
first, then the ACLs; a mapped entry with neither ``topics`` nor ``admin`` has every right here,
leaving the decision to the ACLs.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import json
from dataclasses import dataclass, field
from pathlib import Path

from fastapi import Depends, Request

from odradek.gateway import edge
from odradek.gateway.errors import Forbidden, Unauthenticated

READ, WRITE, ADMIN = "r", "w", "admin"
EVERY_GROUP = ("*",)


@dataclass(frozen=True)
class KafkaLogin:
    """The Kafka credentials an HTTP user is mapped to: SASL, or a client certificate (PEM)."""
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    certificate: str | None = None
    key: str | None = None

    @property
    def principal(self) -> str:
        """The principal the brokers will see (a certificate's subject as Kafka names it)."""
        if self.username is not None:
            return f"User:{self.username}"
        from cryptography import x509
        cert = x509.load_pem_x509_certificate(Path(self.certificate).read_bytes())
        return f"User:{cert.subject.rfc4514_string()}"

    def cache_key(self) -> tuple:
        """Which clients serve this login: a changed password or certificate logs in afresh."""
        if self.username is not None:
            return ("sasl", self.username, hashlib.sha256(self.password.encode()).digest())
        return ("ssl", self.certificate, hashlib.sha256(Path(self.certificate).read_bytes()).digest())


@dataclass(frozen=True)
class Principal:
    name: str
    topics: dict[str, str] = field(default_factory=dict)
    admin: bool = False
    kafka: KafkaLogin | None = None               # None: the gateway's own principal
    groups: tuple[str, ...] = EVERY_GROUP

    def may(self, right: str, topic: str | None) -> bool:
        if right == ADMIN:
            return self.admin
        if topic is None:
            return True
        return any(right in rights for pattern, rights in self.topics.items() if fnmatch.fnmatchcase(topic, pattern))

    def sees(self, topic: str) -> bool:
        """Whether the topic is listed to this user (any right on it)."""
        return self.may(READ, topic) or self.may(WRITE, topic)

    def reads_every_topic(self) -> bool:
        """A pattern subscription can match any topic, now or later: only for a token that may
        read every topic (the brokers' ACLs still decide for a mapped user)."""
        return any(READ in rights for pattern, rights in self.topics.items() if pattern == "*")

    def may_group(self, group: str | None) -> bool:
        return group is None or any(fnmatch.fnmatchcase(group, p) for p in self.groups)

    @property
    def kafka_username(self) -> str | None:
        return self.kafka.username if self.kafka else None


ANONYMOUS = Principal("anonymous", {"*": "rw"}, admin=True)


class Tokens:
    def __init__(self, path: str, protocol: str = "PLAINTEXT"):
        self.path = Path(path)
        self.protocol = protocol.upper()      # the gateway's security.protocol: which mappings it carries
        self._by_token: dict[str, Principal] = {}
        self._mtime = 0.0
        self.reload()

    def reload(self) -> None:
        """Re-read the file when it changed (a Secret update reaches a mounted file)."""
        mtime = self.path.stat().st_mtime
        if mtime == self._mtime:
            return
        doc = json.loads(self.path.read_text())
        self._by_token = {t["token"]: self._principal(t) for t in doc.get("tokens", [])}
        self._mtime = mtime

    def _principal(self, entry: dict) -> Principal:
        login = self._login(entry)
        # a mapped user without rights of its own has them all: the brokers' ACLs alone decide;
        # rights given (topics or admin) narrow them, as for any user
        everything = login is not None and "topics" not in entry and "admin" not in entry
        groups = tuple(entry["groups"]) if "groups" in entry else EVERY_GROUP
        return Principal(entry.get("name", "?"), {"*": "rw"} if everything else dict(entry.get("topics", {})),
                         everything or bool(entry.get("admin")), login, groups)

    def _login(self, entry: dict) -> KafkaLogin | None:
        who = f"{self.path}: the token of {entry.get('name', '?')}"
        password = entry.get("kafka_password")
        if entry.get("kafka_password_file"):
            password = self._relative(entry["kafka_password_file"]).read_text().strip()
        if bool(entry.get("kafka_username")) != (password is not None):
            raise ValueError(f"{who} needs both kafka_username and kafka_password (or kafka_password_file)")
        cert, key = entry.get("kafka_ssl_certificate_location"), entry.get("kafka_ssl_key_location")
        if bool(cert) != bool(key):
            raise ValueError(f"{who} needs both kafka_ssl_certificate_location and kafka_ssl_key_location")
        if password is not None:
            if not self.protocol.startswith("SASL_"):
                raise ValueError(f"{who} maps to SASL credentials, which {self.protocol} cannot carry: "
                                 "map it to a client certificate, or connect with SASL_SSL")
            return KafkaLogin(entry["kafka_username"], password)
        if cert:
            if self.protocol != "SSL":
                raise ValueError(f"{who} maps to a client certificate, which names the principal only "
                                 f"under SSL (not {self.protocol}): map it to SASL credentials")
            return KafkaLogin(certificate=str(self._relative(cert)), key=str(self._relative(key)))
        return None

    def _relative(self, name: str) -> Path:
        return self.path.parent / name

    def principal(self, presented: str) -> Principal | None:
        self.reload()
        found = None
        for token, who in self._by_token.items():   # every token compared: no early exit to time
            if hmac.compare_digest(token.encode(), presented.encode()):
                found = who
        return found


def authenticate(request: Request) -> Principal:
    return _bearer(request.app.state.tokens, request.headers.get("authorization", ""))


def _bearer(tokens: Tokens | None, authorization: str) -> Principal:
    if tokens is None:
        return ANONYMOUS
    scheme, _, presented = authorization.partition(" ")
    who = tokens.principal(presented.strip()) if scheme.lower() == "bearer" and presented else None
    if who is None:
        raise Unauthenticated("Authentication required: send 'Authorization: Bearer <token>' "
                              "with a token from the gateway's auth file")
    return who


# what --require-auth leaves open: the probes, the route counters of /metrics (no topic, group or
# user names) and the console's static files (no data: the console signs in like any client)
OPEN_PATHS = frozenset(("/healthz", "/readyz", "/metrics", "/"))
CONSOLE = "/console"


class RequireToken:
    """ASGI middleware for ``--require-auth``: a request without a token the auth file knows
    answers 401 before routing, whatever its path (a route added later is closed too); the
    routes' own checks (``require``) then decide its rights."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "")
        if scope["type"] == "http" and path not in OPEN_PATHS and not (
                path == CONSOLE or path.startswith(CONSOLE + "/")):
            headers = dict(scope.get("headers", ()))
            try:
                _bearer(scope["app"].state.tokens, headers.get(b"authorization", b"").decode("latin-1"))
            except Unauthenticated as e:
                return await edge.response(e)(scope, receive, send)
        await self.app(scope, receive, send)


def check_group(who: Principal, group: str | None) -> None:
    if not who.may_group(group):
        raise Forbidden(f"{who.name} may not use consumer group {group}")


def require(right: str):
    """A dependency: the caller may ``right`` on the path's ``{topic}`` and use its ``{group}``
    (if any)."""
    def check(request: Request, who: Principal = Depends(authenticate)) -> Principal:
        topic = request.path_params.get("topic") or request.path_params.get("topic_name")
        if not who.may(right, topic):
            what = "administer topics" if right == ADMIN else f"{'read' if right == READ else 'write'} {topic}"
            raise Forbidden(f"{who.name} may not {what}")
        check_group(who, request.path_params.get("group"))
        return who
    return Depends(check)
