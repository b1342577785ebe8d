"""Log output of every Odradek process: the ``--log-format`` and ``--log-level`` options and the
one ``configure`` call each command makes at start-up.

``text`` (the default) is the human-readable line every part printed so far. ``json`` writes
one JSON object per line with stable keys, for log pipelines (Fluent Bit, Vector, Loki):

    time, level, component, broker_id, topic, partition, message   (+ logger, exception)

``component`` and ``broker_id`` are the process's (``configure``); ``topic`` and ``partition``
come from the log call when it knows them (``log.info(..., extra={"topic": t, "partition": p})``)
and are null otherwise. Keys never disappear, so a pipeline's parser needs no optional fields.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import sys

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, the keys of the module docstring in that order."""

    def __init__(self, component: str, broker_id: int | None = None) -> None:
        super().__init__()
        self.component = component
        self.broker_id = broker_id

    def format(self, record: logging.LogRecord) -> str:
        out = {"time": datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc)
                       .isoformat(timespec="milliseconds").replace("+00:00", "Z"),
               "level": record.levelname, "component": self.component, "broker_id": self.broker_id,
               "topic": getattr(record, "topic", None), "partition": getattr(record, "partition", None),
               "message": record.getMessage(), "logger": record.name}
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def add_arguments(parser: argparse.ArgumentParser, level_default: str = "INFO") -> None:
    """``--log-level`` and ``--log-format`` on a command's parser."""
    parser.add_argument("--log-level", default=level_default, type=str.upper,
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument("--log-format", default="text", choices=FORMATS,
                        help="text (human-readable, the default) or json: one object per line with keys time, "
                             "level, component, broker_id, topic, partition, message (docs/observability.md)")


def configure(component: str, level: str = "INFO", fmt: str = "text", broker_id: int | None = None) -> None:
    """Route the root logger to stderr in ``fmt``; replaces handlers set before (force)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(component, broker_id) if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)


def tp(topic: str, partition: int | None = None) -> dict:
    """``extra=`` for a log call about a topic (and partition): the JSON format's keys."""
    return {"topic": topic, "partition": partition}
