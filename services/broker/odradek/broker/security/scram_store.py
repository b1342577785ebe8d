"""SCRAM credentials in ZooKeeper, where Kafka's ZooKeeper mode keeps them, and the admin APIs.

``/config/users/<user>`` (under the cluster's chroot) holds Kafka's JSON:
``{"version":1,"config":{"SCRAM-SHA-512":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096"}}``.
As Kafka's ZooKeeper-mode brokers do (AdminZkClient), the broker that receives
AlterUserScramCredentials writes the znode itself; every broker reads it at each SCRAM login,
so a new user can log in anywhere at once. The client sends the salted password (never the
password): the stored and server keys are derived from it as RFC 5802 defines them.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import hmac
import json
import os
from typing import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from odradek.broker.security.acl import Operation
from odradek.broker.security.authorizer import CLUSTER_DENIED
from odradek.cluster import entity_config as ec
from odradek.cluster.entity_config import read_entity_config, write_entity_config
from odradek.errors import ErrorCode
from odradek.protocol.codec import Schemas, make

DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51
USERS = "/config/users"
MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # Kafka's ScramMechanism type ids
_HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384
ZERO = datetime.timedelta(0)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def credential_string(mechanism: str, salt: bytes, salted_password: bytes, iterations: int) -> str:
    digest = _HASHES[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    server_key = hmac.new(salted_password, b"Server Key", digest).digest()
    return (f"salt={_b64(salt)},stored_key={_b64(digest(client_key).digest())},"
            f"server_key={_b64(server_key)},iterations={iterations}")


def credential_from_password(mechanism: str, password: str, iterations: int = MIN_ITERATIONS) -> str:
    """Kafka's credential string for ``password`` with a fresh random salt."""
    salt = os.urandom(24)
    salted = hashlib.pbkdf2_hmac(_HASHES[mechanism]().name, password.encode(), salt, iterations)
    return credential_string(mechanism, salt, salted, iterations)


def parse_credential(text: str) -> tuple[bytes, bytes, bytes, int]:
    """Kafka's credential string -> scramp's (salt, stored_key, server_key, iterations)."""
    fields = dict(part.split("=", 1) for part in text.split(","))
    return (base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
            base64.b64decode(fields["server_key"]), int(fields["iterations"]))


def scram_username(client_first: bytes) -> str | None:
    """The ``n=`` attribute of a SCRAM client-first message, unescaped (=2C, =3D)."""
    for attribute in client_first.decode("utf-8", "replace").split(",")[2:]:
        if attribute.startswith("n="):
            return attribute[2:].replace("=2C", ",").replace("=3D", "=")
    return None


