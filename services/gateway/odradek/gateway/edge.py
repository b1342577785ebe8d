"""The gateway's HTTP edge: the one table from domain errors (``errors``) to an HTTP status and
Confluent REST Proxy's error code, the handlers ``app`` registers so that every error answers
``{"error_code": int, "message": str}``, and the request checks routes share (media types,
body size). Nothing below this module knows about HTTP."""

from __future__ import annotations

import logging
from enum import IntEnum

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from odradek.gateway import errors, formats
from odradek.gateway.registry.errors import RegistryError

log = logging.getLogger("odradek.gateway")


class ErrorCode(IntEnum):
    """Confluent's codes (HTTP status * 100 + a detail, or the bare status), one meaning each."""
    MALFORMED_JSON = 400
    KAFKA_BAD_REQUEST = 40002            # the cluster refused a topic operation or a record as invalid
    UNAUTHENTICATED = 40101
    FORBIDDEN = 40301
    NOT_FOUND = 404
    TOPIC_NOT_FOUND = 40401
    PARTITION_NOT_FOUND = 40402
    CONSUMER_INSTANCE_NOT_FOUND = 40403
    NOT_ACCEPTABLE = 406
    CONSUMER_FORMAT_MISMATCH = 40601
    CONSUMER_ALREADY_EXISTS = 40902
    ILLEGAL_STATE = 40903
    GROUP_NOT_EMPTY = 40904              # Odradek: offset reset or delete of a group with members
    REQUEST_TOO_LARGE = 413
    RECORD_TOO_LARGE = 41301
    UNSUPPORTED_MEDIA_TYPE = 415
    OFFSET_OUT_OF_RANGE = 41601
    INVALID_BODY = 422                   # what rest-utils answers for a body that does not validate
    SCHEMA_LOOKUP_FAILED = 40801         # the registry refused a produce's schema, or has no such id
    KEY_SCHEMA_MISSING = 42201
    VALUE_SCHEMA_MISSING = 42202
    RECORD_CONVERSION_FAILED = 42203     # a record's JSON does not conform to its schema
    INVALID_CONSUMER_CONFIG = 42204
    INVALID_SCHEMA = 42205
    INTERNAL_ERROR = 50001
    KAFKA_ERROR = 50002
    KAFKA_RETRIABLE_ERROR = 50003


# Looked up along the error's class hierarchy: a subclass not listed answers as its parent.
ANSWERS: dict[type[errors.GatewayError], tuple[int, ErrorCode]] = {
    errors.MalformedJson: (400, ErrorCode.MALFORMED_JSON),
    errors.KafkaBadRequest: (400, ErrorCode.KAFKA_BAD_REQUEST),
    errors.Unauthenticated: (401, ErrorCode.UNAUTHENTICATED),
    errors.Forbidden: (403, ErrorCode.FORBIDDEN),
    errors.NotFound: (404, ErrorCode.NOT_FOUND),
    errors.TopicNotFound: (404, ErrorCode.TOPIC_NOT_FOUND),
    errors.PartitionNotFound: (404, ErrorCode.PARTITION_NOT_FOUND),
    errors.ConsumerInstanceNotFound: (404, ErrorCode.CONSUMER_INSTANCE_NOT_FOUND),
    errors.NotAcceptable: (406, ErrorCode.NOT_ACCEPTABLE),
    errors.FormatMismatch: (406, ErrorCode.CONSUMER_FORMAT_MISMATCH),
    errors.ConsumerAlreadyExists: (409, ErrorCode.CONSUMER_ALREADY_EXISTS),
    errors.IllegalState: (409, ErrorCode.ILLEGAL_STATE),
    errors.GroupNotEmpty: (409, ErrorCode.GROUP_NOT_EMPTY),
    errors.RequestTooLarge: (413, ErrorCode.REQUEST_TOO_LARGE),
    errors.RecordTooLarge: (413, ErrorCode.RECORD_TOO_LARGE),
    errors.UnsupportedMediaType: (415, ErrorCode.UNSUPPORTED_MEDIA_TYPE),
    errors.OffsetOutOfRange: (416, ErrorCode.OFFSET_OUT_OF_RANGE),
    errors.InvalidBody: (422, ErrorCode.INVALID_BODY),
    errors.InvalidConsumerConfig: (422, ErrorCode.INVALID_CONSUMER_CONFIG),
    errors.InvalidSchema: (422, ErrorCode.INVALID_SCHEMA),
    errors.KeySchemaMissing: (422, ErrorCode.KEY_SCHEMA_MISSING),
    errors.ValueSchemaMissing: (422, ErrorCode.VALUE_SCHEMA_MISSING),
    errors.RecordConversionFailed: (422, ErrorCode.RECORD_CONVERSION_FAILED),
    errors.SchemaLookupFailed: (408, ErrorCode.SCHEMA_LOOKUP_FAILED),
    errors.KafkaFailure: (500, ErrorCode.KAFKA_ERROR),
    errors.RetriableKafkaFailure: (503, ErrorCode.KAFKA_RETRIABLE_ERROR),
}


