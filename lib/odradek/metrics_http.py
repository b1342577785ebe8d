"""The Prometheus endpoint of brokers and controllers: ``GET /metrics`` on a plain-HTTP port of
its own (``metrics.port``; the chart uses 9404, Strimzi's JMX-exporter port), apart from the
control-plane API (which carries mutual TLS), so that Prometheus scrapes pods by port with no
client certificate (docs/observability.md).

Each process builds a ``CollectorRegistry`` with prometheus-client's process collector (CPU,
RSS, open files) and its own collectors, which compute their series at scrape time from the
state the process already keeps; ``serve`` runs the endpoint in the process's event loop, so
a scrape reads that state from the loop's own thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from odradek.cluster import control_plane_http

if TYPE_CHECKING:
    from aiohttp import web

PATH = "/metrics"


def registry(*collectors) -> CollectorRegistry:
    """A registry with the process collector and ``collectors``."""
    reg = CollectorRegistry()
    ProcessCollector(registry=reg)
    for collector in collectors:
        reg.register(collector)
    return reg


async def serve(reg: CollectorRegistry, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serve ``reg`` at ``http://host:port/metrics``; returns the runner (``cleanup`` stops it)
    and the bound port (``port`` 0: a free one)."""
    from aiohttp import web   # here: `odradek dev` commands need this module's url(), not its server
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(reg), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get(PATH, metrics)
    runner, (_, bound) = await control_plane_http.serve(app, host, port, None, "metrics")  # plain HTTP: no TLS
    return runner, bound


def _family(cls, name: str, doc: str, value: float | None, labels: Iterable[str],
            samples: Iterable[tuple[Iterable[str], float]]):
    labels = list(labels)
    if not labels:
        return cls(name, doc, value=value if value is not None else 0)
    family = cls(name, doc, labels=labels)
    for label_values, v in samples:
        family.add_metric(list(label_values), v)
    return family


def gauge(name: str, doc: str, value: float | None = None, labels: Iterable[str] = (),
          samples: Iterable[tuple[Iterable[str], float]] = ()) -> GaugeMetricFamily:
    """A gauge family: one unlabelled ``value``, or labelled ``samples`` of (label values, value)."""
    return _family(GaugeMetricFamily, name, doc, value, labels, samples)


def counter(name: str, doc: str, value: float | None = None, labels: Iterable[str] = (),
            samples: Iterable[tuple[Iterable[str], float]] = ()) -> CounterMetricFamily:
    """A counter family (exposed as ``name_total``), as ``gauge``."""
    return _family(CounterMetricFamily, name, doc, value, labels, samples)


def url(host: str, port: int) -> str:
    """The endpoint's URL (an IPv6 host in brackets)."""
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{PATH}"
