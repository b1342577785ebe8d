"""``MutualTlsSite``: the control plane's aiohttp site over mutual TLS (why a site of our own:
``control_plane_tls``). Apart from it so that a command that only calls the control plane
(``odradek dev status``) does not import aiohttp's server."""

from __future__ import annotations

import asyncio
import socket

from aiohttp import web

from odradek.cluster.control_plane_tls import ControlPlaneTls, log

HANDSHAKE_TIMEOUT_S = 10.0


def _address(peer: object) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


class MutualTlsSite(web.BaseSite):
    """An aiohttp site serving HTTPS that requires client certificates from the cluster CA.
    It accepts sockets itself and runs each handshake in a task of its own
    (``connect_accepted_socket`` raises when it fails), so that a refused peer is logged, at
    WARNING, with its address; ``what`` names the server in those lines."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, tls: ControlPlaneTls, what: str) -> None:
        super().__init__(runner)
        self._context = tls.server_context()
        self._what = what
        self._sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET,
                                          backlog=self._backlog)
        self._sock.setblocking(False)
        self._tasks: set[asyncio.Task] = set()

    @property
    def address(self) -> tuple[str, int]:
        return self._sock.getsockname()[:2]

    @property
    def name(self) -> str:
        host, port = self.address
        return f"https://{host}:{port}"

    async def start(self) -> None:
        await super().start()  # registers the site with the runner
        self._hold(asyncio.get_running_loop().create_task(self._accept(), name=f"{self._what} accept"))

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self._sock.close()
        await super().stop()

    def _hold(self, task: asyncio.Task) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, peer = await loop.sock_accept(self._sock)
            except OSError as e:  # out of descriptors, say: try again shortly
                log.warning("%s: accept failed: %s", self._what, e)
                await asyncio.sleep(0.1)
                continue
            self._hold(loop.create_task(self._handshake(loop, conn, peer)))

    async def _handshake(self, loop: asyncio.AbstractEventLoop, conn: socket.socket, peer: object) -> None:
        try:
            await loop.connect_accepted_socket(self._runner.server, conn, ssl=self._context,
                                               ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError) as e:  # ssl.SSLError is an OSError
            log.warning("%s: refused the connection from %s: TLS handshake failed (a client certificate from "
                        "the cluster CA is required): %r", self._what, _address(peer), e)
            conn.close()
