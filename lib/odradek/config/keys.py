"""What one configuration key is: its name, type, default, validator, Kafka broker synonyms,
whether it is dynamic, and its one-line doc (``ConfigKey``), plus the value types keys use.

Values travel as strings, like Kafka's; a key's ``parse`` turns one into its typed value and
raises ``ValueError`` with a short reason when the value is not valid. Immutable and
thread-safe: the registries built from these are module constants.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from enum import IntEnum
from typing import Callable

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
SHORT_MAX = 2**15 - 1


class ConfigType(IntEnum):
    """Kafka's ConfigType codes, as DescribeConfigs (v3+) reports them."""
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7


@dataclass(frozen=True, slots=True)
class ValueType:
    """A key's type: the code DescribeConfigs reports and the string -> value parser."""
    code: ConfigType
    parse: Callable[[str], object]
    describe: str  # the README's words for the accepted values

    def format(self, value: object) -> str:
        """A typed value back to the string Kafka would show ('' for an unset optional key)."""
        if value is None:
            return ""
        return ("true" if value else "false") if self.code == ConfigType.BOOLEAN else str(value)


def _bool(s: str) -> bool:
    if s.lower() not in ("true", "false"):
        raise ValueError("expected true or false")
    return s.lower() == "true"


def _cleanup_policy(s: str) -> str:
    parts = sorted(p.strip() for p in s.split(",") if p.strip())
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise ValueError("expected delete, compact or compact,delete")
    return ",".join(sorted(parts, reverse=True) if len(parts) > 1 else parts)


def _positive(s: str) -> float:
    v = float(s)
    if not v > 0:
        raise ValueError("must be above 0")
    return v


BOOLEAN = ValueType(ConfigType.BOOLEAN, _bool, "true or false")
POSITIVE = ValueType(ConfigType.DOUBLE, _positive, "number above 0")
CLEANUP_POLICY = ValueType(ConfigType.LIST, _cleanup_policy, "delete, compact or compact,delete")


def per_address_counts(s: str) -> str:
    """``host:count[,host:count...]`` (Kafka's ``max.connections.per.ip.overrides``), checked;
    ``connection_overrides`` turns it into counts per address."""
    connection_overrides(s, resolve=lambda host: host)
    return s


def address_of(host: str) -> str:
    """A host name or address literal (IPv4 or IPv6) as the address a connection comes from."""
    return socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)[0][4][0]


def connection_overrides(s: str, resolve: Callable[[str], str] = address_of) -> dict[str, int]:
    counts: dict[str, int] = {}
    for entry in filter(None, (e.strip() for e in s.split(","))):
        host, sep, count = entry.rpartition(":")
        if not sep or not host or not count.isdigit():
            raise ValueError(f"expected host:count, got {entry!r}")
        counts[resolve(host.strip("[]"))] = int(count)
    return counts


PER_ADDRESS_COUNTS = ValueType(ConfigType.STRING, per_address_counts, "host:count pairs, comma-separated")


def one_of(*allowed: str) -> ValueType:
    def check(s: str) -> str:
        if s not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}")
        return s
    return ValueType(ConfigType.STRING, check, ", ".join(allowed))


def _ranged(kind: Callable[[str], int | float], lo: float, hi: float) -> Callable[[str], int | float]:
    def check(s: str) -> int | float:
        v = kind(s)
        if not lo <= v <= hi:
            raise ValueError(f"must be between {lo} and {hi}")
        return v
    return check


def _bound(n: float) -> str:
    return {LONG_MAX: "2^63-1", INT_MAX: "2^31-1", SHORT_MAX: "2^15-1"}.get(n, str(n))  # type: ignore[call-overload]


def integer(lo: int, hi: int) -> ValueType:
    """An integer key; DescribeConfigs reports the width Kafka declares, which follows its range
    here: SHORT up to 2^15-1, INT up to 2^31-1, else LONG."""
    code = ConfigType.SHORT if hi <= SHORT_MAX else ConfigType.INT if hi <= INT_MAX else ConfigType.LONG
    return ValueType(code, _ranged(int, lo, hi), f"integer in [{_bound(lo)}, {_bound(hi)}]")


def optional(kind: ValueType, unset: str) -> ValueType:
    """``kind``, or no value (Kafka's null default, written ""): parses to None; ``unset`` says
    what then applies."""
    return ValueType(kind.code, lambda s: None if s == "" else kind.parse(s), f"{kind.describe}, or unset: {unset}")


def fraction(lo: float, hi: float) -> ValueType:
    return ValueType(ConfigType.DOUBLE, _ranged(float, lo, hi), f"number in [{lo}, {hi}]")


@dataclass(frozen=True, slots=True)
class Synonym:
    """A Kafka broker key that sets a topic key's broker-wide default.

    ``scale`` turns its unit into the topic key's (``log.retention.hours`` -> ms: 3,600,000;
    1 for the same unit, strings included). ``reports_default``: DescribeConfigs lists this
    key's default as the topic key's DEFAULT_CONFIG synonym (Kafka 3.9 does for most, not for
    the ``*.ms`` keys whose defaults come through ``*.hours``; tests/compat checks it)."""
    name: str
    scale: int = 1
    reports_default: bool = True

    def to_topic_value(self, value: str) -> str:
        if self.scale == 1:
            return value
        try:
            return str(int(value) * self.scale)
        except ValueError:
            raise ValueError(f"{self.name} takes an integer, not {value!r}") from None


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One key, stated once. ``dynamic``: changeable at run time (topic keys per topic and, under
    their first broker synonym, as dynamic broker configs; broker keys as dynamic broker configs,
    odradek.config.dynamic); static keys are read at the broker's start-up."""
    name: str
    type: ValueType
    default: str
    doc: str
    dynamic: bool = False
    synonyms: tuple[Synonym, ...] = ()

    def parse(self, value: str) -> object:
        return self.type.parse(value)

    @property
    def typed_default(self) -> object:
        return self.parse(self.default)

    @property
    def broker_name(self) -> str:
        """The name a broker-wide value of this key is reported (and first accepted) under."""
        return self.synonyms[0].name if self.synonyms else self.name

    @property
    def default_synonym(self) -> str | None:
        """The broker key DescribeConfigs names as the source of the default, if any."""
        return next((s.name for s in self.synonyms if s.reports_default), None)


def registry(*keys: ConfigKey) -> dict[str, ConfigKey]:
    return {k.name: k for k in keys}
