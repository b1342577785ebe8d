"""Where requests meet the quotas: what handlers and the dispatcher call (KIP-219 semantics).

A handler that records bytes (Produce: the request's size; a consumer's Fetch: the response's
record bytes) gets the throttle time and answers with it (``handlers.answer.Answer``); the
dispatcher records the request's handling time against ``request_percentage``, raises the
response's ``throttle_time_ms`` to the larger of the two, as Kafka's KafkaApis does, and hands
that throttle to the connection: once the response is written the connection is muted that
long (``KafkaConnection.throttle``), so a client that ignores the throttle time still cannot
exceed its quota. Nothing here writes per-connection state.

Requests Kafka exempts from the request quota are exempt here: ApiVersions, the SASL
exchange and followers' fetches (replication).
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from contextvars import ContextVar

from odradek.broker.quotas.manager import ClientQuotaManager, user_of
from odradek.broker.replication.read import fetcher_id
from odradek.broker.security.session import current
from odradek.config.quotas import REQUEST_PERCENTAGE
from odradek.protocol.api_keys import ApiKey

_EXEMPT = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
_NANOS_TO_PERCENT = 100.0 / 1e9   # Kafka's ClientRequestQuotaManager.NanosToPercentagePerSecond
# the request being handled's start (request_started), 0 once recorded: per connection task
_STARTED: ContextVar[int] = ContextVar("odradek_request_quota_started", default=0)


def record_bytes(quotas: ClientQuotaManager, key: str, header, value: float) -> int:
    """Record ``value`` bytes against ``key``'s quota for this connection's user and client id;
    the throttle time (ms) the handler answers with."""
    if not quotas.enabled(key):
        return 0
    return quotas.record(key, user_of(current().principal), header.client_id or "", value)


def unrecord_bytes(quotas: ClientQuotaManager, key: str, header, value: float) -> None:
    quotas.unrecord(key, user_of(current().principal), header.client_id or "", value)


def request_started(quotas: ClientQuotaManager, api_key: int) -> int:
    """The loop thread's CPU clock (ns) when a request quota applies to this API, else 0 (also
    kept for ``record_request_time``)."""
    started = 0 if api_key in _EXEMPT or not quotas.enabled(REQUEST_PERCENTAGE) else time.thread_time_ns()
    _STARTED.set(started)
    return started


def record_request_time(quotas: ClientQuotaManager, header) -> int:
    """Record the request's time so far against ``request_percentage`` now, and return its
    throttle: Kafka's Fetch does so before it answers, so that a fetch the request quota
    throttles is answered empty too. ``request_finished`` then records nothing more for it."""
    started = _STARTED.get()
    if not started:
        return 0
    _STARTED.set(0)
    return _record_time(quotas, header, started)


def _record_time(quotas: ClientQuotaManager, header, started: int) -> int:
    spent = (time.thread_time_ns() - started) * _NANOS_TO_PERCENT
    return quotas.record(REQUEST_PERCENTAGE, user_of(current().principal), header.client_id or "", spent)


def request_finished(quotas: ClientQuotaManager, started: int, header, request) -> int:
    """Record the request's time (``started``: ``request_started``'s clock, 0 for none) unless
    the handler did (``record_request_time``) or it is a follower's fetch; its throttle (ms).

    Odradek handles requests on one event loop, so the time is the loop thread's CPU time
    while the handler ran (a long-polling Fetch's wait costs nothing; other connections' work
    done meanwhile is counted too: an over-estimate under load)."""
    if started and _STARTED.get() and not (header.api_key == ApiKey.FETCH and fetcher_id(request) >= 0):
        return _record_time(quotas, header, started)
    return 0


def with_throttle(body, throttle_ms: int):
    """``body`` with its ``throttle_time`` raised to ``throttle_ms`` (bodies without one, and
    pre-encoded pieces, which carry theirs, unchanged)."""
    if throttle_ms and body is not None and not isinstance(body, list) and hasattr(body, "throttle_time"):
        wanted = datetime.timedelta(milliseconds=throttle_ms)
        if body.throttle_time < wanted:
            body = dataclasses.replace(body, throttle_time=wanted)
    return body
