"""Kafka error codes as exceptions.

Error codes come from kio's ``ErrorCode`` enum (every code Apache Kafka defines, with its
``retriable`` flag); this module only adds an exception that carries one code and a
human-readable message, so business code raises and protocol code answers.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError", "error_name"]


class KafkaError(Exception):
    """A failure that maps to exactly one Kafka error code."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message or code.name

    @property
    def retriable(self) -> bool:
        return self.code.retriable

    def to_json(self) -> dict:
        return {"error_code": int(self.code), "error": error_name(self.code), "message": self.message}

    @classmethod
    def from_json(cls, body: dict) -> "KafkaError":
        return cls(ErrorCode(int(body["error_code"])), body.get("message", ""))


def error_name(code: ErrorCode) -> str:
    """The name Kafka's docs and tools use, e.g. ``TOPIC_ALREADY_EXISTS``."""
    return code.name.upper()
