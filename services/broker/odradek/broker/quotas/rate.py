"""A sampled rate and the throttle time it implies, as Kafka's metrics library computes them.

``SampledRate`` is Kafka's ``Rate`` over a ``SampledStat`` of ``samples`` windows of
``window_ms`` each (``quota.window.num`` = 11, ``quota.window.size.seconds`` = 1): a value
goes into the current sample, which is replaced once it is ``window_ms`` old; samples older
than ``samples * window_ms`` are reset; the rate is the samples' total over the elapsed time
since the oldest sample began, counted as at least ``samples - 1`` full windows (so that a
new client's first bytes do not look like an infinite rate).

``throttle_time_ms`` is Kafka's ``QuotaUtils.throttleTime``: with an observed rate O over a
window W and a quota T, the delay X with O * W / (W + X) = T, i.e. X = (O - T) / T * W.

Not thread-safe: used from the broker's event loop only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start_ms: float
    value: float = 0.0


class SampledRate:
    __slots__ = ("samples", "window_ms", "_samples", "_current", "last_record_ms")

    def __init__(self, samples: int, window_ms: int, now_ms: float) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._samples = [_Sample(now_ms)]
        self._current = 0
        self.last_record_ms = now_ms

    def record(self, value: float, now_ms: float) -> None:
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        self.last_record_ms = now_ms

    def _advance(self, now_ms: float) -> _Sample:
        self._current = (self._current + 1) % self.samples
        if self._current >= len(self._samples):
            self._samples.append(_Sample(now_ms))
        else:
            sample = self._samples[self._current]
            sample.start_ms, sample.value = now_ms, 0.0
        return self._samples[self._current]

    def _purge(self, now_ms: float) -> None:
        expire = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.start_ms >= expire:
                sample.start_ms, sample.value = now_ms, 0.0

    def window_size_ms(self, now_ms: float) -> float:
        """Kafka's ``Rate.windowSize``: the elapsed time the rate divides by."""
        self._purge(now_ms)
        elapsed = now_ms - min(s.start_ms for s in self._samples)
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1.0)

    def rate(self, now_ms: float) -> float:
        """Per second."""
        window = self.window_size_ms(now_ms)
        return sum(s.value for s in self._samples) / (window / 1000.0)


def throttle_time_ms(rate: SampledRate, observed: float, quota: float, now_ms: float) -> int:
    """How long the client must wait for ``observed`` (per second) to fall to ``quota``."""
    if quota <= 0:
        return round(rate.window_size_ms(now_ms))
    return round((observed - quota) / quota * rate.window_size_ms(now_ms))


class TokenBucket:
    """Kafka's ``TokenBucket`` (KIP-599, the controller mutation quota): tokens refill at the
    quota's rate up to a burst of ``quota * samples * window`` seconds' worth; a record takes
    its value (the balance may go negative: a violation while it stays below zero). A new
    bucket is full, as Kafka's (its first refill covers the time since the epoch)."""

    __slots__ = ("samples", "window_ms", "_tokens", "_updated_ms", "last_record_ms", "recorded")

    def __init__(self, samples: int, window_ms: int, now_ms: float) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self.recorded = SampledRate(samples, window_ms, now_ms)  # Kafka's mutation-rate beside the bucket
        self._tokens: float | None = None
        self._updated_ms = now_ms
        self.last_record_ms = now_ms

    def tokens(self, quota: float, now_ms: float) -> float:
        burst = quota * self.samples * self.window_ms / 1000.0
        if self._tokens is None:
            self._tokens = burst
        else:
            self._tokens = min(burst, self._tokens + quota * (now_ms - self._updated_ms) / 1000.0)
        self._updated_ms = now_ms
        return self._tokens

    def record(self, value: float, quota: float, now_ms: float) -> float:
        """Take ``value`` tokens; the balance after."""
        self._tokens = self.tokens(quota, now_ms) - value
        self.recorded.record(value, now_ms)
        self.last_record_ms = now_ms
        return self._tokens


def bucket_throttle_ms(tokens: float, quota: float) -> int:
    """Kafka's ControllerMutationQuotaManager.throttleTimeMs: the time to earn back a deficit."""
    return 0 if tokens >= 0 else round(-tokens / quota * 1000) if quota > 0 else 2 ** 31 - 1