class ScramStore:
    def __init__(self, zk: Callable[[], KazooClient | None]) -> None:
        self._zk = zk
        # the authorizer's verdict on ALTER / DESCRIBE of the cluster (set by the broker)
        self.cluster_allowed: Callable[[Operation], bool] = lambda op: True

    def _read(self, user: str) -> tuple[dict, int]:
        zk = self._zk()
        if zk is None:
            raise NoNodeError(USERS)
        data, stat = zk.get(f"{USERS}/{user}")
        return json.loads(data or b"{}"), stat.version

    def lookup(self, user: str, mechanism: str) -> tuple[bytes, bytes, bytes, int] | None:
        try:
            doc, _ = self._read(user)
        except (NoNodeError, ValueError):
            return None
        text = doc.get("config", {}).get(mechanism)
        return parse_credential(text) if text else None

    async def credentials_for_first_message(self, client_first: bytes, mechanism: str):
        """(user, credentials) for a SCRAM client-first message, or None for an unknown user."""
        user = scram_username(client_first)
        if not user:
            return None
        credentials = await asyncio.to_thread(self.lookup, user, mechanism)
        return (user, credentials) if credentials else None

    def update_config(self, user: str, change: Callable[[dict], None]) -> bool:
        """Change one user's config (SCRAM keys and quota keys live there together) as Kafka's
        AdminZkClient does (``entity_config``: compare-and-set, then the change notification the
        brokers' quota caches follow); True if it changed. Nothing is written when ``change``
        leaves the config as it is (the operator's periodic syncs)."""
        zk = self._zk()
        current, _ = read_entity_config(zk, ec.USERS, user)
        probe = dict(current)
        change(probe)
        if probe == current:
            return False

        def apply(config: dict) -> dict:
            change(config)
            return config
        write_entity_config(zk, ec.USERS, user, apply)
        return True

    def verify(self, user: str, mechanism: str, password: str) -> bool:
        """Does ``user``'s stored ``mechanism`` credential belong to ``password``?"""
        stored = self.lookup(user, mechanism)
        if stored is None:
            return False
        salt, stored_key, _, iterations = stored
        salted = hashlib.pbkdf2_hmac(_HASHES[mechanism]().name, password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", _HASHES[mechanism]).digest()
        return hmac.compare_digest(_HASHES[mechanism](client_key).digest(), stored_key)

    def config(self, user: str) -> dict:
        """The user's stored config (SCRAM credentials and quota keys); {} for none."""
        return self._config_of(user)

    def set_password(self, user: str, mechanism: str, password: str, iterations: int = MIN_ITERATIONS) -> None:
        """Write ``user``'s credential from a password, as Kafka's ``kafka-configs --zookeeper``
        does: how the first user (the brokers' own) exists before any broker can take requests."""
        text = credential_from_password(mechanism, password, iterations)
        self.update_config(user, lambda config: config.__setitem__(mechanism, text))

    # -- AlterUserScramCredentials / DescribeUserScramCredentials -------------------------------
    async def alter(self, header, request) -> object:
        s = Schemas(ALTER_USER_SCRAM_CREDENTIALS, header.api_version)
        names = [d.name for d in request.deletions] + [u.name for u in request.upsertions]
        results = {}
        if not self.cluster_allowed(Operation.ALTER):
            results = dict.fromkeys(names, (ErrorCode.cluster_authorization_failed, CLUSTER_DENIED))
        for name in {n for n in names if names.count(n) > 1 and n not in results}:
            results[name] = (ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request")
        for d in request.deletions:
            if d.name not in results:
                results[d.name] = await asyncio.to_thread(self._delete, d)
        for u in request.upsertions:
            if u.name not in results:
                results[u.name] = await asyncio.to_thread(self._upsert, u)
        return make(s.AlterUserScramCredentialsResponse, throttle_time=ZERO, results=tuple(
            make(s.AlterUserScramCredentialsResult, user=name, error_code=code, error_message=message)
            for name, (code, message) in results.items()))

    def _check(self, name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
        if not name:
            return ErrorCode.unacceptable_credential, "Username must not be empty"
        if mechanism not in MECHANISMS:
            return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
        return None

    def _upsert(self, u) -> tuple[ErrorCode, str | None]:
        problem = self._check(u.name, u.mechanism)
        if problem is None and u.iterations < MIN_ITERATIONS:
            problem = ErrorCode.unacceptable_credential, f"Too few iterations: {u.iterations}"
        if problem is None and u.iterations > MAX_ITERATIONS:
            problem = ErrorCode.unacceptable_credential, f"Too many iterations: {u.iterations}"
        if problem is not None:
            return problem
        mechanism = MECHANISMS[u.mechanism]
        text = credential_string(mechanism, u.salt, u.salted_password, u.iterations)
        self.update_config(u.name, lambda config: config.__setitem__(mechanism, text))
        return ErrorCode.none, None

    def _delete(self, d) -> tuple[ErrorCode, str | None]:
        problem = self._check(d.name, d.mechanism)
        if problem is not None:
            return problem
        mechanism = MECHANISMS[d.mechanism]
        if self.lookup(d.name, mechanism) is None:
            return ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"
        self.update_config(d.name, lambda config: config.pop(mechanism, None))
        return ErrorCode.none, None

    async def describe(self, header, request) -> object:
        s = Schemas(DESCRIBE_USER_SCRAM_CREDENTIALS, header.api_version)
        if not self.cluster_allowed(Operation.DESCRIBE):
            return make(s.DescribeUserScramCredentialsResponse, throttle_time=ZERO,
                        error_code=ErrorCode.cluster_authorization_failed, error_message=CLUSTER_DENIED, results=())
        described = await asyncio.to_thread(self._describe, request.users)
        results = tuple(make(s.DescribeUserScramCredentialsResult, user=user, error_code=code, error_message=message,
                             credential_infos=tuple(make(s.CredentialInfo, mechanism=m, iterations=i) for m, i in infos))
                        for user, code, message, infos in described)
        return make(s.DescribeUserScramCredentialsResponse, throttle_time=ZERO, error_code=ErrorCode.none,
                    error_message=None, results=results)

    def _describe(self, users) -> list[tuple[str, ErrorCode, str | None, list[tuple[int, int]]]]:
        zk = self._zk()
        if not users:   # null or empty: every user, as Kafka reads it (librdkafka sends an empty array)
            try:
                names = sorted(zk.get_children(USERS))
            except NoNodeError:
                names = []
        else:
            names = [u.name for u in users]
        out = []
        for name in names:
            infos = [(mid, parse_credential(text)[3]) for mid, m in MECHANISMS.items()
                     if (text := self._config_of(name).get(m))]
            if infos:
                out.append((name, ErrorCode.none, None, infos))
            elif users:
                out.append((name, ErrorCode.resource_not_found, f"Attempt to describe a user credential that does "
                                                                f"not exist: {name}", []))
        return out

    def _config_of(self, user: str) -> dict:
        try:
            return self._read(user)[0].get("config", {})
        except (NoNodeError, ValueError):
            return {}

    def table(self) -> dict:
        return {DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0, self.describe), ALTER_USER_SCRAM_CREDENTIALS: (0, 0, self.alter)}
