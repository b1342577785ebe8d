"""Topic names: Kafka's naming rule and the set of internal topics, stated once.

The controller refuses a bad name with Kafka's INVALID_TOPIC_EXCEPTION messages
(``Topic.validate``); the operator and the gateway ask ``name_problem`` for the same sentence
before they forward anything. Internal topics are Kafka's set (``Topic.INTERNAL_TOPICS``),
not every name that starts with ``__``: a user may name a topic ``__mine``; it is an ordinary
topic, as in Kafka.
"""

from __future__ import annotations

import re
from typing import Iterable

from odradek.errors import ErrorCode, KafkaError

MAX_NAME_LENGTH = 249
LEGAL_CHARS = r"[a-zA-Z0-9._-]"
_LEGAL = re.compile(rf"^{LEGAL_CHARS}+$")

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a legal topic name (Kafka's message), or None."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_NAME_LENGTH:
        return (f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
                f"topic name: {name}")
    if not _LEGAL.match(name):
        return (f'Topic name "{name}" is illegal, it contains a character other than '
                "ASCII alphanumerics, '.', '_' and '-'")
    return None


def validate_name(name: str) -> None:
    """Raise INVALID_TOPIC_EXCEPTION with Kafka's message for an illegal name."""
    problem = name_problem(name)
    if problem is not None:
        raise KafkaError(ErrorCode.invalid_topic_exception, problem)


def colliding_topic(name: str, existing: Iterable[str]) -> str | None:
    """An existing topic whose name differs only by '.' vs '_' (their metric names collide)."""
    key = name.replace(".", "_")
    for other in existing:
        if other != name and other.replace(".", "_") == key:
            return other
    return None
