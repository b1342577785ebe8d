"""Delivery of the full ``ClusterMetadata`` snapshot to every live broker.

Owns: one asyncio task per live broker registration (id + broker epoch), which POSTs the
newest snapshot to its ``internal_url`` (``control_plane.METADATA``) after a short debounce, retries a
failed broker with exponential backoff, and starts over when the broker registers again (a
new broker epoch gets the snapshot at once). A 409 ``STALE_CONTROLLER_EPOCH`` answer means
the broker has seen a newer controller: it is reported, not retried.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

import aiohttp

from odradek.cluster import versions
from odradek.cluster import control_plane as cp
from odradek.cluster.control_plane_http import client_session, send
from odradek.cluster.control_plane_tls import ControlPlaneTls
from odradek.cluster.model import BrokerInfo, ClusterMetadata

log = logging.getLogger(__name__)


class Pusher:
    def __init__(self, on_stale: Callable[[BrokerInfo], None] = lambda b: None,
                 debounce: float = 0.05, max_backoff: float = 5.0, request_timeout: float = 5.0,
                 tls: ControlPlaneTls | None = None, version: int = versions.CURRENT) -> None:
        self._on_stale = on_stale
        self._tls = tls
        self._version = version  # inter.broker.protocol.version, announced on every push
        self._debounce = debounce
        self._max_backoff = max_backoff
        self._timeout = request_timeout
        self._session: aiohttp.ClientSession | None = None
        self._latest: cp.Request[cp.Accepted] | None = None
        self._generation = 0
        self._tasks: dict[tuple[int, int], asyncio.Task] = {}
        self._wake: dict[tuple[int, int], asyncio.Event] = {}
        self._acked: dict[tuple[int, int], int] = {}
        self._progress = asyncio.Event()

    def publish(self, metadata: ClusterMetadata) -> None:
        """Make ``metadata`` the snapshot to deliver; (re)start tasks for its brokers."""
        request = cp.push_metadata(metadata)
        if self._latest is None or request.body != self._latest.body:
            self._latest = request
            self._generation += 1
        live = {(b.id, b.epoch): b for b in metadata.brokers}
        for key in [k for k in self._tasks if k not in live]:
            self._tasks.pop(key).cancel()
            self._wake.pop(key, None)
            self._acked.pop(key, None)
        for key, broker in live.items():
            if key not in self._tasks:
                self._wake[key] = asyncio.Event()
                self._acked[key] = 0
                self._tasks[key] = asyncio.create_task(self._deliver(key, broker),
                                                       name=f"push-broker-{broker.id}")
            if self._acked[key] < self._generation:
                self._wake[key].set()

    async def wait_delivered(self, timeout: float) -> bool:
        """Wait until every live broker accepted the newest snapshot (or the deadline)."""
        deadline = time.monotonic() + timeout
        while any(acked < self._generation for acked in self._acked.values()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._progress.clear()
            try:
                await asyncio.wait_for(self._progress.wait(), remaining)
            except asyncio.TimeoutError:
                return False
        return True

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._wake.clear()
        self._acked.clear()
        self._latest = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _deliver(self, key: tuple[int, int], broker: BrokerInfo) -> None:
        backoff = 0.1
        while True:
            await self._wake[key].wait()
            await asyncio.sleep(self._debounce)
            self._wake[key].clear()
            generation, request = self._generation, self._latest
            outcome = await self._post(broker.internal_url, request)
            if outcome == "ok":
                self._acked[key] = generation
                self._progress.set()
                backoff = 0.1
                if generation < self._generation:
                    self._wake[key].set()
            elif outcome == "stale":
                log.warning("broker %d refused controller epoch %d as stale", broker.id,
                            request.body["controller_epoch"])
                self._acked[key] = generation  # retrying cannot help; a newer controller exists
                self._progress.set()
                self._on_stale(broker)
            else:
                log.info("push to broker %d at %s failed (%s); retrying in %.1fs",
                         broker.id, broker.internal_url, outcome, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._max_backoff)
                self._wake[key].set()

    async def _post(self, url: str, request: cp.Request) -> str:
        if self._session is None:
            self._session = client_session(self._tls, self._version)
        try:
            status, answer = await send(self._session, url, request, self._timeout)
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as e:
            return f"{type(e).__name__}: {e}"
        if status == 200:
            return "ok"
        if status == 409:
            return "stale"
        return f"HTTP {status}: {str(answer)[:200]}"
