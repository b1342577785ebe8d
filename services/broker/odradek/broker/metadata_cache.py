"""Metadata responses at thousands of partitions: topic entries encoded once per snapshot.

A Metadata request for every topic made one kio entity per partition and wrote it with
kio's pure-Python writers, on every request: ~10 ms at 1,000 partitions, growing with them.
A topic's entry depends only on the snapshot the broker applied (partitions, leaders, epochs,
replicas, ISRs, which brokers are live), the topic (its id) and the response version, so
``EncodedTopics`` keeps, per applied snapshot, each topic's entry encoded for each version
asked, and the sorted topic names; a new snapshot drops them all (a snapshot is replaced,
never patched: ``ReplicaManager.apply``).

What differs per request stays per request (see handlers.metadata): which topics (asked for,
authorized for the principal), the brokers with their address on the request's listener,
the controller id, the throttle time, and any topic entry with an error or with
``include_topic_authorized_operations`` (the principal's operations). ``EncodedMetadataResponse``
encodes the response without topics with kio and splices the encoded entries into its
topics array: the bytes are exactly kio's for the whole response (tests/protocol checks
every version).
"""

from __future__ import annotations

import dataclasses
import datetime
import io
from dataclasses import dataclass
from typing import Any, Callable

from kio.serial import entity_writer
from kio.serial.writers import write_int32, write_unsigned_varint

__all__ = ["EncodedMetadataResponse", "EncodedTopics", "MetadataCache", "encode_topic"]

_ZERO = datetime.timedelta(0)


def encode_topic(topic: Any) -> bytes:
    """One MetadataResponseTopic entity, as kio writes it inside the response."""
    buf = io.BytesIO()
    entity_writer(type(topic))(buf, topic)
    return buf.getvalue()


class EncodedTopics:
    """The encoded topic entries and sorted names of one applied snapshot."""

    __slots__ = ("snapshot", "names", "_entries")

    def __init__(self, snapshot) -> None:
        self.snapshot = snapshot
        self.names: tuple[str, ...] = tuple(sorted(t.name for t in snapshot.topics)) if snapshot else ()
        self._entries: dict[tuple[int, str], bytes] = {}

    def entry(self, version: int, name: str, build: Callable[[], Any]) -> bytes:
        """Topic ``name``'s entry for ``version``, encoded from ``build()`` the first time."""
        key = (version, name)
        encoded = self._entries.get(key)
        if encoded is None:
            encoded = self._entries[key] = encode_topic(build())
        return encoded


class MetadataCache:
    """The broker's encoded topic entries, for the snapshot last asked about (a ``BrokerContext``
    part; event loop only)."""

    def __init__(self) -> None:
        self._cached = EncodedTopics(None)

    def topics(self, snapshot) -> EncodedTopics:
        """The cache for ``snapshot`` (a new one when the snapshot changed)."""
        if self._cached.snapshot is not snapshot:
            self._cached = EncodedTopics(snapshot)
        return self._cached


@dataclass(frozen=True, slots=True)
class EncodedMetadataResponse:
    """A MetadataResponse whose topics are already encoded: ``head`` is the response with no
    topics. ``throttle_time`` is a field of its own so that the quota manager can raise it
    (``dataclasses.replace``) as on any response; it goes into ``head`` when encoding."""

    head: Any
    topics: tuple[bytes, ...]
    version: int
    throttle_time: datetime.timedelta = _ZERO

    def encode_body(self) -> bytes:
        head = self.head
        if hasattr(head, "throttle_time") and head.throttle_time != self.throttle_time:
            head = dataclasses.replace(head, throttle_time=self.throttle_time)
        buf = io.BytesIO()
        entity_writer(type(head))(buf, head)
        empty = buf.getvalue()
        flexible = type(head).__flexible__
        # After the topics array: cluster_authorized_operations (v8-v10), then the tagged
        # fields (flexible versions: none in Metadata, one byte); the empty array before them.
        tail = 4 * hasattr(head, "cluster_authorized_operations") + flexible
        cut = len(empty) - tail - (1 if flexible else 4)
        out = io.BytesIO()
        out.write(empty[:cut])
        if flexible:
            write_unsigned_varint(out, len(self.topics) + 1)
        else:
            write_int32(out, len(self.topics))
        out.write(b"".join(self.topics))
        out.write(empty[len(empty) - tail:])
        return out.getvalue()
