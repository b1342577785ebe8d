"""A minimal async Kafka client for broker-to-broker requests (followers -> leaders, the
transaction coordinator -> partition leaders).

No client library lets a caller set Fetch's ``replica_id``, so followers speak the protocol
themselves over kio's schemas (``wire``): one connection, one request in flight at a time
(requests are sent and answered in order, which is all a fetcher needs). The connection
comes from a ``Connector`` (the inter-broker listener's ``connector.ClientSecurity``: TLS and
SASL live there), already authenticated; this client only frames requests on it.

``BrokerClients`` keeps one such client per other broker, on its inter-broker listener address
(the transaction coordinator's markers, a leader's transaction verifications).

Errors: any socket failure or a mismatched correlation id closes the connection and raises
``ConnectionError``; the caller reconnects. Not thread-safe (one event loop, one caller).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from odradek.broker.replication.connector import ClientSecurity, Streams
from odradek.broker.replication.wire import exchange

if TYPE_CHECKING:
    from odradek.broker.partitions import ReplicaManager


class Connector(Protocol):
    """Opens a connection ready for requests (TLS and SASL done), or raises ConnectionError."""

    async def open(self, host: str, port: int, *, client_id: str, timeout: float) -> Streams: ...


class KafkaClient:
    """One connection to one broker's Kafka listener."""

    def __init__(self, host: str, port: int, *, client_id: str, connect_timeout: float = 5.0,
                 security: Connector | None = None) -> None:
        self.host = host
        self.port = port
        self.security = security or ClientSecurity()
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = 0

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def connect(self) -> None:
        if not self.connected:
            self._reader, self._writer = await self.security.open(self.host, self.port, client_id=self.client_id,
                                                                  timeout=self.connect_timeout)

    async def request(self, api_key: int, version: int, body: Any, *, timeout: float) -> Any:
        """Send one request and wait (at most ``timeout`` s) for its response body."""
        if not self.connected:
            await self.connect()
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        try:
            return await exchange(self._reader, self._writer, api_key, version, body,
                                  correlation_id=self._correlation, client_id=self.client_id, timeout=timeout)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as e:  # OSError: ConnectionError too
            self.close()
            raise ConnectionError(f"request {api_key} v{version} to {self.host}:{self.port} failed: {e!r}") from e

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


class BrokerClients:
    """A client per live broker on the inter-broker listener, replaced when its address changes."""

    def __init__(self, replicas: ReplicaManager, client_id: str) -> None:
        self.replicas, self.client_id = replicas, client_id
        self._clients: dict[int, KafkaClient] = {}

    def get(self, broker: int) -> KafkaClient:
        """Raises ConnectionError when the broker is gone or lacks the listener."""
        listener = self.replicas.inter_broker.listener
        info = next((b for b in self.replicas.live_brokers() if b.id == broker), None)
        address = info.endpoint(listener) if info is not None else None
        if address is None:
            raise ConnectionError(f"broker {broker} is not live or has no {listener} listener")
        client = self._clients.get(broker)
        if client is not None and (client.host, client.port) != address:
            client.close()
            client = None
        if client is None:
            client = self._clients[broker] = KafkaClient(*address, client_id=self.client_id,
                                                         security=self.replicas.inter_broker)
        return client

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
