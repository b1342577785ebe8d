"""Kafka's controller mutation quota (KIP-599): ``controller_mutation_rate`` over CreateTopics,
CreatePartitions and DeleteTopics, counted in partitions created or deleted.

``for_request`` gives one request its ``MutationQuota``, as Kafka's
``ControllerMutationQuotaManager.newQuotaFor``: none applies (no entity sets the key) ->
nothing is recorded; otherwise the quota's token bucket (``rate.TokenBucket``, shared by
whoever the resolved entity's tags name) in one of two modes:

- **strict**, from CreateTopics v6, CreatePartitions v3, DeleteTopics v5: a topic is refused
  with THROTTLING_QUOTA_EXCEEDED (89) while the bucket is below zero (nothing recorded for it);
  a topic taken while it is not may drive it below zero (Kafka's check-then-record);
- **permissive**, older versions (their clients do not know error 89): every topic is taken
  and recorded, and the deficit becomes the throttle time.

Either way the response's ``throttle_time_ms`` is the deficit's time to refill at the quota
rate (less the time since it was recorded) and the connection is muted that long (KIP-219),
as Kafka's ``sendResponseMaybeThrottleWithControllerQuota`` does.
"""

from __future__ import annotations

import time

from odradek.broker.quotas.manager import ClientQuotaManager, user_of
from odradek.broker.quotas.rate import TokenBucket, bucket_throttle_ms
from odradek.broker.security.session import current
from odradek.config.quotas import CONTROLLER_MUTATION_RATE
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey

STRICT_SINCE = {ApiKey.CREATE_TOPICS: 6, ApiKey.DELETE_TOPICS: 5, ApiKey.CREATE_PARTITIONS: 3}


class ThrottlingQuotaExceeded(KafkaError):
    """Answered without a message, as Kafka's (ApiError drops the error's generic one)."""

    def __init__(self) -> None:
        super().__init__(ErrorCode.throttling_quota_exceeded)
        self.message = None  # type: ignore[assignment]


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class MutationQuota:
    """One request's controller mutation quota (Kafka's Strict / Permissive /
    Unbounded ControllerMutationQuota)."""

    def __init__(self, bucket: TokenBucket | None = None, quota: float = 0.0, strict: bool = False,
                 manager: ClientQuotaManager | None = None, tags: tuple[str, str] = ("", "")) -> None:
        self._bucket, self._quota, self.strict = bucket, quota, strict
        self._manager, self._tags = manager, tags
        self._throttle_ms, self._recorded_ms = 0, 0.0

    def admit(self, permits: float) -> None:
        """Record ``permits`` mutations; strict: raise THROTTLING_QUOTA_EXCEEDED, recording
        nothing, while the quota is already exceeded."""
        if self._bucket is None:
            return
        now = _now_ms()
        if self.strict:
            deficit = bucket_throttle_ms(self._bucket.tokens(self._quota, now), self._quota)
            if deficit:
                self._throttled(deficit, now)
                raise ThrottlingQuotaExceeded()
        self.record(permits, now)

    def record(self, permits: float, now: float | None = None) -> None:
        """Record without a check (strict) or with one that only sets the throttle (permissive)."""
        if self._bucket is None or not permits:
            return
        now = _now_ms() if now is None else now
        tokens = self._bucket.record(permits, self._quota, now)
        if not self.strict and (deficit := bucket_throttle_ms(tokens, self._quota)):
            self._throttled(deficit, now)

    def give_back(self, permits: float) -> None:
        """A topic taken that then failed (Kafka validates before it records)."""
        if self._bucket is not None and permits:
            self._bucket.record(-permits, self._quota, _now_ms())

    def _throttled(self, deficit: int, now: float) -> None:
        self._throttle_ms, self._recorded_ms = deficit, now
        if self._manager is not None:
            self._manager.note_throttle(CONTROLLER_MUTATION_RATE, self._tags, deficit)

    def throttle_ms(self) -> int:
        """The throttle still due (Kafka deducts the time since it was recorded)."""
        return max(0, round(self._throttle_ms - (_now_ms() - self._recorded_ms))) if self._throttle_ms else 0

    def finish(self) -> int:
        """The throttle the handler answers with (``Answer``): the response's and the connection's mute."""
        return self.throttle_ms()


def for_request(quotas: ClientQuotaManager, header) -> MutationQuota:
    """The request's quota: unbounded without a ``controller_mutation_rate`` for its client."""
    if not quotas.enabled(CONTROLLER_MUTATION_RATE):
        return MutationQuota()
    found = quotas.bucket(user_of(current().principal), header.client_id or "", _now_ms())
    if found is None:
        return MutationQuota()
    bucket, quota, tags = found
    return MutationQuota(bucket, quota, header.api_version >= STRICT_SINCE[header.api_key], quotas, tags)
