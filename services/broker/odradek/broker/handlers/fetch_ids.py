"""Fetch v13+ names topics by id (KIP-516): the request seen by name, and the answers that
only ids allow. What the rest of the fetch path (sessions, the replica manager) reads is the
request with each id resolved to its topic's name (``ByName``), as Kafka's FetchRequest.fetchData
resolves them against its metadata cache:

- a topic to fetch is resolved by the current metadata; an id naming no topic (deleted, or
  never known) is answered UNKNOWN_TOPIC_ID for its partitions, outside any session;
- a topic to forget is resolved by the session first (it may name a topic since deleted);
- a session that holds a topic under an id that is no longer the topic's (deleted and
  recreated under its name) is answered INCONSISTENT_TOPIC_ID for it (``inconsistent``), as
  Kafka's ReplicaManager does when the session's id is not the log's, until its fetcher
  replaces the partition under the new id.

Versions below 13 pass through unchanged.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from odradek.broker.context import BrokerContext
from odradek.broker.replication.fetch_session import TOPIC_IDS_FROM_VERSION, FetchContext
from odradek.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class NamedTopic:
    """A request's FetchTopic or ForgottenTopic with its name resolved."""
    topic: str
    partitions: tuple
    topic_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class ByName:
    """A v13+ Fetch request as the session cache reads it (names instead of ids), and the ids
    that resolved to nothing: (id, partition indexes), answered UNKNOWN_TOPIC_ID."""
    session_id: int
    session_epoch: int
    topics: tuple[NamedTopic, ...]
    forgotten_topics_data: tuple[NamedTopic, ...]
    unknown: tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


def by_name(ctx: BrokerContext, version: int, req):
    """``req`` with its topic ids resolved (``ByName``); the request itself below v13."""
    if version < TOPIC_IDS_FROM_VERSION:
        return req
    session = {topic_id: name for name, topic_id in ctx.fetch_sessions.ids_of(req.session_id).items()}
    topics, unknown = [], []
    for t in req.topics:
        meta = ctx.replicas.topic_by_id(str(t.topic_id))
        if meta is None:
            unknown.append((t.topic_id, tuple(p.partition for p in t.partitions)))
        else:
            topics.append(NamedTopic(meta.name, tuple(t.partitions), t.topic_id))
    forgotten = []
    for t in req.forgotten_topics_data or ():
        name = session.get(t.topic_id)
        if name is None and (meta := ctx.replicas.topic_by_id(str(t.topic_id))) is not None:
            name = meta.name
        if name is not None:
            forgotten.append(NamedTopic(name, tuple(t.partitions), t.topic_id))
    return ByName(req.session_id, req.session_epoch, tuple(topics), tuple(forgotten), tuple(unknown))


def inconsistent(ctx: BrokerContext, context: FetchContext) -> dict[str, ErrorCode]:
    """The fetched topics whose id (the session's, or the request's) is no longer the topic's."""
    out = {}
    for name, topic_id in context.ids.items():
        meta = ctx.replicas.topic(name)
        if meta is not None and meta.topic_id != str(topic_id):
            out[name] = ErrorCode.inconsistent_topic_id
    return out


def unknown_ids(req) -> tuple:
    """(id, partition indexes) of a v13+ request's topics that resolved to none."""
    return getattr(req, "unknown", ())
