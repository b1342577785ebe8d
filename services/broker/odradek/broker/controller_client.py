"""Calls to the active controller's control plane (admin requests forwarded by the broker,
ISR changes, producer-id blocks, controlled shutdown).

``call`` sends a ``control_plane.Request`` and answers its decoded model. A standby answers
503 NOT_CONTROLLER, and a controller can be between elections: both are retried until the
call's own deadline, re-reading the controller's URL from ZooKeeper each time; each attempt
gets the time left. Errors the controller decides (TOPIC_ALREADY_EXISTS...) come back as
``KafkaError``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, TypeVar

import aiohttp

from odradek.cluster import versions
from odradek.cluster.control_plane import Request
from odradek.cluster.control_plane_http import client_session, send
from odradek.cluster.control_plane_tls import ControlPlaneTls
from odradek.errors import ErrorCode, KafkaError

A = TypeVar("A")
DEFAULT_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.1


class ControllerClient:
    def __init__(self, url_source: Callable[[], str | None], tls: ControlPlaneTls | None = None,
                 version: int = versions.CURRENT) -> None:
        self._url_source = url_source
        self._tls = tls
        self._version = version  # inter.broker.protocol.version, announced on every call
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def call(self, request: Request[A], *, timeout: float = DEFAULT_TIMEOUT_S) -> A:
        return request.decode(await self._answer(request, timeout))

    async def _answer(self, request: Request, timeout: float) -> Any:
        """The JSON answer of the active controller (undecoded: an unreadable answer must not
        be mistaken for an unreachable controller and sent again)."""
        if self._session is None:
            self._session = client_session(self._tls, self._version)
        deadline = time.monotonic() + timeout
        last = "no active controller"
        while (remaining := deadline - time.monotonic()) > 0:
            url = self._url_source()
            if url:
                try:
                    status, payload = await send(self._session, url, request, remaining)
                    if status < 400:
                        return payload
                    error = KafkaError.from_json(payload)
                    if error.code != ErrorCode.not_controller:
                        raise error
                    last = error.message
                except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as e:
                    last = f"controller at {url} unreachable: {e}"
            await asyncio.sleep(RETRY_BACKOFF_S)
        raise KafkaError(ErrorCode.request_timed_out, f"controller request timed out: {last}")
