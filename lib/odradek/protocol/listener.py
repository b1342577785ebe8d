"""The Kafka listeners' connections: accepted on every listener socket within Kafka's connection
limits (counted over all listeners, as Kafka's ``ConnectionQuotas``), sharing one request memory
pool, idle ones closed, and on ``stop`` every connection closed and its serving task awaited.

Limits, as Apache Kafka's ``SocketServer`` applies them (``ListenerLimits``):

- ``max.connections``: at the limit the listener stops accepting (new connections wait in the
  kernel's backlog) until one closes: Kafka's acceptor blocks the same way (KIP-402).
- ``max.connections.per.ip``: a new connection from an address that has that many already is
  accepted and closed at once (Kafka logs "Rejected connection ... maximum", at INFO);
  ``max.connections.per.ip.overrides`` sets other counts for given addresses.
- connection creation rates (KIP-612, ``AcceptRates``, given by the broker): over the broker's
  or the listener's rate, accepting waits the throttle time (Kafka's acceptor blocks); over the
  address's rate, the connection is closed unread after the throttle time (Kafka's delayed close).
- ``connections.max.idle.ms``: a connection that has moved no byte for that long, with no
  request queued or being handled, is closed (checked every quarter of it, at most every 30 s;
  negative: never).
- ``queued.max.request.bytes``: the ``MemoryPool`` every connection reserves its frames in.

Accepting is a loop of ``sock_accept`` per listener socket (asyncio's ``Server`` cannot pause
accepting); each accepted socket is set up (TLS handshake included) by a task of its own, so
a slow handshake never holds the accept loop. The listener holds every connection and serving task strongly until
it is done: a pending task nothing references would be collected ("Task was destroyed but it
is pending!").

Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol

from odradek.protocol.connection import CloseReason, KafkaConnection, Observer
from odradek.protocol.memory_pool import MemoryPool

log = logging.getLogger(__name__)

_STOP_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class ListenerLimits:
    socket_request_max_bytes: int = 104857600
    queued_max_request_bytes: int = 104857600   # <= 0: unbounded
    max_connections: int = 2**31 - 1
    max_connections_per_ip: int = 2**31 - 1
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)  # address -> count
    connections_max_idle_ms: int = 600000       # < 0: never
    socket_send_buffer_bytes: int = 262144      # SO_SNDBUF of accepted sockets; <= 0: the OS default


ConnectionFactory = Callable[[], KafkaConnection]


class AcceptRates(Protocol):
    """Connection creation rates (odradek.broker.quotas.connections): each records one
    accepted connection and answers its throttle time in ms (0: none)."""

    def accept_delay_ms(self, listener: str) -> int: ...

    def ip_delay_ms(self, listener: str, ip: str) -> int: ...


class KafkaListener:
    def __init__(self, limits: ListenerLimits = ListenerLimits()) -> None:
        self.limits = limits
        self.pool = MemoryPool(limits.queued_max_request_bytes)
        self._sockets: list[tuple[socket.socket, ConnectionFactory, ssl.SSLContext | None, str]] = []
        self.observer: Observer | None = None  # given to every connection (the broker's request metrics)
        self.rates: AcceptRates | None = None  # connection creation rates (the broker's quotas)
        self._delayed_close: set[socket.socket] = set()
        self._connections: set[KafkaConnection] = set()
        self._tasks: set[asyncio.Task] = set()
        self._per_ip: Counter[str] = Counter()
        self._slot_freed = asyncio.Event()
        self._background: list[asyncio.Task] = []

    @property
    def connections(self) -> int:
        return len(self._connections)

    def connection_counts(self) -> Counter[str]:
        """Open connections per listener name (read at scrape time)."""
        return Counter(conn.listener_name for conn in self._connections)

    def listen(self, host: str, port: int, factory: ConnectionFactory, ssl_context: ssl.SSLContext | None = None,
               backlog: int = 1024, name: str = "") -> int:
        """Bind a listener socket (served from ``start``) named ``name``; returns its port."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, port), family=family, backlog=backlog)
        sock.setblocking(False)
        self._sockets.append((sock, factory, ssl_context, name))
        return sock.getsockname()[1]

    def start(self) -> None:
        self._background = [asyncio.create_task(self._accept_loop(*entry)) for entry in self._sockets]
        if self.limits.connections_max_idle_ms >= 0:
            self._background.append(asyncio.create_task(self._reap_idle()))

    async def stop(self) -> None:
        """Stop accepting, close every connection, and wait for their serving tasks."""
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        for sock, *_ in self._sockets:
            sock.close()
        for sock in list(self._delayed_close):
            sock.close()
        for conn in list(self._connections):
            conn.close(CloseReason.SERVER_STOPPING)
        for _ in range(2):  # then cancel what is still inside a handler after its transport closed
            tasks = list(self._tasks)
            if not tasks:
                break
            _, pending = await asyncio.wait(tasks, timeout=_STOP_TIMEOUT_S)
            for task in pending:
                task.cancel()

    # -- accepting ---------------------------------------------------------------------
    async def _accept_loop(self, listening: socket.socket, factory: ConnectionFactory,
                           ssl_context: ssl.SSLContext | None, name: str) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while len(self._connections) >= self.limits.max_connections:
                self._slot_freed.clear()
                await self._slot_freed.wait()
            sock, address = await loop.sock_accept(listening)
            ip = address[0]
            if self.rates is not None and not await self._within_rates(loop, sock, name, ip):
                continue
            limit = self.limits.max_connections_per_ip_overrides.get(ip, self.limits.max_connections_per_ip)
            if self._per_ip[ip] >= limit:
                log.info("rejected connection from %s: it has the configured maximum of %d connections "
                         "(max.connections.per.ip)", ip, limit)
                sock.close()
                continue
            conn = factory()
            conn.attach(self.pool, self._forget, ip)
            conn.listener_name, conn.observer = name, self.observer
            self._connections.add(conn)
            self._per_ip[ip] += 1
            self._hold(asyncio.create_task(self._set_up(loop, conn, sock, ssl_context)))

    async def _within_rates(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, name: str, ip: str) -> bool:
        """Kafka's connection rate checks on an accepted socket: wait out the broker's and the
        listener's throttle (later connections wait behind it), then the address's: over it,
        the socket is closed unread once its throttle time has passed (False)."""
        delay = self.rates.accept_delay_ms(name)
        if delay:
            await asyncio.sleep(delay / 1000)
        delay = self.rates.ip_delay_ms(name, ip)
        if not delay:
            return True
        log.debug("throttling a connection from %s for %d ms (connection_creation_rate), then closing it", ip, delay)
        self._delayed_close.add(sock)

        def close() -> None:
            self._delayed_close.discard(sock)
            sock.close()
        loop.call_later(delay / 1000, close)
        return False

    async def _set_up(self, loop: asyncio.AbstractEventLoop, conn: KafkaConnection, sock: socket.socket,
                      ssl_context: ssl.SSLContext | None) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.limits.socket_send_buffer_bytes > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.limits.socket_send_buffer_bytes)
        try:
            await loop.connect_accepted_socket(lambda: conn, sock, ssl=ssl_context)
        except (OSError, asyncio.TimeoutError) as e:  # the peer left, or its TLS handshake failed
            log.debug("connection from %s lost while being set up: %r", conn.peer_host, e)
            sock.close()
            self._forget(conn)
            return
        if conn.task is not None:
            self._hold(conn.task)

    def _hold(self, task: asyncio.Task) -> None:
        if not task.done():
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _forget(self, conn: KafkaConnection) -> None:
        if conn not in self._connections:
            return
        self._connections.discard(conn)
        ip = conn.peer_host
        self._per_ip[ip] -= 1
        if self._per_ip[ip] <= 0:
            del self._per_ip[ip]
        self._slot_freed.set()

    # -- idle connections --------------------------------------------------------------
    async def _reap_idle(self) -> None:
        idle_s = self.limits.connections_max_idle_ms / 1000
        tick = min(max(idle_s / 4, 0.01), 30.0)
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            for conn in list(self._connections):
                since = conn.idle_since()
                if since is not None and now - since > idle_s:
                    log.debug("closing %s: idle for %.1f s (connections.max.idle.ms)", conn.name, now - since)
                    conn.close(CloseReason.IDLE)
