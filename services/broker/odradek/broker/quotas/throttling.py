"""Where requests meet the quotas: what handlers and the dispatcher call (KIP-219 semantics).

A handler that records bytes (Produce: the request's size; a consumer's Fetch: the response's
record bytes) gets the throttle time to put in its response; the dispatcher records the
request's handling time against ``request_percentage`` and raises the response's
``throttle_time_ms`` to the larger of the two, as Kafka's KafkaApis does. Either way the
connection's ``RequestContext.throttle_ms`` keeps the largest: once the response is written
the connection is muted that long (``KafkaConnection.throttle``), so a client that ignores
the throttle time still cannot exceed its quota.

Requests Kafka exempts from the request quota are exempt here: ApiVersions, the SASL
exchange and followers' fetches (replication).
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from contextvars import ContextVar

from odradek.broker.quotas.entities import REQUEST_PERCENTAGE
from odradek.broker.quotas.manager import ClientQuotaManager, user_of
from odradek.broker.security.session import current

FETCH, API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 1, 18, 17, 36
_EXEMPT = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
_NANOS_TO_PERCENT = 100.0 / 1e9   # Kafka's ClientRequestQuotaManager.NanosToPercentagePerSecond
# the request being handled's start (request_started), 0 once recorded: per connection task
_STARTED: ContextVar[int] = ContextVar("odradek_request_quota_started", default=0)


def record_bytes(quotas: ClientQuotaManager, key: str, header, value: float) -> int:
    """Record ``value`` bytes against ``key``'s quota for this connection's user and client id;
    the throttle time (ms), also kept for the connection's mute."""
    if not quotas.enabled(key):
        return 0
    context = current()
    throttle = quotas.record(key, user_of(context.principal), header.client_id or "", value)
    if throttle:
        context.throttle_ms = max(context.throttle_ms, throttle)
    return throttle


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
    context = current()
    spent = (time.thread_time_ns() - started) * _NANOS_TO_PERCENT
    throttle = quotas.record(REQUEST_PERCENTAGE, user_of(context.principal), header.client_id or "", spent)
    context.throttle_ms = max(context.throttle_ms, throttle)
    return throttle


def request_finished(quotas: ClientQuotaManager, started: int, header, request, body):
    """Record the request's time (``started``: ``request_started``'s clock, 0 for none); return
    ``body`` with ``throttle_time`` raised to the connection's throttle (bodies without one
    unchanged; pre-encoded Fetch responses carry theirs: ``record_request_time``).

    Odradek handles requests on one event loop, so the time is the loop thread's CPU time
    while the handler ran (a long-polling Fetch's wait costs nothing; other connections' work
    done meanwhile is counted too: an over-estimate under load)."""
    context = current()
    if started and _STARTED.get() and not (header.api_key == FETCH and request.replica_id >= 0):
        _record_time(quotas, header, started)
    if context.throttle_ms and body is not None and not isinstance(body, list) and hasattr(body, "throttle_time"):
        wanted = datetime.timedelta(milliseconds=context.throttle_ms)
        if body.throttle_time < wanted:
            body = dataclasses.replace(body, throttle_time=wanted)
    return body
