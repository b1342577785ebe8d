"""From a request frame to response pieces: version negotiation and dispatch.

ApiVersions advertises exactly the handler table (``odradek.broker.handlers``) plus the SASL
exchange the connection gate serves.
An ApiVersions request of a version we don't know is answered, as Kafka does, with error
UNSUPPORTED_VERSION and a v0 body listing our ranges (librdkafka then retries at v0). Any
other API or version outside the table closes the connection, which is what Apache Kafka
does with a request it cannot parse; the close reason is logged.

``handle`` answers with the response pieces and the request's throttle time: the larger of the
handler's (an ``Answer``) and the request quota's, which the response's ``throttle_time`` is
raised to and the connection mutes itself for (``security.gate``).
"""

from __future__ import annotations

import logging
from typing import Awaitable, Callable, Iterable

from odradek.broker.handlers.answer import ZERO, Answer
from odradek.broker.quotas.manager import ClientQuotaManager
from odradek.broker.quotas.throttling import request_finished, request_started, with_throttle
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import FrameError, Schemas, decode_request, encode_response, make, peek_header
from odradek.protocol.connection import ConnectionClosed, Piece

log = logging.getLogger(__name__)


Handler = Callable[..., Awaitable[object]]
API_VERSIONS_RANGE = (0, 4)


class Dispatcher:
    """Maps api key -> (min version, max version, handler(header, request)). With ``quotas``,
    each request's handling time counts against ``request_percentage``
    (odradek.broker.quotas.throttling). ``advertised``: APIs served before this dispatcher (the
    SASL exchange, by the connection gate) that ApiVersions lists too."""

    def __init__(self, handlers: dict[int, tuple[int, int, Handler]], quotas: ClientQuotaManager | None = None,
                 advertised: dict[int, tuple[int, int]] | None = None) -> None:
        self.handlers = dict(handlers)
        self.quotas = quotas
        self.handlers[ApiKey.API_VERSIONS] = (*API_VERSIONS_RANGE, self._api_versions)
        self._ranges_of = {**{k: (lo, hi) for k, (lo, hi, _) in self.handlers.items()}, **(advertised or {})}

    @property
    def ranges(self) -> dict[int, tuple[int, int]]:
        """Every API ApiVersions lists, with its (min, max) version."""
        return dict(self._ranges_of)

    async def __call__(self, frame: bytes) -> Iterable[Piece] | None:
        """The response pieces (the throttle dropped: a connection without a gate)."""
        return (await self.handle(frame)).body

    async def handle(self, frame: bytes, peeked: tuple[int, int, int] | None = None) -> Answer:
        """The response pieces (None: none due) and the throttle the connection mutes for.
        ``peeked``: the frame's ``peek_header``, when the caller has read it already."""
        view = memoryview(frame).toreadonly()
        if peeked is None:
            try:
                peeked = peek_header(view)
            except FrameError as e:
                raise ConnectionClosed(str(e)) from None
        api_key, version, correlation_id = peeked
        entry = self.handlers.get(api_key)
        if entry is None or not entry[0] <= version <= entry[1]:
            if api_key == ApiKey.API_VERSIONS:
                return Answer([self._unsupported_api_versions(correlation_id)])
            raise ConnectionClosed(f"unsupported request: api key {api_key} version {version}")
        try:
            header, request = decode_request(view)
        except FrameError as e:
            raise ConnectionClosed(str(e)) from None
        quotas = self.quotas
        started = request_started(quotas, api_key) if quotas is not None else 0
        body = await entry[2](header, request)
        throttle = 0
        if isinstance(body, Answer):
            body, throttle = body.body, body.throttle_ms
        if quotas is not None:
            throttle = max(throttle, request_finished(quotas, started, header, request))
            body = with_throttle(body, throttle)
        if body is None or isinstance(body, list):  # none due; pre-encoded pieces (Fetch, with file regions)
            return Answer(body, throttle)
        return Answer([encode_response(api_key, version, correlation_id, body)], throttle)

    def _ranges(self, schemas: Schemas) -> tuple:
        return tuple(make(schemas.ApiVersion, api_key=key, min_version=lo, max_version=hi)
                     for key, (lo, hi) in sorted(self._ranges_of.items()))

    async def _api_versions(self, header, request) -> object:
        s = Schemas(ApiKey.API_VERSIONS, header.api_version)
        return make(s.ApiVersionsResponse, error_code=ErrorCode.none, api_keys=self._ranges(s),
                    throttle_time=ZERO, supported_features=(), finalized_features_epoch=-1,
                    finalized_features=(), zk_migration_ready=False)

    def _unsupported_api_versions(self, correlation_id: int) -> bytearray:
        s = Schemas(ApiKey.API_VERSIONS, 0)
        body = make(s.ApiVersionsResponse, error_code=ErrorCode.unsupported_version,
                    api_keys=self._ranges(s))
        return encode_response(ApiKey.API_VERSIONS, 0, correlation_id, body)