def answer(e: errors.GatewayError) -> tuple[int, ErrorCode]:
    """The HTTP status and error code of ``e``."""
    if isinstance(e, RegistryError):   # the registry's codes are Schema Registry's own (registry/errors.py)
        return e.status, e.code
    for kind in type(e).__mro__:
        if kind in ANSWERS:
            return ANSWERS[kind]
    return 500, ErrorCode.INTERNAL_ERROR


def body(e: errors.GatewayError) -> dict:
    return {"error_code": int(answer(e)[1]), "message": e.message}


def _headers(e: errors.GatewayError) -> dict[str, str] | None:
    if isinstance(e, errors.Unauthenticated):
        return {"WWW-Authenticate": "Bearer"}
    if isinstance(e, errors.OffsetOutOfRange):
        return {"Odradek-Log-Start-Offset": str(e.log_start_offset)}
    return None


def response(e: errors.GatewayError) -> JSONResponse:
    return JSONResponse(body(e), status_code=answer(e)[0], headers=_headers(e))


# -- the handlers app.py registers ------------------------------------------------------------------
async def domain_error(_: Request, e: errors.GatewayError) -> JSONResponse:
    return response(e)


async def http_error(_: Request, e: StarletteHTTPException) -> JSONResponse:
    """Starlette's own refusals (no such route, method not allowed): the bare status as the code."""
    message = e.detail if isinstance(e.detail, str) and e.detail else f"HTTP {e.status_code}"
    return JSONResponse({"error_code": e.status_code, "message": message}, status_code=e.status_code,
                        headers=e.headers)


async def invalid_request(_: Request, e: RequestValidationError) -> JSONResponse:
    return response(errors.InvalidBody.from_pydantic(e.errors(), skip=("body",)))


async def unexpected(_: Request, e: Exception) -> JSONResponse:
    log.exception("unexpected error")
    return JSONResponse({"error_code": int(ErrorCode.INTERNAL_ERROR), "message": f"Internal error: {type(e).__name__}"},
                        status_code=500)


# -- request checks shared by the routes ------------------------------------------------------------
class V2Response(JSONResponse):
    media_type = formats.V2


def acceptable(*offered: str):
    """A dependency refusing (406, as REST Proxy v2 does) an ``Accept`` header that names none of
    the media types a route can answer (wildcards and an absent header accept anything)."""
    def check(request: Request) -> None:
        accept = request.headers.get("accept")
        if not accept:
            return
        asked = {part.split(";")[0].strip().lower() for part in accept.split(",")}
        families = {t.split("/")[0] + "/*" for t in offered}
        if asked & ({"*/*", ""} | families | set(offered)):
            return
        raise errors.NotAcceptable(f"HTTP 406 Not Acceptable: this path answers {', '.join(offered)}")
    return Depends(check)


def content_type(*allowed: str):
    """A dependency: the body's media type, which must be one of ``allowed``."""
    def check(request: Request) -> str:
        kind = formats.media_type(request.headers.get("content-type"))
        if kind not in allowed:
            raise errors.UnsupportedMediaType(f"HTTP 415 Unsupported Media Type: expected one of {', '.join(allowed)}")
        return kind
    return Depends(check)


async def read_body(request: Request) -> bytes:
    """The whole body, refused as soon as it passes --max-request-bytes (a chunked body has no
    Content-Length for ``BodyLimit`` to check)."""
    limit, chunks, size = request.app.state.settings.max_request_bytes, [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise errors.RequestTooLarge(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def parse_body(request: Request, model: type[BaseModel]):
    """The body (bounded by ``read_body``) validated as ``model``."""
    return parse(await read_body(request), model)


def parse(raw: bytes, model: type[BaseModel]):
    try:
        return model.model_validate_json(raw)
    except ValidationError as e:
        raise errors.InvalidBody.from_pydantic(e.errors()) from None


class BodyLimit:
    """ASGI middleware: a Content-Length above ``limit`` is refused at once, before the body is read."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        length = dict(scope.get("headers", ())).get(b"content-length", b"")
        if scope["type"] == "http" and length.isdigit() and int(length) > self.limit:
            return await response(errors.RequestTooLarge(int(length), self.limit))(scope, receive, send)
        await self.app(scope, receive, send)
