"""REST Proxy v2 errors: every error answers ``{"error_code": int, "message": str}``, with the
codes Confluent's proxy uses (HTTP status * 100 + a detail, or the bare status)."""

from __future__ import annotations

import logging

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("odradek.gateway")

TOPIC_NOT_FOUND = 40401
PARTITION_NOT_FOUND = 40402
CONSUMER_INSTANCE_NOT_FOUND = 40403
LEADER_NOT_AVAILABLE = 40404
CONSUMER_FORMAT_MISMATCH = 40601
CONSUMER_ALREADY_SUBSCRIBED = 40901
CONSUMER_ALREADY_EXISTS = 40902
ILLEGAL_STATE = 40903
RECORD_TOO_LARGE = 41301
OFFSET_OUT_OF_RANGE = 41601
INVALID_BODY = 422                # what rest-utils answers for a body that does not validate
INVALID_CONSUMER_CONFIG = 42204
KAFKA_ERROR = 50002
KAFKA_RETRIABLE_ERROR = 50003


class RestError(Exception):
    def __init__(self, status: int, error_code: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.error_code, self.message, self.headers = status, error_code, message, headers

    @classmethod
    def topic_not_found(cls, topic: str) -> "RestError":
        return cls(404, TOPIC_NOT_FOUND, f"Topic {topic} not found.")

    @classmethod
    def partition_not_found(cls, topic: str, partition: int) -> "RestError":
        return cls(404, PARTITION_NOT_FOUND, f"Partition {partition} of topic {topic} not found.")


def acceptable(*offered: str):
    """A dependency answering 406 (as REST Proxy v2 does) when the Accept header names none of
    the media types a route can answer (wildcards and an absent header accept anything)."""
    def check(request: Request) -> None:
        accept = request.headers.get("accept")
        if not accept:
            return
        asked = {part.split(";")[0].strip().lower() for part in accept.split(",")}
        families = {t.split("/")[0] + "/*" for t in offered}
        if asked & ({"*/*", ""} | families | set(offered)):
            return
        raise RestError(406, 406, f"HTTP 406 Not Acceptable: this path answers {', '.join(offered)}")
    return Depends(check)


def too_large_message(length: int, limit: int) -> str:
    return f"Request body of {length} bytes or more exceeds the gateway's limit of {limit} bytes"


def body(error_code: int, message: str) -> dict:
    return {"error_code": error_code, "message": message}


def install(app: FastAPI) -> None:
    @app.exception_handler(RestError)
    async def rest_error(_: Request, e: RestError) -> JSONResponse:
        return JSONResponse(body(e.error_code, e.message), status_code=e.status, headers=e.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, e: StarletteHTTPException) -> JSONResponse:
        message = e.detail if isinstance(e.detail, str) and e.detail else f"HTTP {e.status_code}"
        return JSONResponse(body(e.status_code, message), status_code=e.status_code, headers=e.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, e: RequestValidationError) -> JSONResponse:
        first = e.errors()[0] if e.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        status = 400 if first.get("type") == "json_invalid" else 422
        return JSONResponse(body(status, f"{where}: {first.get('msg', 'invalid request')}".lstrip(": ")),
                            status_code=status)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, e: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return JSONResponse(body(50001, f"Internal error: {type(e).__name__}"), status_code=500)
