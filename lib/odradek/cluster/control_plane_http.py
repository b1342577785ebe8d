"""The control plane's HTTP/JSON transport: the one place where its connections are made, on
each side, so that transport security is added here and nowhere else.

- Servers (the controller's API, each broker's internal API): ``server_app`` builds the
  aiohttp application from ``{Route: handler}``.
- Asynchronous callers (a broker calling the controller, the controller pushing snapshots):
  ``client_session`` opens their aiohttp session; ``send`` makes one call with its own timeout.
- Blocking callers (the operator in kopf's thread pool, dev tooling, benchmarks):
  ``send_blocking`` (urllib), and ``call_blocking`` for the decoded answer.

Routes, bodies and answers are ``control_plane``'s; error bodies are ``KafkaError.to_json()``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Awaitable, Callable, Iterable, Mapping, TypeVar

import aiohttp
from aiohttp import web

from odradek.cluster.control_plane import Request, Route
from odradek.errors import ErrorCode, KafkaError

A = TypeVar("A")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


# --- servers -----------------------------------------------------------------------------------
def server_app(handlers: Mapping[Route, Handler], *, middlewares: Iterable = (),
               client_max_size: int = 1024 ** 2) -> web.Application:
    """An aiohttp application serving ``handlers`` (GET routes answer HEAD too)."""
    app = web.Application(middlewares=list(middlewares), client_max_size=client_max_size)
    for route, handler in handlers.items():
        getattr(app.router, "add_" + route.method.lower())(route.template, handler)
    return app


# --- asynchronous callers ----------------------------------------------------------------------
def client_session() -> aiohttp.ClientSession:
    """A session for control-plane calls; each ``send`` sets its own timeout."""
    return aiohttp.ClientSession()


async def send(session: aiohttp.ClientSession, base_url: str, request: Request, timeout: float) -> tuple[int, Any]:
    """(HTTP status, decoded JSON body). Raises ``aiohttp.ClientError`` or ``asyncio.TimeoutError``
    when the server cannot be reached in ``timeout`` seconds, ``ValueError`` when the body is not JSON."""
    async with session.request(request.method, base_url.rstrip("/") + request.path, json=request.body,
                               timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
        return resp.status, await resp.json(content_type=None)


# --- blocking callers --------------------------------------------------------------------------
def send_blocking(base_url: str, request: Request, timeout: float) -> tuple[int, Any]:
    """(HTTP status, decoded JSON body); an error body that is not JSON (a proxy's page) reads as
    UNKNOWN_SERVER_ERROR. Raises ``OSError`` when the server cannot be reached."""
    data = None if request.body is None else json.dumps(request.body).encode()
    req = urllib.request.Request(base_url.rstrip("/") + request.path, data=data, method=request.method,
                                 headers={"Content-Type": "application/json", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw or b"null")
        except ValueError:
            error = KafkaError(ErrorCode.unknown_server_error, raw.decode(errors="replace"))
            return e.code, error.to_json()


def call_blocking(base_url: str, request: Request[A], timeout: float) -> A:
    """The decoded answer. Raises ``KafkaError`` for an error answer (a standby's NOT_CONTROLLER
    too), ``OSError`` when the server cannot be reached."""
    status, payload = send_blocking(base_url, request, timeout)
    if status >= 400:
        raise KafkaError.from_json(payload)
    return request.decode(payload)
