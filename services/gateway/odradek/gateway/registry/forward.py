"""Writes go to the primary (``log``'s election): a follower replica sends the request on to the
primary's URL as it came (body, query, the caller's Authorization header) and answers what the
primary answers, as Confluent's and Karapace's followers do. A request that was already forwarded
is never forwarded again (a stale view of the primary answers 50004, which clients retry).
``on_primary`` runs a write here when this replica is the primary and sends it on to the new primary
when the primacy moved while the write waited its turn."""

from __future__ import annotations

import asyncio
import time

import httpx
from fastapi import Request
from fastapi.responses import Response

from odradek.gateway.registry.errors import ForwardingFailed, NotPrimary, RegistryError

FORWARDED = "odradek-registry-forwarded"
ELECTION_WAIT_S = 30.0       # a replica that just started waits this long for a primary
PASSED_HEADERS = ("authorization", "content-type", "accept")


async def on_primary(request: Request, write, path: str | None = None, body: bytes | None = None):
    """The answer to a write: ``await write()`` on this replica while it is the primary, else the
    primary's answer to ``request`` (or to a POST of ``body`` to ``path`` made on its behalf)."""
    for _ in range(3):          # the primacy moves once per rebalance: a third move is a flapping group
        if (answer := await forward(request, path, body)) is not None:
            return answer
        try:
            return await write()
        except NotPrimary:
            if request.headers.get(FORWARDED):
                raise
    raise NotPrimary()


async def forward(request: Request, path: str | None = None, body: bytes | None = None) -> Response | None:
    """None when this replica is the primary (the caller writes); else the primary's answer."""
    log = request.app.state.registry.log
    if request.headers.get(FORWARDED):
        if not log.is_primary:
            raise NotPrimary()
        return None
    deadline = time.monotonic() + ELECTION_WAIT_S
    while not log.is_primary:
        url = await log.primary_url(fresh=True)
        if url is not None:
            answer = await _send(request, url, path, body)
            if answer.status_code < 300:   # read-your-writes on this replica too, as the caller expects
                await log.caught_up()
            return answer
        if time.monotonic() > deadline:
            raise RegistryError("No primary schema registry is elected", 500, 50004)
        await asyncio.sleep(0.2)
    return None


async def _send(request: Request, primary: str, path: str | None = None, body: bytes | None = None) -> Response:
    """``request`` as it came, or (``path``, ``body``) a POST made on its behalf."""
    headers = {k: v for k, v in request.headers.items() if k.lower() in PASSED_HEADERS}
    if path is not None:
        headers["content-type"] = headers["accept"] = "application/vnd.schemaregistry.v1+json"
    settings = request.app.state.settings
    verify = settings.kafka_ssl_ca_location or True     # the dev CA signs the gateways' certificates too
    try:
        async with httpx.AsyncClient(timeout=60, verify=verify) as client:
            url = primary.rstrip("/") + (path or request.url.path)
            answer = await client.request("POST" if path else request.method, url,
                                          params=None if path else request.query_params,
                                          content=body if path else await request.body(),
                                          headers={**headers, FORWARDED: "1"})
    except httpx.HTTPError as e:
        raise ForwardingFailed(f"Error while forwarding the request to the primary {primary}: {e}") from None
    return Response(answer.content, answer.status_code, media_type=answer.headers.get("content-type"))
