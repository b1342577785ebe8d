"""Prometheus metrics of the gateway (``GET /metrics``)."""

from __future__ import annotations

import time

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.requests import Request
from starlette.responses import Response

REGISTRY = CollectorRegistry()
REQUESTS = Counter("odradek_gateway_requests_total", "HTTP requests", ["method", "route", "status"],
                   registry=REGISTRY)
LATENCY = Histogram("odradek_gateway_request_seconds", "HTTP request latency", ["method", "route"],
                    buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30), registry=REGISTRY)
RECORDS_IN = Counter("odradek_gateway_records_produced_total", "records produced through the gateway",
                     registry=REGISTRY)
RECORDS_OUT = Counter("odradek_gateway_records_consumed_total", "records read through the gateway",
                      registry=REGISTRY)
CONSUMER_INSTANCES = Gauge("odradek_gateway_consumer_instances", "live consumer instances", registry=REGISTRY)


async def middleware(request: Request, call_next):
    started = time.perf_counter()
    response = await call_next(request)
    route = getattr(request.scope.get("route"), "path", "unmatched")
    LATENCY.labels(request.method, route).observe(time.perf_counter() - started)
    REQUESTS.labels(request.method, route, str(response.status_code)).inc()
    return response


def endpoint(_: Request) -> Response:
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
