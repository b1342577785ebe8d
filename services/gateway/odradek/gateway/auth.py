"""Optional bearer-token auth. The tokens file (``--auth-file``, e.g. a mounted Kubernetes
Secret) is JSON::

    {"tokens": [{"token": "s3cret", "name": "etl", "admin": false,
                 "topics": {"orders": "rw", "audit-*": "r"}}]}

Rights per topic name pattern (fnmatch): ``r`` read, ``w`` write; ``admin`` allows topic
administration (create, delete, alter). No file: every request is allowed. A missing or
unknown token answers 401 (40101); a token without the right answers 403 (40301).
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
        self._by_token = {t["token"]: Principal(t.get("name", "?"), dict(t.get("topics", {})), bool(t.get("admin")))
                          for t in doc.get("tokens", [])}
        self._mtime = mtime

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
