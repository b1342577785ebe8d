"""The control plane's building blocks (docs/control-plane.md): what every route and body of
``control_plane`` and ``control_plane_users`` is made of.

Owns: ``Route`` (method, aiohttp-style path template, the decoder of its answer) and ``Request``
(one call ready to send), the body validation helpers a request model's ``from_json`` uses
(they raise INVALID_REQUEST), and the models several routes share (``TopicPartition``,
``PartitionResult``). No I/O here.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Generic, Mapping, NamedTuple, TypeVar

from odradek.errors import ErrorCode, KafkaError, error_name

A = TypeVar("A")
PREFIX = "/internal/v1"


# --- routes ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Route(Generic[A]):
    method: str
    template: str  # path with ``{param}`` placeholders, as aiohttp's router reads it
    answer: Callable[[Any], A]

    def path(self, **params: object) -> str:
        return self.template.format(**{k: urllib.parse.quote(str(v), safe="") for k, v in params.items()})


@dataclass(frozen=True, slots=True)
class Request(Generic[A]):
    """One call, ready to send: ``method`` and ``path`` (to join to a base URL) and ``body``."""

    route: Route[A]
    path: str
    body: dict | None = None

    @property
    def method(self) -> str:
        return self.route.method

    def decode(self, payload: Any) -> A:
        return self.route.answer(payload)


def _bad(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, message)


def _field(body: Mapping, name: str, kind: type, default: Any = ..., nullable: bool = False) -> Any:
    if name not in body:
        if default is ...:
            raise _bad(f"missing field '{name}'")
        return default
    value = body[name]
    if value is None and nullable:
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _bad(f"field '{name}' must be {kind.__name__}")
    return value


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(value)
    return value


def _ids(value: Any, message: str) -> tuple[int, ...]:
    try:
        return tuple(_int(r) for r in value)
    except TypeError:
        raise _bad(message) from None


def _configs(value: Mapping, what: str) -> dict[str, str | None]:
    if not all(isinstance(k, str) and (v is None or isinstance(v, (str, int, float, bool)))
               for k, v in value.items()):
        raise _bad(f"'{what}' must map config names to string values")
    return {k: (None if v is None else str(v).lower() if isinstance(v, bool) else str(v))
            for k, v in value.items()}


# --- models shared by several routes ------------------------------------------------------------
class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def to_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition}

    @classmethod
    def from_json(cls, entry: Any, what: str = "partitions") -> "TopicPartition":
        if not isinstance(entry, dict):
            raise _bad(f"each of '{what}' must be an object with 'topic' and 'partition'")
        return cls(_field(entry, "topic", str), _field(entry, "partition", int))


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """One partition's outcome of an election or reassignment request (NONE on success)."""

    topic: str
    partition: int
    error: ErrorCode
    message: str | None = None

    def to_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "error_code": int(self.error),
                "error": error_name(self.error), "message": self.message}

    @classmethod
    def from_json(cls, d: Mapping) -> "PartitionResult":
        return cls(d["topic"], int(d["partition"]), ErrorCode(int(d["error_code"])), d.get("message"))


@dataclass(frozen=True, slots=True)
class PartitionResults:
    results: tuple[PartitionResult, ...]

    def to_json(self) -> dict:
        return {"results": [r.to_json() for r in self.results]}

    @classmethod
    def from_json(cls, d: Mapping) -> "PartitionResults":
        return cls(tuple(PartitionResult.from_json(r) for r in d["results"]))
