"""Client quota enforcement: Kafka's ClientQuotaManager for produce and fetch byte rates and
ClientRequestQuotaManager for request percentage, over the quotas ZooKeeper holds.

``record(key, user, client_id, value)`` adds ``value`` to the sensor the resolved quota's tags
name (``entities.resolve``) and returns the throttle time in ms (0 within quota), as Kafka's
``recordAndGetThrottleTimeMs``: the rate *with* this value against the quota; byte-rate
throttle times are not bounded, request-percentage ones are bounded by one window, as Kafka.
A fetch that is throttled is answered empty and its bytes are taken back (``unrecord``), as
Kafka's KafkaApis does. When no entity sets a key, ``record`` returns 0 after one dict test:
the produce path costs nothing without quotas.

The quotas are what ZooKeeper's ``/config/users`` and ``/config/clients`` hold, read by the
quota store (``quotas.store``) and installed here (``install``) at start and on each change.
Sensors not recorded for an hour are dropped (Kafka's inactive sensor expiry). Event loop only.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from typing import Mapping

from odradek.broker.quotas.entities import Entity, QuotaEntities, Tags
from odradek.broker.quotas.rate import SampledRate, TokenBucket, throttle_time_ms
from odradek.broker.quotas.store import QuotaSnapshot
from odradek.broker.txn.metrics import WindowedTimes
from odradek.cluster.zk_data import CLIENT_ID, DEFAULT, IP, USER
from odradek.config.quotas import CONTROLLER_MUTATION_RATE, REQUEST_PERCENTAGE

log = logging.getLogger(__name__)

SENSOR_EXPIRY_MS = 3600 * 1000
_PRUNE_EVERY = 4096  # records between looks for expired sensors


def user_of(principal: str) -> str:
    """Kafka quotas name the principal's name: ``User:alice`` -> ``alice``."""
    return principal.split(":", 1)[1] if ":" in principal else principal


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class ClientQuotaManager:
    def __init__(self, samples: int = 11, window_seconds: int = 1) -> None:
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self.entities = QuotaEntities()
        self._sensors: dict[tuple[str, Tags], SampledRate | TokenBucket] = {}
        self._records = 0
        self.throttle_ms_total: Counter[str] = Counter()   # per quota key (metrics, tests)
        self.throttled: Counter[str] = Counter()
        # Kafka's throttle-time sensor per quota key and tags: an Avg over its default metric
        # window (2 samples of 30 s), of the throttle times given (odradek.broker.quotas.metrics)
        self.throttle_times: dict[tuple[str, Tags], WindowedTimes] = {}

    def enabled(self, key: str) -> bool:
        return self.entities.enabled(key)

    def record(self, key: str, user: str, client_id: str, value: float, now_ms: float | None = None) -> int:
        found = self.entities.resolve(key, user, client_id)
        if found is None:
            return 0
        tags, quota = found
        now = _now_ms() if now_ms is None else now_ms
        sensor = self._sensor(key, tags, now)
        sensor.record(value, now)
        observed = sensor.rate(now)
        if observed <= quota:
            return 0
        throttle = throttle_time_ms(sensor, observed, quota, now)
        if key == REQUEST_PERCENTAGE:
            throttle = min(throttle, self.window_ms)
        self.note_throttle(key, tags, throttle)
        return throttle

    def note_throttle(self, key: str, tags: Tags, throttle_ms: int) -> None:
        self.throttle_ms_total[key] += throttle_ms
        self.throttled[key] += 1
        times = self.throttle_times.get((key, tags))
        if times is None:
            times = self.throttle_times[(key, tags)] = WindowedTimes()
        times.record(throttle_ms)

    def bucket(self, user: str, client_id: str, now_ms: float) -> tuple[TokenBucket, float, Tags] | None:
        """The controller mutation quota's token bucket for this client, its rate and its tags
        (None: no quota); one bucket per resolved entity's tags, as Kafka's sensors."""
        found = self.entities.resolve(CONTROLLER_MUTATION_RATE, user, client_id)
        if found is None:
            return None
        tags, quota = found
        return self._sensor(CONTROLLER_MUTATION_RATE, tags, now_ms), quota, tags

    def sensors(self, now_ms: float | None = None) -> list[tuple[str, Tags, str, float]]:
        """(key, tags, Kafka's attribute, value) of every sensor, at scrape time: ``byte-rate`` or
        ``request-time`` (the rate), for the mutation quota ``tokens`` and ``mutation-rate``."""
        now = _now_ms() if now_ms is None else now_ms
        out = []
        for (key, tags), sensor in list(self._sensors.items()):
            if isinstance(sensor, TokenBucket):
                quota = self.entities.quota_for(key, tags)
                out.append((key, tags, "tokens", sensor.tokens(quota, now) if quota is not None else math.nan))
                out.append((key, tags, "mutation-rate", sensor.recorded.rate(now)))
            else:
                out.append((key, tags, "request-time" if key == REQUEST_PERCENTAGE else "byte-rate", sensor.rate(now)))
        return out

    def unrecord(self, key: str, user: str, client_id: str, value: float, now_ms: float | None = None) -> None:
        found = self.entities.resolve(key, user, client_id)
        if found is not None:
            now = _now_ms() if now_ms is None else now_ms
            self._sensor(key, found[0], now).record(-value, now)

    def rate(self, key: str, user: str, client_id: str) -> float | None:
        """The rate the quota of ``key`` is checked against for this client (None: no quota)."""
        found = self.entities.resolve(key, user, client_id)
        sensor = self._sensors.get((key, found[0])) if found else None
        return sensor.rate(_now_ms()) if sensor else None

    def _sensor(self, key: str, tags: Tags, now: float):
        sensor = self._sensors.get((key, tags))
        if sensor is None:
            kind = TokenBucket if key == CONTROLLER_MUTATION_RATE else SampledRate
            sensor = self._sensors[(key, tags)] = kind(self.samples, self.window_ms, now)
        self._records += 1
        if self._records % _PRUNE_EVERY == 0:
            self._prune(now)
        return sensor

    def _prune(self, now: float) -> None:
        for name in [n for n, s in self._sensors.items() if now - s.last_record_ms > SENSOR_EXPIRY_MS]:
            del self._sensors[name]
            self.throttle_times.pop(name, None)

    # -- the quotas ZooKeeper holds --------------------------------------------------------
    def apply(self, entities: Mapping[Entity, Mapping[str, float]]) -> None:
        self.entities.replace(entities)
        log.info("client quotas in force: %d entities", len(entities))

    def install(self, snapshot: QuotaSnapshot) -> None:
        """The user / client entities of a quota snapshot, in force from now."""
        entities: dict[Entity, Mapping[str, float]] = {}
        for entity, values in snapshot.entries:
            names = dict(entity)
            if IP not in names:
                entities[(_name(names, USER), _name(names, CLIENT_ID))] = values
        self.apply(entities)


def _name(names: dict[str, str | None], entity_type: str) -> str | None:
    """An entity's name as quotas resolve it: None when not named, ``<default>`` kept as the marker."""
    if entity_type not in names:
        return None
    return names[entity_type] or DEFAULT
