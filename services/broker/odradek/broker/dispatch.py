"""From a request frame to response pieces: version negotiation and dispatch.

The table of supported APIs lives here (``SUPPORTED``): ApiVersions advertises exactly it.
An ApiVersions request of a version we don't know is answered, as Kafka does, with error
UNSUPPORTED_VERSION and a v0 body listing our ranges (librdkafka then retries at v0). Any
other API or version outside the table closes the connection, which is what Apache Kafka
does with a request it cannot parse; the close reason is logged.
"""

from __future__ import annotations

import datetime
import logging
from typing import Awaitable, Callable, Iterable

from odradek.broker.quotas.manager import ClientQuotaManager
from odradek.broker.quotas.throttling import request_finished, request_started
from odradek.errors import ErrorCode
from odradek.protocol.codec import FrameError, Schemas, decode_request, encode_response, make, peek_header
from odradek.protocol.connection import ConnectionClosed, Piece

log = logging.getLogger(__name__)

API_VERSIONS = 18
ZERO = datetime.timedelta(0)

Handler = Callable[..., Awaitable[object]]


class Dispatcher:
    """Maps api key -> (min version, max version, handler(header, request)). With ``quotas``,
    each request's handling time counts against ``request_percentage`` and a response's
    ``throttle_time_ms`` is the connection's throttle (odradek.broker.quotas.throttling)."""

    def __init__(self, handlers: dict[int, tuple[int, int, Handler]], quotas: ClientQuotaManager | None = None
                 ) -> None:
        self.handlers = dict(handlers)
        self.quotas = quotas
        self.handlers[API_VERSIONS] = (0, 4, self._api_versions)
        from odradek.broker.handlers.answer import Answer  # here: the handlers package imports this module
        self._answer = Answer

    async def __call__(self, frame: bytes) -> Iterable[Piece] | None:
        view = memoryview(frame).toreadonly()
        try:
            api_key, version, correlation_id = peek_header(view)
        except FrameError as e:
            raise ConnectionClosed(str(e)) from None
        entry = self.handlers.get(api_key)
        if entry is None or not entry[0] <= version <= entry[1]:
            if api_key == API_VERSIONS:
                return [self._unsupported_api_versions(correlation_id)]
            raise ConnectionClosed(f"unsupported request: api key {api_key} version {version}")
        try:
            header, request = decode_request(view)
        except FrameError as e:
            raise ConnectionClosed(str(e)) from None
        quotas = self.quotas
        started = request_started(quotas, api_key) if quotas is not None else 0
        body = await entry[2](header, request)
        if isinstance(body, self._answer):  # its throttle already reached the connection (quotas.throttling)
            body = body.body
        if quotas is not None:
            body = request_finished(quotas, started, header, request, body)
        if body is None:
            return None
        if isinstance(body, list):  # pre-encoded pieces (Fetch, with file regions)
            return body
        return [encode_response(api_key, version, correlation_id, body)]

    def _ranges(self, schemas: Schemas) -> tuple:
        return tuple(make(schemas.ApiVersion, api_key=key, min_version=lo, max_version=hi)
                     for key, (lo, hi, _) in sorted(self.handlers.items()))

    async def _api_versions(self, header, request) -> object:
        s = Schemas(API_VERSIONS, header.api_version)
        return make(s.ApiVersionsResponse, error_code=ErrorCode.none, api_keys=self._ranges(s),
                    throttle_time=ZERO, supported_features=(), finalized_features_epoch=-1,
                    finalized_features=(), zk_migration_ready=False)

    def _unsupported_api_versions(self, correlation_id: int) -> bytearray:
        s = Schemas(API_VERSIONS, 0)
        body = make(s.ApiVersionsResponse, error_code=ErrorCode.unsupported_version,
                    api_keys=self._ranges(s))
        return encode_response(API_VERSIONS, 0, correlation_id, body)
