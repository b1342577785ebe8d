"""A thin HTTP client of the Odradek gateway: what ``odradek produce|consume`` and the Spark
data source use. Only the gateway's documented paths (docs/gateway.md)."""

from __future__ import annotations

import base64
import json
import ssl
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import httpx

ARROW = "application/vnd.apache.arrow.stream"
NDJSON = "application/x-ndjson"


class GatewayError(RuntimeError):
    def __init__(self, status: int, error_code: int, message: str):
        super().__init__(f"{message} (HTTP {status}, error_code {error_code})")
        self.status, self.error_code, self.message = status, error_code, message


@dataclass(frozen=True)
class Produced:
    partition: int | None
    offset: int | None
    error_code: int | None = None
    message: str | None = None


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def http_client(url: str, token: str | None, ca_file: str | None, timeout: float,
                headers: dict[str, str] | None = None) -> httpx.Client:
    """An HTTP client of the gateway (or its schema registry): the bearer token, and the CA its
    https certificate is checked against (the system's without ``ca_file``)."""
    headers = dict(headers or {})
    if token:
        headers["authorization"] = f"Bearer {token}"
    verify = ssl.create_default_context(cafile=ca_file) if ca_file else True
    return httpx.Client(base_url=url.rstrip("/"), timeout=timeout, headers=headers, verify=verify)


class GatewayClient:
    def __init__(self, url: str, token: str | None = None, timeout: float = 60.0, ca_file: str | None = None,
                 client_id: str | None = None, isolation_level: str = "read_uncommitted"):
        """``ca_file``: a PEM file of the CA (or self-signed certificate) an https gateway's
        certificate is checked against; without it, the system's CAs. ``client_id`` (the Spark
        source's ``kafka.client.id``) names the caller as the requests' User-Agent.
        ``isolation_level`` read_committed: offsets end at the last stable offset and range
        reads return no record of an aborted or open transaction."""
        self.isolation = {} if isolation_level == "read_uncommitted" else {"isolation_level": isolation_level}
        self.http = http_client(url, token, ca_file, timeout, {"user-agent": client_id} if client_id else {})

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "GatewayClient":
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def _check(self, resp: httpx.Response) -> httpx.Response:
        if resp.status_code >= 400:
            try:
                body = resp.json()
                raise GatewayError(resp.status_code, body.get("error_code", resp.status_code), body.get("message", ""))
            except (ValueError, AttributeError):
                raise GatewayError(resp.status_code, resp.status_code, resp.text[:500]) from None
        return resp

    # -- metadata -------------------------------------------------------------------------------
    def topics(self) -> list[str]:
        return self._check(self.http.get("/topics")).json()

    def partitions(self, topic: str) -> list[int]:
        return [p["partition"] for p in self.partition_details(topic)]

    def partition_details(self, topic: str) -> list[dict]:
        """REST Proxy v2's view: partition, leader, replicas [{broker, leader, in_sync}]."""
        return self._check(self.http.get(f"/topics/{topic}/partitions")).json()

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, high watermark)."""
        body = self._check(self.http.get(f"/topics/{topic}/partitions/{partition}/offsets",
                                         params=self.isolation)).json()
        return body["beginning_offset"], body["end_offset"]

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        return self._check(self.http.get(f"/topics/{topic}/partitions/{partition}/offsets",
                                         params={"timestamp": timestamp_ms})).json()["offset"]

    # -- produce --------------------------------------------------------------------------------
    def produce(self, topic: str, records: Iterable[dict]) -> list[Produced]:
        """Records as dicts of bytes: value, key, partition, headers [(k, bytes)], timestamp."""
        lines = []
        for r in records:
            line = {"value": _b64(r.get("value")), "key": _b64(r.get("key"))}
            if r.get("partition") is not None:
                line["partition"] = r["partition"]
            if r.get("headers"):
                line["headers"] = [{"key": k, "value": _b64(v)} for k, v in r["headers"]]
            if r.get("timestamp") is not None:
                line["timestamp"] = r["timestamp"]
            lines.append(json.dumps(line, separators=(",", ":")))
        if not lines:
            return []
        resp = self._check(self.http.post(f"/topics/{topic}/records", content="\n".join(lines).encode(),
                                          headers={"content-type": NDJSON}))
        return [Produced(**json.loads(x) if "offset" in x else {"partition": None, "offset": None, **json.loads(x)})
                for x in resp.text.splitlines()]

    # -- range reads ----------------------------------------------------------------------------
    def read_arrow(self, topic: str, partition: int, offset: int, end: int, max_bytes: int = 8 << 20):
        """One request: (Arrow IPC bytes, next offset)."""
        resp = self._check(self.http.get(f"/topics/{topic}/partitions/{partition}/records",
                                         params={"offset": offset, "end": end, "max_bytes": max_bytes,
                                                 **self.isolation},
                                         headers={"accept": ARROW}))
        return resp.content, int(resp.headers["odradek-next-offset"])

    def read_json(self, topic: str, partition: int, offset: int, end: int | None = None,
                  max_bytes: int = 1 << 20) -> tuple[list[dict], int]:
        params = {"offset": offset, "max_bytes": max_bytes, **({"end": end} if end is not None else {}),
                  **self.isolation}
        resp = self._check(self.http.get(f"/topics/{topic}/partitions/{partition}/records", params=params))
        return resp.json(), int(resp.headers["odradek-next-offset"])

    def follow(self, topic: str, partition: int, offset: int) -> Iterator[dict]:
        """Records from ``offset`` on, as they arrive (JSON range reads up to the high watermark)."""
        while True:
            records, offset = self.read_json(topic, partition, offset)
            if not records:
                time.sleep(0.2)  # at the high watermark: poll gently
            yield from records
