"""Liveness (``/healthz``: the process answers) and readiness (``/readyz``: the cluster answers
a metadata request) of a gateway replica."""

from __future__ import annotations

import asyncio

from fastapi import Request
from fastapi.responses import JSONResponse

READY_TIMEOUT_S = 15


async def healthz() -> dict:
    return {"status": "ok"}


async def readyz(request: Request) -> JSONResponse:
    try:
        md = await asyncio.wait_for(request.app.state.kafka.metadata(fresh=True), READY_TIMEOUT_S)
    except Exception as e:  # noqa: BLE001 - any failure means not ready; said in the body
        return JSONResponse({"status": "unavailable", "reason": str(e)}, status_code=503)
    return JSONResponse({"status": "ready", "cluster_id": md.cluster_id, "brokers": len(md.brokers)})


async def root() -> dict:
    return {}
