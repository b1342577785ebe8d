"""The broker's loggers as Kafka's BROKER_LOGGER config resource shows and changes them
(Kafka's Log4jController): every logger with its effective level, set live.

Kafka's level names map onto Python's (TRACE below DEBUG, FATAL as CRITICAL, OFF above it);
``root`` is the root logger. Setting a level is immediate and not persisted (as Kafka's);
deleting one makes the logger inherit its parent's level again.
"""

from __future__ import annotations

import logging

from odradek.errors import ErrorCode, KafkaError

ROOT = "root"
TRACE, OFF = 5, logging.CRITICAL + 10
_LEVELS = {"ALL": 1, "TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
           "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": OFF}
_NAMES = {v: k for k, v in _LEVELS.items()}
VALID = ", ".join(sorted(_LEVELS))


def _logger(name: str) -> logging.Logger:
    if name == ROOT:
        return logging.getLogger()
    if not isinstance(logging.Logger.manager.loggerDict.get(name), logging.Logger):
        raise KafkaError(ErrorCode.invalid_config, f"Logger {name} does not exist!")
    return logging.getLogger(name)


def level_name(level: int) -> str:
    """The Kafka name of a Python level (the nearest one at or below it)."""
    return _NAMES.get(level) or _NAMES[max(v for v in _NAMES if v <= max(level, 1))]


def loggers() -> dict[str, str]:
    """Every logger with its effective level, ``root`` first (Kafka's describe order)."""
    named = sorted(n for n, lg in logging.Logger.manager.loggerDict.items() if isinstance(lg, logging.Logger))
    out = {ROOT: level_name(logging.getLogger().getEffectiveLevel())}
    out.update({n: level_name(logging.getLogger(n).getEffectiveLevel()) for n in named})
    return out


def check_set(name: str, level: str) -> None:
    _logger(name)
    if level not in _LEVELS:
        raise KafkaError(ErrorCode.invalid_config, f"Cannot set the log level of {name} to {level} as it is not "
                                                   f"a supported log level. Valid log levels are {VALID}")


def check_delete(name: str) -> None:
    _logger(name)
    if name == ROOT:
        raise KafkaError(ErrorCode.invalid_request, f"Removing the log level of the {ROOT} logger is not allowed")


def set_level(name: str, level: str) -> None:
    check_set(name, level)
    _logger(name).setLevel(_LEVELS[level])


def unset_level(name: str) -> None:
    check_delete(name)
    _logger(name).setLevel(logging.NOTSET)
