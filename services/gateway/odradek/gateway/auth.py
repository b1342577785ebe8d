"""Optional bearer-token auth. The tokens file (``--auth-file``, e.g. a mounted Kubernetes
Secret) is JSON::

    {"tokens": [{"token": "s3cret", "name": "etl", "admin": false,
                 "topics": {"orders": "rw", "audit-*": "r"}}]}

Rights per topic name pattern (fnmatch): ``r`` read, ``w`` write; ``admin`` allows topic
administration (create, delete, alter). No file: every request is allowed. A missing or
unknown token answers 401 (40101); a token without the right answers 403 (40301).

Principal propagation: an entry with ``kafka_username`` and ``kafka_password`` (or
``kafka_password_file``, relative to the tokens file) acts on the brokers as that Kafka
principal (``principals``), so the brokers' ACLs decide too; an entry without them acts as the
gateway's own principal. Both checks apply: these rights first, then the ACLs; a mapped entry
with neither ``topics`` nor ``admin`` has every right here, leaving the decision to the ACLs.
"""

from __future__ import annotations

import fnmatch
import hmac
import json
from dataclasses import dataclass, field
from pathlib import Path

from fastapi import Depends, Request

from odradek.gateway.errors import Forbidden, Unauthenticated

READ, WRITE, ADMIN = "r", "w", "admin"


@dataclass(frozen=True)
class Principal:
    name: str
    topics: dict[str, str] = field(default_factory=dict)
    admin: bool = False
    kafka_username: str | None = None                        # None: the gateway's own principal
    kafka_password: str | None = field(default=None, repr=False)

    def may(self, right: str, topic: str | None) -> bool:
        if right == ADMIN:
            return self.admin
        if topic is None:
            return True
        return any(right in rights for pattern, rights in self.topics.items() if fnmatch.fnmatchcase(topic, pattern))


ANONYMOUS = Principal("anonymous", {"*": "rw"}, admin=True)


class Tokens:
    def __init__(self, path: str):
        self.path = Path(path)
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
        password = entry.get("kafka_password")
        if entry.get("kafka_password_file"):
            password = (self.path.parent / entry["kafka_password_file"]).read_text().strip()
        if bool(entry.get("kafka_username")) != (password is not None):
            raise ValueError(f"{self.path}: the token of {entry.get('name', '?')} needs both kafka_username "
                             "and kafka_password (or kafka_password_file)")
        # a mapped user without rights of its own has them all: the brokers' ACLs alone decide;
        # rights given (topics or admin) narrow them, as for any user
        everything = password is not None and "topics" not in entry and "admin" not in entry
        return Principal(entry.get("name", "?"), {"*": "rw"} if everything else dict(entry.get("topics", {})),
                         everything or bool(entry.get("admin")), entry.get("kafka_username"), password)

    def principal(self, presented: str) -> Principal | None:
        self.reload()
        for token, who in self._by_token.items():
            if hmac.compare_digest(token.encode(), presented.encode()):
                return who
        return None


def authenticate(request: Request) -> Principal:
    tokens: Tokens | None = request.app.state.tokens
    if tokens is None:
        return ANONYMOUS
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    who = tokens.principal(presented.strip()) if scheme.lower() == "bearer" and presented else None
    if who is None:
        raise Unauthenticated("Authentication required: send 'Authorization: Bearer <token>' "
                              "with a token from the gateway's auth file")
    return who


def require(right: str):
    """A dependency: the caller may ``right`` on the path's ``{topic}`` (if any)."""
    def check(request: Request, who: Principal = Depends(authenticate)) -> Principal:
        topic = request.path_params.get("topic") or request.path_params.get("topic_name")
        if not who.may(right, topic):
            what = "administer topics" if right == ADMIN else f"{'read' if right == READ else 'write'} {topic}"
            raise Forbidden(f"{who.name} may not {what}")
        return who
    return Depends(check)
