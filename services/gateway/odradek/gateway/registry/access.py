"""Who may do what in the registry, as Confluent's topic-based authorizer (``TopicAclAuthorizer``)
decides it: each route is one of Confluent's operations (``Op``) on a subject, and a subject of
the TopicNameStrategy, ``<topic>-key`` or ``<topic>-value``, is decided by the rights on that topic.

Two deciders, by token:
- a token with rights of its own (``topics``, ``admin``): those rights, as for the REST Proxy. A
  subject's topic is read with a right to read or write it and written (register, delete) with
  the right to write it; other subjects (the record-name strategies) are read by every
  authenticated user and written by admins; compatibility levels and modes are admins'.
- a token mapped to a Kafka principal with every right here (no ``topics`` of its own: the
  operator's ``gateway.users``): the brokers' ACLs, asked as that principal (``kafka_rights``),
  with Confluent's table: reading a subject, its versions, its level or mode needs READ on the
  topic; registering, deleting, a compatibility check and setting its level or mode need WRITE;
  a schema by id needs READ on the topic of one of its subjects; what concerns no topic (global
  levels and modes, subjects of other strategies) is the super user's, which the brokers show
  as ALTER_CONFIGS on the cluster. Global reads (``GET /config``, ``/mode``) stay open to every
  authenticated user, as with tokens.
Lists (``/subjects``, a schema's subjects and versions) show only what the user may read.
A refusal answers 403 with Confluent's 40301."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka.admin import AclOperation
from fastapi import Request

from odradek.gateway import principals
from odradek.gateway.auth import READ, WRITE, Principal, authenticate
from odradek.gateway.errors import Forbidden
from odradek.gateway.registry.kafka_rights import KafkaRights

SUPER_USER = AclOperation.ALTER_CONFIGS     # on the cluster: what stands for Confluent's super user


@dataclass(frozen=True)
class Op:
    """One of Confluent's registry operations: what a token needs (``token``: r, w or admin) and
    what a principal the brokers decide for needs on the subject's topic (``topic``)."""
    name: str
    token: str
    topic: AclOperation


SUBJECT_READ = Op("Read", READ, AclOperation.READ)
SUBJECT_WRITE = Op("Write", WRITE, AclOperation.WRITE)
SUBJECT_DELETE = Op("Delete", WRITE, AclOperation.WRITE)
COMPATIBILITY_CHECK = Op("Write", READ, AclOperation.WRITE)        # Confluent: SUBJECT_WRITE
SUBJECT_CONFIG_READ = Op("ReadCompatibility", READ, AclOperation.READ)
SUBJECT_CONFIG_WRITE = Op("AlterCompatibility", "admin", AclOperation.WRITE)
# a produce's schema text found registered: Confluent's serializers would register it (SUBJECT_WRITE)
FOUND_FOR_PRODUCE = Op("Write", READ, AclOperation.WRITE)


def topic_of(subject: str) -> str | None:
    for suffix in ("-value", "-key"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject.removesuffix(suffix)
    return None


def brokers_decide(who: Principal) -> bool:
    """A mapped token whose own rights narrow nothing: the brokers' ACLs are all that decide."""
    return who.kafka is not None and who.admin and {READ, WRITE} <= set(who.topics.get("*", ""))


def _token_may(who: Principal, subject: str, op: Op) -> bool:
    topic = topic_of(subject)
    if op.token == "admin" or (topic is None and op.token == WRITE):
        return who.admin
    if topic is None:
        return True
    return who.may(WRITE, topic) if op.token == WRITE else who.sees(topic)


async def _allowed(request: Request, who: Principal, subjects: set[str], op: Op) -> set[str]:
    """The subjects among ``subjects`` on which ``who`` may do ``op``."""
    if not brokers_decide(who):
        return {s for s in subjects if _token_may(who, s, op)}
    rights: KafkaRights = request.app.state.registry_rights
    bridge, login = await principals.kafka(request), who.kafka.cache_key()
    topics = {s: topic_of(s) for s in subjects}
    on_topics = await rights.on_topics(login, bridge, {t for t in topics.values() if t is not None})
    by_topic = {s for s, t in topics.items() if t is not None and op.topic in on_topics[t]}
    # the rest only as Confluent's super user: other subjects, and those of a topic not created yet
    # (the brokers report a principal's operations only on topics that exist)
    if by_topic == subjects or SUPER_USER not in await rights.on_cluster(login, bridge):
        return by_topic
    return set(subjects)


def _denied(op: Op, subject: str) -> Forbidden:
    return Forbidden(f"User is denied operation {op.name} on Subject: {subject}")


def reader(request: Request) -> Principal:
    return authenticate(request)


async def subject(request: Request, name: str, op: Op) -> Principal:
    who = authenticate(request)
    if not await _allowed(request, who, {name}, op):
        raise _denied(op, name)
    return who


async def readable(request: Request, subjects) -> set[str]:
    return await _allowed(request, authenticate(request), set(subjects), SUBJECT_READ)


async def visible(request: Request, versions: list) -> list:
    allowed = await readable(request, {v.subject for v in versions})
    return [v for v in versions if v.subject in allowed]


async def check_any_subject(request: Request, versions: list) -> None:
    """A schema by id: readable through one of the subjects using it (Confluent's SCHEMA_READ)."""
    if versions and not await visible(request, versions):
        raise Forbidden("User is denied operation Read on this schema's subjects")


async def configure(request: Request, name: str | None) -> Principal:
    """Setting or deleting a compatibility level or mode: a subject's (``name``) or the global one."""
    if name is not None:
        return await subject(request, name, SUBJECT_CONFIG_WRITE)
    who = authenticate(request)
    if brokers_decide(who):
        rights: KafkaRights = request.app.state.registry_rights
        allowed = SUPER_USER in await rights.on_cluster(who.kafka.cache_key(), await principals.kafka(request))
    else:
        allowed = who.admin
    if not allowed:
        raise Forbidden("User is denied operation AlterGlobalCompatibility on the registry")
    return who
