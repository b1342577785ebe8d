"""Kafka error codes as exceptions.

Error codes come from kio's ``ErrorCode`` enum (every code Apache Kafka defines, with its
``retriable`` flag); this module only adds an exception that carries one code and a
human-readable message, so business code raises and protocol code answers.
"""

from __future__ import annotations

from typing import NamedTuple

from kio.schema.errors import ErrorCode

__all__ = ["CustomMessageError", "ErrorCode", "KafkaError", "ProduceRecordsError", "RecordError", "RecordValidationError",
           "error_name"]


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


class ProduceRecordsError(KafkaError):
    """A partition's records refused before they reach its log, as Kafka's
    ProduceRequest.validateRecords refuses them (no batch, more than one, an old magic): Kafka
    answers these without the partition's log start offset (-1)."""


class CustomMessageError(KafkaError):
    """A refusal of a partition's produce whose message Kafka sends as the Produce ``error_message``
    (ReplicaManager's hasCustomErrorMessage: record errors, a failed transaction verification);
    any other failure of a partition's produce is answered with a null message."""


class RecordError(NamedTuple):
    """One refused record of a batch: its index in the batch and why (Produce v8+ ``record_errors``)."""

    batch_index: int
    message: str | None


class RecordValidationError(CustomMessageError):
    """A batch refused for some of its records (Kafka's RecordValidationException): the partition's
    code, Kafka's summary as its message (the Produce v8+ ``error_message``), and the records:
    INVALID_TIMESTAMP when any record's timestamp is out of range, else INVALID_RECORD.
    ``keyless``: how many were refused for a missing key (the broker's metric of them)."""

    def __init__(self, record_errors: list[RecordError], *, timestamps: bool = False, keyless: int = 0) -> None:
        if timestamps:
            code, summary = ErrorCode.invalid_timestamp, "One or more records have been rejected due to invalid timestamp"
        else:
            shown = ", ".join(f"RecordError(batchIndex={e.batch_index}, message='{e.message}')"
                              for e in record_errors[:3])
            code, summary = ErrorCode.invalid_record, (
                f"One or more records have been rejected due to {len(record_errors)} record "
                f"errors in total, and only showing the first three errors at most: [{shown}]")
        super().__init__(code, summary)
        self.record_errors = tuple(record_errors)
        self.keyless = keyless


def error_name(code: ErrorCode) -> str:
    """The name Kafka's docs and tools use, e.g. ``TOPIC_ALREADY_EXISTS``."""
    return code.name.upper()
