"""Connection creation rates (KIP-612), as Kafka's ``ConnectionQuotas`` applies them when a
listener accepts a connection.

- ``max.connection.creation.rate`` (broker-wide, dynamic) and
  ``listener.name.<listener>.max.connection.creation.rate``: each accepted connection is
  recorded in the broker's and its listener's rate; over either, the listener's accepting
  *waits* the throttle time (Kafka's acceptor blocks: that connection and those behind it in
  the backlog are delayed, none refused). The inter-broker listener is exempt from the
  broker-wide rate when there are other listeners (Kafka's protected listener).
- ``connection_creation_rate`` of ``/config/ips/<ip>`` (else ``/config/ips/<default>``):
  a connection over its address's rate is not served and is closed after the throttle time
  (Kafka's delayed close), and is taken back from the broker, listener and address rates.

Rates are Kafka's ``Rate`` over ``quota.window.num`` windows of ``quota.window.size.seconds``
(``rate.SampledRate``); a throttle is ``(rate - quota) / quota * window`` capped at one window,
Kafka's ``boundedThrottleTime``. Event loop only; the ip rates come from the quota store's
snapshot (``install``).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import time
from typing import Mapping

from odradek.broker.quotas.rate import SampledRate, throttle_time_ms
from odradek.broker.quotas.store import QuotaSnapshot
from odradek.broker.txn.metrics import WindowedTimes
from odradek.cluster.zk_data import DEFAULT, IP
from odradek.config.quotas import CONNECTION_CREATION_RATE

log = logging.getLogger(__name__)

UNLIMITED = 2**31 - 1       # Kafka's default of every connection rate (Int.MaxValue)
LISTENER_KEY = "max.connection.creation.rate"
_IP_SENSOR_EXPIRY_MS = 3600 * 1000
_PRUNE_EVERY = 1024


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class ConnectionRates:
    def __init__(self, samples: int = 11, window_seconds: int = 1) -> None:
        self.samples, self.window_ms = samples, window_seconds * 1000
        self.broker_rate = UNLIMITED
        self.listener_rates: dict[str, int] = {}
        self.protected_listener: str | None = None   # the inter-broker listener, with others beside it
        self.ip_rates: dict[str, int] = {}           # address -> rate; DEFAULT: every other address
        self._sensors: dict[str, SampledRate] = {}
        self._records = 0
        # per listener, Kafka's throttle-time Avg sensors (metrics): by the broker's or listener's
        # rate, by an address's rate
        self.accept_throttle_times: dict[str, WindowedTimes] = {}
        self.ip_throttle_times: dict[str, WindowedTimes] = {}
        self.listeners_seen: set[str] = set()

    def configure(self, broker_rate: int, listener_rates: Mapping[str, int]) -> None:
        self.broker_rate, self.listener_rates = broker_rate, dict(listener_rates)

    def apply_ip_rates(self, rates: Mapping[str, int]) -> None:
        self.ip_rates = dict(rates)

    def install(self, snapshot: QuotaSnapshot) -> None:
        """The ``/config/ips`` rates of a quota snapshot, in force from now."""
        self.apply_ip_rates(ip_rates(snapshot))

    def rate(self, name: str, now: float | None = None) -> float:
        """The connection creation rate now of ``broker``, ``listener:<name>`` or ``ip:<address>``."""
        sensor = self._sensors.get(name)
        return sensor.rate(_now_ms() if now is None else now) if sensor is not None else 0.0

    def accept_delay_ms(self, listener: str, now: float | None = None) -> int:
        """Record a connection accepted on ``listener``; how long accepting must wait (Kafka's
        ``waitForConnectionSlot``: the longer of the broker's and the listener's throttle)."""
        now = _now_ms() if now is None else now
        throttle = 0
        if listener != self.protected_listener:
            throttle = self._record("broker", self.broker_rate, now)
        throttle = max(throttle, self._record(f"listener:{listener}", self.listener_rates.get(listener, UNLIMITED),
                                              now))
        self.listeners_seen.add(listener)
        if throttle:
            _times(self.accept_throttle_times, listener).record(throttle)
        return throttle

    def ip_delay_ms(self, listener: str, ip: str, now: float | None = None) -> int:
        """Record a connection from ``ip``; over its rate, the throttle time after which it is
        closed (all three rates then take it back), else 0."""
        quota = self.ip_rates.get(ip, self.ip_rates.get(DEFAULT, UNLIMITED))
        if quota == UNLIMITED:
            return 0
        now = _now_ms() if now is None else now
        throttle = self._record(f"ip:{ip}", quota, now)
        if throttle:
            for name in (f"ip:{ip}", f"listener:{listener}", *(("broker",) if listener != self.protected_listener
                                                                else ())):
                if (sensor := self._sensors.get(name)) is not None:
                    sensor.record(-1.0, now)
            _times(self.ip_throttle_times, listener).record(throttle)
        return throttle

    def _record(self, name: str, quota: int, now: float) -> int:
        sensor = self._sensors.get(name)
        if sensor is None:
            sensor = self._sensors[name] = SampledRate(self.samples, self.window_ms, now)
            self._records += 1
            if self._records % _PRUNE_EVERY == 0:
                self._prune(now)
        sensor.record(1.0, now)
        observed = sensor.rate(now)
        if observed <= quota:
            return 0
        return min(throttle_time_ms(sensor, observed, quota, now), self.window_ms)

    def _prune(self, now: float) -> None:
        for name in [n for n, s in self._sensors.items()
                     if n.startswith("ip:") and now - s.last_record_ms > _IP_SENSOR_EXPIRY_MS]:
            del self._sensors[name]


def _times(by_listener: dict[str, WindowedTimes], listener: str) -> WindowedTimes:
    times = by_listener.get(listener)
    if times is None:
        times = by_listener[listener] = WindowedTimes()
    return times


def listener_rates(settings: Mapping[str, str], listeners: list[str]) -> dict[str, int]:
    """``listener.name.<l>.max.connection.creation.rate`` of each listener that sets it."""
    out = {}
    for name in listeners:
        key = f"listener.name.{name.lower()}.{LISTENER_KEY}"
        if key in settings:
            try:
                out[name] = int(settings[key])
            except ValueError:
                log.warning("ignoring %s=%r: not an integer", key, settings[key])
    return out


def ip_rates(snapshot: QuotaSnapshot) -> dict[str, int]:
    """Every ip entity's ``connection_creation_rate``, keyed by address (DEFAULT: every other)."""
    rates = {}
    for names, values in snapshot.of_types(IP):
        name = names[IP]
        address = DEFAULT if name is None else _address(name)
        if address is not None and CONNECTION_CREATION_RATE in values:
            rates[address] = int(values[CONNECTION_CREATION_RATE])
    return rates


def _address(host: str) -> str | None:
    """The address a connection from ``host`` comes from (Kafka resolves the entity's name)."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return socket.gethostbyname(host)
    except OSError:
        log.warning("ignoring the connection rate of %s: not an address nor a resolvable host", host)
        return None


def configure(rates: ConnectionRates, broker_rate: int, listeners: list[str], inter_broker: str | None,
              settings: Mapping[str, str]) -> None:
    """The rates now in force: ``settings`` holds the listener keys (static, then dynamic over them)."""
    rates.configure(broker_rate, listener_rates(settings, listeners))
    rates.protected_listener = inter_broker if len(listeners) > 1 else None
