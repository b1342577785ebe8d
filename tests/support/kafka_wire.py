"""A minimal Kafka client for tests that must send what real clients never send
(corrupt batches, unsupported versions, garbage frames), built on kio's schemas."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from odradek.records import Record, build_batch


def batch(values: list[bytes], *, key: bytes | None = b"k", timestamp_ms: int = 1_700_000_000_000) -> bytes:
    return bytes(build_batch([Record(v, key, (("h", b"v"),), timestamp_ms) for v in values]))


class WireClient:
    def __init__(self, address: str, timeout: float = 10.0, source: str | None = None,
                 client_id: str = "wire-test") -> None:
        host, port = address.rsplit(":", 1)
        self.client_id = client_id
        self.sock = socket.create_connection((host, int(port)), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def encode(self, api_key: int, version: int, body: Any) -> bytes:
        schema = load_request_schema(api_key, version)
        self._correlation += 1
        buf = io.BytesIO()
        header = schema.__header_schema__
        fields = {"request_api_key": api_key, "request_api_version": version,
                  "correlation_id": self._correlation, "client_id": self.client_id}
        entity_writer(header)(buf, header(**fields))
        entity_writer(schema)(buf, body)
        payload = buf.getvalue()
        return struct.pack(">i", len(payload)) + payload

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._exact(4))[0]
        return self._exact(size)

    def request(self, api_key: int, version: int, body: Any) -> Any:
        self.send_raw(self.encode(api_key, version, body))
        return self.decode(api_key, version, self.read_frame())

    @staticmethod
    def decode(api_key: int, version: int, frame: bytes) -> Any:
        schema = load_response_schema(api_key, version)
        view = memoryview(frame).toreadonly()
        _, n = entity_reader(schema.__header_schema__)(view, 0)
        return entity_reader(schema)(view, n)[0]

    def closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def _exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            out += chunk
        return bytes(out)


def fetch_partition(client: WireClient, topic: str, offset: int, partition: int = 0) -> Any:
    """A consumer's Fetch v12 of one partition at ``offset`` (no session, 10 ms max wait): its answer."""
    import datetime
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
    req = FetchRequest(replica_id=-1, max_wait=datetime.timedelta(milliseconds=10), min_bytes=1,
                       max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                       topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
                           partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                           log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                       forgotten_topics_data=(), rack_id="")
    return client.request(1, 12, req).responses[0].partitions[0]
