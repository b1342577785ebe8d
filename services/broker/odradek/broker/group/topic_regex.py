"""KIP-848 regex subscriptions: a ConsumerGroupHeartbeat's SubscribedTopicRegex compiled and
resolved to topic names, as Kafka 4.x's group coordinator does it.

Kafka compiles the regex with RE2/J (``com.google.re2j``), not ``java.util.regex``, and a topic
is subscribed when the whole name matches (``Matcher.matches``). We use Google's RE2 (the
``google-re2`` bindings) with ``fullmatch``: the same syntax and the same refusals (no
lookaround, no backreferences, repetitions up to 1000), where Python's ``re`` would accept
patterns Kafka refuses and read some differently. A regex RE2 refuses is Kafka's
INVALID_REGULAR_EXPRESSION. Compiled patterns are cached: every member of a group usually
sends the same one.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

import re2

from odradek.errors import ErrorCode, KafkaError

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a client's bad regex is its error, answered; not a line on the broker's stderr


@lru_cache(maxsize=256)
def compile_regex(regex: str):
    """The compiled ``regex``; KafkaError INVALID_REGULAR_EXPRESSION when RE2 refuses it."""
    try:
        return re2.compile(regex, options=_OPTIONS)
    except re2.error as e:
        why = e.args[0].decode(errors="replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise KafkaError(ErrorCode.invalid_regular_expression,
                         f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {why}.") from None


def resolve(regex: str, topics: Iterable[str]) -> frozenset[str]:
    """The names among ``topics`` that ``regex`` matches as a whole."""
    pattern = compile_regex(regex)
    return frozenset(name for name in topics if pattern.fullmatch(name) is not None)
