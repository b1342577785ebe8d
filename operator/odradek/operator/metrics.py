"""The operator's own Prometheus metrics: how many times each kopf handler ran per resource
kind and outcome, and how long it took (docs/observability.md, "Operator metrics"), and when
each cluster's certificates expire (``CERTIFICATES``: the chart's CertificateExpiration alert).

``instrument(kind, fn)`` wraps a handler (``handlers.register`` wraps every one); ``serve(port)``
exposes the default registry (with prometheus-client's process collector) at
``host:port/metrics`` from a daemon thread, which the chart's PodMonitor scrapes (the
operator container's ``metrics`` port).
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any, Callable, Iterator, Mapping

import kopf
from prometheus_client import REGISTRY, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily

RECONCILES = Counter("odradek_operator_reconcile", "Handler runs per resource kind, handler and outcome "
                     "(success, retry: waiting or a temporary error, invalid: a permanent error, error: an exception)",
                     ["kind", "handler", "outcome"])
DURATION = Histogram("odradek_operator_reconcile_duration_seconds", "Handler run time per resource kind and handler",
                     ["kind", "handler"], buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))


class CertificateExpiry:
    """``odradek_certificate_expiry_timestamp_seconds{resource_namespace, cluster, secret, key}``:
    the notAfter (Unix time) of each certificate of each cluster, as the status timer last read
    them (``reconcile.renewal_due``, every ``status_interval``). A cluster not read for
    ``STALE_S`` (deleted, or no longer watched) drops out, so no alert fires for it.
    (``namespace`` and ``odradek_cluster`` are the scrape's own labels: the operator pod's.)"""

    NAME = "odradek_certificate_expiry_timestamp_seconds"
    STALE_S = 600.0

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock, self._lock = clock, threading.Lock()
        self._clusters: dict[tuple[str, str], tuple[float, dict[tuple[str, str], float]]] = {}

    def record(self, namespace: str, cluster: str, expiry: Mapping[tuple[str, str], float]) -> None:
        with self._lock:
            self._clusters[(namespace, cluster)] = (self._clock(), dict(expiry))

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(self.NAME, "When each certificate of a cluster expires (notAfter, Unix time)",
                                   labels=["resource_namespace", "cluster", "secret", "key"])
        now = self._clock()
        with self._lock:
            for (namespace, cluster), (seen, expiry) in sorted(self._clusters.items()):
                if now - seen > self.STALE_S:
                    continue
                for (secret, key), when in sorted(expiry.items()):
                    family.add_metric([namespace, cluster, secret, key], when)
        yield family


CERTIFICATES = CertificateExpiry()
REGISTRY.register(CERTIFICATES)


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
