"""Who may do what in the registry, on the gateway's bearer-token rights (``auth``), mapped from
subjects to topics as Confluent's topic-based authorizer (``TopicAclAuthorizer``) maps them: a
subject of the TopicNameStrategy, ``<topic>-key`` or ``<topic>-value``, is read with a right to
read or write that topic and written (register, delete) with the right to write it. Other
subjects (the record-name strategies) are read by every authenticated user and written by admins;
compatibility levels and modes are admins' (Confluent: the cluster's ALTER_CONFIGS). Schemas by
id are read by whoever may read one of the subjects using them."""

from __future__ import annotations

from fastapi import Request

from odradek.gateway.auth import READ, WRITE, Principal, authenticate
from odradek.gateway.errors import Forbidden


def topic_of(subject: str) -> str | None:
    for suffix in ("-value", "-key"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject.removesuffix(suffix)
    return None


def _may(who: Principal, subject: str, write: bool) -> bool:
    topic = topic_of(subject)
    if topic is None:
        return who.admin if write else True
    return who.may(WRITE, topic) if write else who.sees(topic)


def reader(request: Request) -> Principal:
    return authenticate(request)


def subject(request: Request, name: str, write: bool) -> Principal:
    who = authenticate(request)
    if not _may(who, name, write):
        raise Forbidden(f"{who.name} may not {'write' if write else 'read'} subject {name}")
    return who


def may_read(request: Request, name: str) -> bool:
    return _may(authenticate(request), name, write=False)


def visible(request: Request, versions: list) -> list:
    who = authenticate(request)
    return [v for v in versions if _may(who, v.subject, write=False)]


def check_any_subject(request: Request, versions: list) -> None:
    if versions and not visible(request, versions):
        raise Forbidden(f"{authenticate(request).name} may not read this schema's subjects")


def configure(request: Request, name: str | None) -> Principal:
    who = authenticate(request)
    if not who.admin:
        raise Forbidden(f"{who.name} may not change the registry's "
                        f"{'global' if name is None else name + ' subject'} compatibility level or mode")
    return who
