"""The data directory going offline on an I/O error (Kafka's LogDirFailureChannel).

A write that fails with an ``OSError`` (ENOSPC on a full disk, EIO) leaves the log's files
in a state the broker cannot trust: the directory is marked offline, once, and every later
read or write of its partitions is answered ``KAFKA_STORAGE_ERROR`` (56, retriable: clients
refresh metadata and move to the new leaders). Listeners (the broker) are told once; they
may be called from a worker thread (checkpoints are written in one), so they must hand the
news to their own loop. Nothing on disk is repaired here: a restart runs recovery, which
truncates a torn tail.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable

from odradek.errors import ErrorCode, KafkaError

__all__ = ["LogDirFailureChannel"]

log = logging.getLogger(__name__)


class LogDirFailureChannel:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.cause: str | None = None
        self._lock = threading.Lock()
        self._listeners: list[Callable[[str], None]] = []

    @property
    def offline(self) -> bool:
        return self.cause is not None

    def subscribe(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(cause)`` once, when the directory goes offline."""
        self._listeners.append(listener)

    def fail(self, what: str, error: OSError) -> KafkaError:
        """Mark the directory offline because ``what`` failed; the error to answer with."""
        with self._lock:
            first = self.cause is None
            if first:
                self.cause = f"{what} failed: {error}"
        if first:
            log.error("log directory %s is offline: %s", self.data_dir, self.cause)
            for listener in self._listeners:
                listener(self.cause)
        return self.error()

    def error(self) -> KafkaError:
        return KafkaError(ErrorCode.kafka_storage_error,
                          f"the log directory {self.data_dir} is offline ({self.cause})")

    def check(self) -> None:
        """Raise KAFKA_STORAGE_ERROR if the directory is offline."""
        if self.cause is not None:
            raise self.error()
