"""SCRAM credentials in ZooKeeper, where Kafka's ZooKeeper mode keeps them: the broker's port to them.

``/config/users/<user>`` (an entity config, ``odradek.broker.zk.configs``) holds one credential
per mechanism (``zk_data.SCRAM_CREDENTIAL``):
``{"version":1,"config":{"SCRAM-SHA-512":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096"}}``.
As Kafka's ZooKeeper-mode brokers do (AdminZkClient), the broker that receives
AlterUserScramCredentials writes the znode itself (``handlers.scram``); every broker reads it at
each SCRAM login, so a new user can log in anywhere at once. The client sends the salted
password (never the password): the stored and server keys are derived from it as RFC 5802
defines them. Blocking: run the store's calls off the event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
from typing import Callable

from odradek.broker.zk.configs import EntityConfigs
from odradek.cluster.zk_data import SCRAM_CREDENTIAL, USERS, ScramCredential
from odradek.errors import ErrorCode

MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # Kafka's ScramMechanism type ids
_HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384
Outcome = tuple[ErrorCode, str | None]   # a credential change's result, as the admin API answers it


def credential_string(mechanism: str, salt: bytes, salted_password: bytes, iterations: int) -> str:
    digest = _HASHES[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    server_key = hmac.new(salted_password, b"Server Key", digest).digest()
    return SCRAM_CREDENTIAL.encode(ScramCredential(salt, digest(client_key).digest(), server_key, iterations))


def credential_from_password(mechanism: str, password: str, iterations: int = MIN_ITERATIONS) -> str:
    """Kafka's credential string for ``password`` with a fresh random salt."""
    salt = os.urandom(24)
    salted = hashlib.pbkdf2_hmac(_HASHES[mechanism]().name, password.encode(), salt, iterations)
    return credential_string(mechanism, salt, salted, iterations)


def scram_username(client_first: bytes) -> str | None:
    """The ``n=`` attribute of a SCRAM client-first message, unescaped (=2C, =3D)."""
    for attribute in client_first.decode("utf-8", "replace").split(",")[2:]:
        if attribute.startswith("n="):
            return attribute[2:].replace("=2C", ",").replace("=3D", "=")
    return None


class ScramStore:
    def __init__(self, configs: EntityConfigs) -> None:
        self._configs = configs

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        text = self.config(user).get(mechanism)
        try:
            return SCRAM_CREDENTIAL.decode(text) if text else None
        except (ValueError, KeyError):
            return None

    async def credentials_for_first_message(self, client_first: bytes, mechanism: str):
        """(user, credentials) for a SCRAM client-first message, or None for an unknown user."""
        user = scram_username(client_first)
        if not user:
            return None
        credentials = await asyncio.to_thread(self.lookup, user, mechanism)
        return (user, credentials) if credentials else None

    def update_config(self, user: str, change: Callable[[dict], None]) -> bool:
        """Change one user's config (SCRAM keys and quota keys live there together) as Kafka's
        AdminZkClient does (compare-and-set, then the change notification the brokers' quota
        caches follow); True if it changed. Nothing is written when ``change`` leaves the config
        as it is (the operator's periodic syncs)."""
        current, _ = self._configs.read(USERS, user)
        probe = dict(current)
        change(probe)
        if probe == current:
            return False

        def apply(config: dict) -> dict:
            change(config)
            return config
        self._configs.alter(USERS, user, apply)
        return True

    def verify(self, user: str, mechanism: str, password: str) -> bool:
        """Does ``user``'s stored ``mechanism`` credential belong to ``password``?"""
        stored = self.lookup(user, mechanism)
        if stored is None:
            return False
        salted = hashlib.pbkdf2_hmac(_HASHES[mechanism]().name, password.encode(), stored.salt, stored.iterations)
        client_key = hmac.new(salted, b"Client Key", _HASHES[mechanism]).digest()
        return hmac.compare_digest(_HASHES[mechanism](client_key).digest(), stored.stored_key)

    def config(self, user: str) -> dict:
        """The user's stored config (SCRAM credentials and quota keys); {} for none."""
        return self._configs.read(USERS, user)[0]

    def users(self) -> list[str]:
        return self._configs.entities(USERS)

    def set_password(self, user: str, mechanism: str, password: str, iterations: int = MIN_ITERATIONS) -> None:
        """Write ``user``'s credential from a password, as Kafka's ``kafka-configs --zookeeper``
        does: how the first user (the brokers' own) exists before any broker can take requests."""
        text = credential_from_password(mechanism, password, iterations)
        self.update_config(user, lambda config: config.__setitem__(mechanism, text))

    # -- what AlterUserScramCredentials / DescribeUserScramCredentials do (handlers.scram) ------
    def upsert(self, name: str, mechanism_id: int, salt: bytes, salted_password: bytes, iterations: int) -> Outcome:
        problem = _check(name, mechanism_id)
        if problem is None and iterations < MIN_ITERATIONS:
            problem = ErrorCode.unacceptable_credential, f"Too few iterations: {iterations}"
        if problem is None and iterations > MAX_ITERATIONS:
            problem = ErrorCode.unacceptable_credential, f"Too many iterations: {iterations}"
        if problem is not None:
            return problem
        mechanism = MECHANISMS[mechanism_id]
        text = credential_string(mechanism, salt, salted_password, iterations)
        self.update_config(name, lambda config: config.__setitem__(mechanism, text))
        return ErrorCode.none, None

    def delete(self, name: str, mechanism_id: int) -> Outcome:
        problem = _check(name, mechanism_id)
        if problem is not None:
            return problem
        mechanism = MECHANISMS[mechanism_id]
        if self.lookup(name, mechanism) is None:
            return ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"
        self.update_config(name, lambda config: config.pop(mechanism, None))
        return ErrorCode.none, None

    def describe(self, names: list[str] | None) -> list[tuple[str, ErrorCode, str | None, list[tuple[int, int]]]]:
        """(user, error, message, [(mechanism id, iterations)]) of each user named (None or
        empty: every user with a credential, as Kafka reads it; librdkafka sends an empty array)."""
        out = []
        for name in names or self.users():
            infos = [(mid, SCRAM_CREDENTIAL.decode(text).iterations) for mid, m in MECHANISMS.items()
                     if (text := self.config(name).get(m))]
            if infos:
                out.append((name, ErrorCode.none, None, infos))
            elif names:
                out.append((name, ErrorCode.resource_not_found, f"Attempt to describe a user credential that does "
                                                                f"not exist: {name}", []))
        return out


def _check(name: str, mechanism_id: int) -> Outcome | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism_id not in MECHANISMS:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None
