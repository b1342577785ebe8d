"""Calls to the active controller's internal API (admin requests forwarded by the broker).

A standby answers 503 NOT_CONTROLLER, and a controller can be between elections: both are
retried until the call's own deadline, re-reading the controller's URL from ZooKeeper each
time; each attempt gets the time left. Errors the controller decides (TOPIC_ALREADY_EXISTS...)
come back as ``KafkaError``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

import aiohttp

from odradek.cluster.control_plane_http import client_session
from odradek.errors import ErrorCode, KafkaError


class ControllerClient:
    def __init__(self, url_source: Callable[[], str | None]) -> None:
        self._url_source = url_source
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def call(self, method: str, path: str, body: Any = None, *, timeout: float = 30.0) -> Any:
        if self._session is None:
            self._session = client_session()
        deadline = time.monotonic() + timeout
        last = "no active controller"
        while (remaining := deadline - time.monotonic()) > 0:
            url = self._url_source()
            if url:
                try:
                    async with self._session.request(method, url + path, json=body,
                                                     timeout=aiohttp.ClientTimeout(total=remaining)) as resp:
                        payload = await resp.json(content_type=None)
                        if resp.status < 400:
                            return payload
                        error = KafkaError.from_json(payload)
                        if error.code != ErrorCode.not_controller:
                            raise error
                        last = error.message
                except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as e:
                    last = f"controller at {url} unreachable: {e}"
            await asyncio.sleep(0.1)
        raise KafkaError(ErrorCode.request_timed_out, f"controller request timed out: {last}")
