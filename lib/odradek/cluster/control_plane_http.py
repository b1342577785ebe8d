"""The control plane's HTTP/JSON transport: the one place where its connections are made, on
each side, so that transport security is added here and nowhere else.

- Servers (the controller's API, each broker's internal API): ``server_app`` builds the
  aiohttp application from ``{Route: handler}``; ``serve`` binds it, over mutual TLS when the
  process has a ``ControlPlaneTls`` (``control_plane_tls``), plaintext HTTP otherwise.
- Asynchronous callers (a broker calling the controller, the controller pushing snapshots):
  ``client_session`` opens their aiohttp session; ``send`` makes one call with its own timeout.
- Blocking callers (the operator in kopf's thread pool, dev tooling, benchmarks):
  ``send_blocking`` (urllib), and ``call_blocking`` for the decoded answer.

Every caller passes the process's ``ControlPlaneTls`` (None: plaintext): with it, the client
presents its certificate and checks the server's against the cluster CA.

Versions (``versions``): every request and answer carries its sender's protocol version in
the ``Odradek-Protocol`` header (a broker's and a controller's: their
``inter.broker.protocol.version``; tools: this release's); a server refuses a request from a
newer version than it knows with UNSUPPORTED_VERSION.

Routes, bodies and answers are ``control_plane``'s; error bodies are ``KafkaError.to_json()``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Mapping, TypeVar

from odradek.cluster import versions
from odradek.cluster.control_plane_base import Request, Route
from odradek.cluster.control_plane_tls import ControlPlaneTls, client_context, peer_check
from odradek.errors import ErrorCode, KafkaError

if TYPE_CHECKING:   # aiohttp is imported where a server or an asynchronous caller needs it: a blocking
    import aiohttp   # caller (odradek dev status, ~0.4 s of CPU less at start) never does
    from aiohttp import web

A = TypeVar("A")
Handler = Callable[["web.Request"], Awaitable["web.StreamResponse"]]


# --- servers -----------------------------------------------------------------------------------
def server_app(handlers: Mapping[Route, Handler], *, middlewares: Iterable = (),
               client_max_size: int = 1024 ** 2, version: int = versions.CURRENT) -> web.Application:
    """An aiohttp application serving ``handlers`` (GET routes answer HEAD too), announcing ``version``."""
    from aiohttp import web
    app = web.Application(middlewares=[_versioned(version), *middlewares], client_max_size=client_max_size)
    for route, handler in handlers.items():
        getattr(app.router, "add_" + route.method.lower())(route.template, handler)
    return app


def _versioned(version: int):
    from aiohttp import web
    @web.middleware
    async def versioned(request: web.Request, handler):
        try:
            versions.check_sender(versions.of(request.headers))
        except KafkaError as e:
            response = web.json_response(e.to_json(), status=400)
        else:
            response = await handler(request)
        response.headers[versions.HEADER] = str(version)
        return response
    return versioned


async def serve(app: web.Application, host: str, port: int, tls: ControlPlaneTls | None,
                what: str) -> tuple[web.AppRunner, tuple[str, int]]:
    """Serve ``app`` on ``host:port`` (0: a free port); HTTPS requiring client certificates with
    ``tls``. Returns the runner (``cleanup`` stops it) and the bound (host, port). ``what``
    names the server in the log lines of refused connections."""
    from aiohttp import web

    from odradek.cluster.control_plane_tls_site import MutualTlsSite
    if tls is not None and (check := peer_check(tls, what)) is not None:
        app.middlewares.insert(0, check)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    if tls is None:
        site = web.TCPSite(runner, host, port)
        await site.start()
        return runner, runner.addresses[0][:2]
    tls_site = MutualTlsSite(runner, host, port, tls, what)
    await tls_site.start()
    return runner, tls_site.address


# --- asynchronous callers ----------------------------------------------------------------------
def client_session(tls: ControlPlaneTls | None = None, version: int = versions.CURRENT) -> aiohttp.ClientSession:
    """A session for control-plane calls (presenting this process's certificate with ``tls``)
    announcing ``version``; each ``send`` sets its own timeout."""
    import aiohttp
    headers = {versions.HEADER: str(version)}
    if tls is None:
        return aiohttp.ClientSession(headers=headers)
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_context(tls)), headers=headers)


async def send(session: aiohttp.ClientSession, base_url: str, request: Request, timeout: float) -> tuple[int, Any]:
    """(HTTP status, decoded JSON body). Raises ``aiohttp.ClientError`` or ``asyncio.TimeoutError``
    when the server cannot be reached in ``timeout`` seconds, ``ValueError`` when the body is not JSON."""
    import aiohttp
    async with session.request(request.method, base_url.rstrip("/") + request.path, json=request.body,
                               timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
        return resp.status, await resp.json(content_type=None)


# --- blocking callers --------------------------------------------------------------------------
def send_blocking(base_url: str, request: Request, timeout: float,
                  tls: ControlPlaneTls | None = None) -> tuple[int, Any]:
    """(HTTP status, decoded JSON body); an error body that is not JSON (a proxy's page) reads as
    UNKNOWN_SERVER_ERROR. Raises ``OSError`` when the server cannot be reached."""
    data = None if request.body is None else json.dumps(request.body).encode()
    req = urllib.request.Request(base_url.rstrip("/") + request.path, data=data, method=request.method,
                                 headers={"Content-Type": "application/json", "Accept": "application/json",
                                          versions.HEADER: str(versions.CURRENT)})
    try:
        context = client_context(tls) if tls is not None else None
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw or b"null")
        except ValueError:
            error = KafkaError(ErrorCode.unknown_server_error, raw.decode(errors="replace"))
            return e.code, error.to_json()


def call_blocking(base_url: str, request: Request[A], timeout: float, tls: ControlPlaneTls | None = None) -> A:
    """The decoded answer. Raises ``KafkaError`` for an error answer (a standby's NOT_CONTROLLER
    too), ``OSError`` when the server cannot be reached."""
    status, payload = send_blocking(base_url, request, timeout, tls)
    if status >= 400:
        raise KafkaError.from_json(payload)
    return request.decode(payload)
