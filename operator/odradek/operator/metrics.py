"""The operator's own Prometheus metrics: how many times each kopf handler ran per resource
kind and outcome, and how long it took (docs/observability.md, "Operator metrics").

``instrument(kind, fn)`` wraps a handler (``handlers.register`` wraps every one); ``serve(port)``
exposes the default registry (with prometheus-client's process collector) at
``host:port/metrics`` from a daemon thread, which the chart's PodMonitor scrapes (the
operator container's ``metrics`` port).
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable

import kopf
from prometheus_client import Counter, Histogram, start_http_server

RECONCILES = Counter("odradek_operator_reconcile", "Handler runs per resource kind, handler and outcome "
                     "(success, retry: waiting or a temporary error, invalid: a permanent error, error: an exception)",
                     ["kind", "handler", "outcome"])
DURATION = Histogram("odradek_operator_reconcile_duration_seconds", "Handler run time per resource kind and handler",
                     ["kind", "handler"], buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))


def _outcome(error: BaseException | None) -> str:
    if error is None:
        return "success"
    if isinstance(error, kopf.TemporaryError):
        return "retry"
    return "invalid" if isinstance(error, kopf.PermanentError) else "error"


def instrument(kind: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` counted and timed under ``kind`` and its own name (kopf's handler id stays ``fn``'s)."""
    handler = getattr(fn, "__name__", None) or fn.func.__name__  # a functools.partial has no __name__

    @functools.wraps(fn.func if isinstance(fn, functools.partial) else fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        start, error = time.monotonic(), None
        try:
            return fn(*args, **kwargs)
        except BaseException as e:
            error = e
            raise
        finally:
            DURATION.labels(kind, handler).observe(time.monotonic() - start)
            RECONCILES.labels(kind, handler, _outcome(error)).inc()
    return run


def serve(host: str, port: int) -> None:
    """``/metrics`` at ``host:port`` (a daemon thread, for the process's lifetime)."""
    start_http_server(port, host)
