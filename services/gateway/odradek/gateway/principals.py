"""Principal propagation: which Kafka principal a request acts as, and that principal's clients.

Kafka has no impersonation, so an HTTP user mapped to a Kafka principal (``kafka_username`` or
``kafka_ssl_certificate_location`` in the tokens file, see ``auth``) gets Kafka clients of its
own, logged in with that principal's SASL credentials or client certificate: a producer, an
admin client and range readers (a ``KafkaBridge``), and the consumers of the consumer instances
it creates. The brokers' ACLs then decide what the user may do, as with Confluent REST Proxy's
principal propagation. Users without a mapping (and, unless ``--require-auth``, requests
without a token on the inventory paths) act as the gateway's own principal.

Bridges are opened on a user's first request (after the brokers accepted the credentials:
a refusal answers 401 at once), kept while used, closed after ``principal_clients_idle_ms``
without use, and at most ``principal_clients_max`` are open: the least recently used idle one
is closed to make room. A request holds a lease on its bridge until it has answered
(``ReleaseLeases``), so a bridge is never closed under a request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from fastapi import Request

from odradek.gateway.auth import ANONYMOUS, KafkaLogin, Principal, authenticate
from odradek.gateway.kafka import KafkaBridge
from odradek.gateway.settings import GatewaySettings

log = logging.getLogger("odradek.gateway")
LEASES = "odradek.kafka_leases"   # the request scope's key: the entries whose bridge it uses


@dataclass
class _Entry:
    bridge: KafkaBridge
    principal: str                 # as the brokers name it: User:paula, User:CN=alice,...
    last_used: float
    leases: int = 0


class KafkaClients:
    """The gateway's own bridge and those of the Kafka principals HTTP users are mapped to."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        self.own = self._bridge()
        self._mapped: dict[tuple, _Entry] = {}
        self._opening: dict[tuple, asyncio.Lock] = {}   # one per login in the tokens file
        self._reaper: asyncio.Task | None = None

    def _bridge(self, login: KafkaLogin | None = None, name: str = "") -> KafkaBridge:
        s = self.settings
        return KafkaBridge(s.bootstrap_servers, s.max_record_bytes, s.produce_timeout_ms, s.client_config(login),
                           "odradek-gateway" if login is None else f"odradek-gateway-{name}")

    async def start(self) -> None:
        self._reaper = asyncio.create_task(self._close_idle())

    async def close(self) -> None:
        if self._reaper:
            self._reaper.cancel()
        for key in list(self._mapped):
            await self._drop(key)
        await self.own.close()

    @property
    def open_principals(self) -> list[str]:
        return sorted(e.principal for e in self._mapped.values())

    async def acquire(self, who: Principal | None) -> _Entry | None:
        """The entry of ``who``'s Kafka principal (opened if need be), leased; None: the
        gateway's own principal."""
        if who is None or who.kafka is None:
            return None
        key = who.kafka.cache_key()
        async with self._opening.setdefault(key, asyncio.Lock()):
            entry = self._mapped.get(key)
            if entry is not None and entry.bridge.auth_error is not None:
                await self._drop(key)    # the brokers stopped accepting it (password changed there)
                entry = None
            if entry is None:
                entry = await self._open(key, who)
        entry.leases += 1
        entry.last_used = time.monotonic()
        return entry

    def release(self, entry: _Entry) -> None:
        entry.leases -= 1
        entry.last_used = time.monotonic()

    async def _open(self, key, who: Principal) -> _Entry:
        await self._make_room()
        principal = who.kafka.principal
        bridge = self._bridge(who.kafka, who.kafka.username or who.name)
        try:
            await bridge.authenticate()
        except BaseException:
            await bridge.close()
            raise
        entry = self._mapped[key] = _Entry(bridge, principal, time.monotonic())
        log.info("Kafka clients opened for principal %s (HTTP user %s)", principal, who.name)
        return entry

    async def _make_room(self) -> None:
        """Close least recently used idle bridges while the limit is reached (one in use by a
        request stays open: the limit is exceeded for as long as every bridge is in use)."""
        while len(self._mapped) >= self.settings.principal_clients_max:
            idle = [(e.last_used, k) for k, e in self._mapped.items() if e.leases == 0]
            if not idle:
                log.warning("all %d principals' Kafka clients are in use: opening one more", len(self._mapped))
                return
            await self._drop(min(idle)[1])

    async def _drop(self, key) -> None:
        entry = self._mapped.pop(key, None)   # its lock stays: a waiter on it must meet the next opening
        if entry is not None:
            log.info("Kafka clients of principal %s closed", entry.principal)
            await entry.bridge.close()

    async def _close_idle(self) -> None:
        idle_s = self.settings.principal_clients_idle_ms / 1000
        while True:
            await asyncio.sleep(min(5.0, idle_s / 4))
            now = time.monotonic()
            for key, entry in list(self._mapped.items()):
                if entry.leases == 0 and now - entry.last_used > idle_s:
                    await self._drop(key)


async def kafka(request: Request, optional: bool = False) -> KafkaBridge:
    """The bridge of the principal this request acts as, leased until the request has answered.
    ``optional``: a request without a token acts as the gateway's own principal (the inventory
    paths, unless ``--require-auth``); with one, as the token's user."""
    leases = request.scope.setdefault(LEASES, [])
    if "odradek.kafka" in request.scope:
        return request.scope["odradek.kafka"]
    clients: KafkaClients = request.app.state.clients
    anonymous = optional and not clients.settings.require_auth and "authorization" not in request.headers
    entry = await clients.acquire(None if anonymous else authenticate(request))
    if entry is not None:
        leases.append(entry)
    request.scope["odradek.kafka"] = bridge = clients.own if entry is None else entry.bridge
    return bridge


def listing_principal(request: Request) -> Principal:
    """Whose rights filter an inventory listing (``/topics``, v3 topics): the token's user; a
    request without a token where ``kafka(optional=True)`` let it in sees what the gateway sees."""
    if "authorization" not in request.headers and not request.app.state.settings.require_auth:
        return ANONYMOUS
    return authenticate(request)


class ReleaseLeases:
    """ASGI middleware: a request's leases on principals' bridges end once it has answered."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        try:
            await self.app(scope, receive, send)
        finally:
            entries = scope.get(LEASES)
            if entries:
                clients: KafkaClients = scope["app"].state.clients
                for entry in entries:
                    clients.release(entry)
