"""Leader election among operator replicas on a ``coordination.k8s.io/v1`` Lease.

The algorithm is client-go's ``leaderelection`` (what controller-runtime managers and the
Strimzi cluster operator use), not kopf's peering: kopf peering has no lock (replicas of one
Deployment share a priority, and peers of equal priority all pause), so it cannot elect one.

- A candidate reads the Lease; it takes it when it is absent, released (no holder) or expired,
  and writes it with the ``resourceVersion`` it read, so of two candidates one wins and the
  other gets 409 (a lost race: False, never an exception).
- Expiry is judged on the candidate's own monotonic clock, from when it last saw the record
  change (client-go's "observed time"), never from the timestamps in the Lease, so clock skew
  between nodes does not matter.
- The leader renews every ``retry_period``; when it has not renewed for ``renew_deadline``
  (< ``lease_duration``) it stops at once (the process exits: ``odradek operator`` then
  restarts as a standby), before any standby can take the Lease over.
- A leader that stops cleanly releases the Lease (no holder, duration 1 s), so its standby takes
  over within one ``retry_period``.

Takeover after the leader dies without releasing: at most ``lease_duration + 2 x 1.2 x
retry_period`` after its last renewal (19.8 s with the defaults, controller-runtime's 15/10/2 s),
then kopf's start-up (~2 s). The state of the work in progress (a rolling restart) is in the cluster: the
pods' config hashes against the StatefulSet's (``rolling.plan_roll``), so a new leader continues
a roll where the old one left it and never restarts a pod already rolled.

``decide`` is the pure decision; ``Elector`` runs it over a ``LeaseStore`` with an injectable
clock; ``KubeLeaseStore`` is the store on the API server. Thread-safe: one thread drives an
``Elector``; readers (health, metrics) only read its ``status()``.
"""

from __future__ import annotations

import datetime
import logging
import random
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Protocol

import urllib3

log = logging.getLogger("odradek.operator.leadership")
JITTER = 1.2   # client-go's JitterFactor: a candidate retries after retry_period x [1, 1.2)


class LeaseUnavailable(Exception):
    """The Lease could not be read or written (the API server is unreachable or refused)."""


@dataclass(frozen=True)
class LeaseTimings:
    lease_duration: float = 15.0   # s a standby waits after the last renewal it saw
    renew_deadline: float = 10.0   # s a leader keeps leading without a successful renewal
    retry_period: float = 2.0      # s between attempts (acquire or renew)

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError(f"lease timings need lease duration > renew deadline > retry period > 0, "
                             f"got {self.lease_duration}/{self.renew_deadline}/{self.retry_period}")

    @property
    def takeover_bound(self) -> float:
        """The longest a standby waits after the leader's last renewal: up to one (jittered) retry
        period until it sees that renewal, the lease duration, one more until its next attempt."""
        return self.lease_duration + 2 * JITTER * self.retry_period


@dataclass(frozen=True)
class LeaseRecord:
    """The Lease's spec as the election reads it, with the version a write passes back."""

    holder: str = ""
    duration_s: int = 15
    acquire_time: str = ""
    renew_time: str = ""
    transitions: int = 0
    resource_version: str | None = None

    @classmethod
    def from_lease(cls, lease: dict[str, Any]) -> "LeaseRecord":
        spec = lease.get("spec") or {}
        return cls(spec.get("holderIdentity") or "", int(spec.get("leaseDurationSeconds") or 0),
                   spec.get("acquireTime") or "", spec.get("renewTime") or "",
                   int(spec.get("leaseTransitions") or 0), (lease.get("metadata") or {}).get("resourceVersion"))

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {"holderIdentity": self.holder or None, "leaseDurationSeconds": self.duration_s,
                               "leaseTransitions": self.transitions}
        if self.acquire_time:
            out["acquireTime"] = self.acquire_time
        if self.renew_time:
            out["renewTime"] = self.renew_time
        return out


@dataclass(frozen=True)
class Decision:
    action: str   # "acquire" | "renew" | "follow"
    reason: str


def decide(record: LeaseRecord | None, identity: str, observed_at: float, now: float) -> Decision:
    """What ``identity`` does with the Lease it just read; ``observed_at``: when (on its own
    clock) it first saw this version of the record."""
    if record is None:
        return Decision("acquire", "no lease yet")
    if record.holder == identity:
        return Decision("renew", "this replica leads")
    if not record.holder:
        return Decision("acquire", "the lease was released")
    left = observed_at + record.duration_s - now
    if left <= 0:
        return Decision("acquire", f"the lease of {record.holder} expired {-left:.1f}s ago")
    return Decision("follow", f"{record.holder} leads (its lease expires in {left:.1f}s unless renewed)")


class LeaseStore(Protocol):
    def get(self) -> LeaseRecord | None: ...
    def create(self, record: LeaseRecord) -> bool: ...    # False: it exists (a lost race)
    def update(self, record: LeaseRecord) -> bool: ...    # False: its version changed (a lost race)


def micro_time(at: datetime.datetime | None = None) -> str:
    """A Kubernetes MicroTime (RFC 3339 with microseconds, UTC)."""
    at = at or datetime.datetime.now(datetime.timezone.utc)
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Status:
    identity: str
    leader: bool
    holder: str
    reason: str
    last_attempt: float   # monotonic; 0: none yet


class Elector:
    """One replica's side of the election (client-go's ``LeaderElector``)."""

    def __init__(self, store: LeaseStore, identity: str, timings: LeaseTimings = LeaseTimings(),
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], str] = micro_time) -> None:
        self.store, self.identity, self.timings = store, identity, timings
        self._clock, self._wall = clock, wall
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None   # last successful acquire or renew, while leading
        self._status = Status(identity, False, "", "not started", 0.0)

    def status(self) -> Status:
        return self._status

    @property
    def leading(self) -> bool:
        return self._renewed_at is not None

    def _observe(self, record: LeaseRecord | None, now: float) -> None:
        if record is None or self._observed is None or record.resource_version != self._observed.resource_version:
            self._observed, self._observed_at = record, now

    def try_acquire_or_renew(self) -> bool:
        """One round: True when this replica holds the Lease afterwards."""
        now = self._clock()
        try:
            record = self.store.get()
            self._observe(record, now)
            decision = decide(record, self.identity, self._observed_at, now)
            ok = decision.action != "follow" and self._write(record, decision)
        except LeaseUnavailable as e:
            decision, ok, record = Decision("follow", f"the lease cannot be read or written: {e}"), False, self._observed
        if ok:
            self._renewed_at = now
        self._status = Status(self.identity, self.leading, self.identity if ok else (record.holder if record else ""),
                              decision.reason if ok or decision.action == "follow" else "lost the race for the lease",
                              now)
        return ok

    def _write(self, record: LeaseRecord | None, decision: Decision) -> bool:
        stamp = self._wall()
        duration = max(1, round(self.timings.lease_duration))
        if record is None:
            return self.store.create(LeaseRecord(self.identity, duration, stamp, stamp, 0))
        if decision.action == "renew":
            return self.store.update(replace(record, duration_s=duration, renew_time=stamp))
        return self.store.update(LeaseRecord(self.identity, duration, stamp, stamp, record.transitions + 1,
                                             record.resource_version))

    def renewal_overdue(self) -> bool:
        """A leader that has not renewed for ``renew_deadline`` must stop."""
        return self._renewed_at is not None and self._clock() - self._renewed_at >= self.timings.renew_deadline

    def release(self) -> bool:
        """Give the Lease up (a clean stop), so a standby takes over within one retry period."""
        if not self.leading:
            return False
        self._renewed_at = None
        try:
            record = self.store.get()
            if record is None or record.holder != self.identity:
                return False
            return self.store.update(replace(record, holder="", duration_s=1, renew_time=self._wall()))
        except LeaseUnavailable as e:
            log.warning("could not release the lease (the standby takes over once it expires): %s", e)
            return False

    def jittered_period(self) -> float:
        # candidates do not retry in lockstep
        return self.timings.retry_period * (1 + random.random() * (JITTER - 1))


def wait_for_leadership(elector: Elector, stop: threading.Event) -> bool:
    """Block until ``elector`` leads (True) or ``stop`` is set (False), logging each change of reason."""
    reason = None
    while not stop.is_set():
        if elector.try_acquire_or_renew():
            log.info("leading (lease held by %s): %s", elector.identity, elector.status().reason)
            return True
        if elector.status().reason.split(" (")[0] != reason:
            reason = elector.status().reason.split(" (")[0]
            log.info("standing by: %s", elector.status().reason)
        stop.wait(elector.jittered_period())
    return False


def keep_renewing(elector: Elector, stop: threading.Event, on_lost: Callable[[str], None]) -> None:
    """Renew every retry period until ``stop``; ``on_lost(reason)`` once the renew deadline passed
    without a successful renewal, or another replica holds the Lease."""
    while not stop.wait(elector.timings.retry_period):
        renewed = elector.try_acquire_or_renew()
        if elector.renewal_overdue() or (not renewed and elector.status().holder not in ("", elector.identity)):
            reason = (f"not renewed for {elector.timings.renew_deadline:g}s" if elector.renewal_overdue()
                      else f"{elector.status().holder} holds the lease")
            on_lost(f"leadership lost: {reason} ({elector.status().reason})")
            return


# -- the Lease on the API server -------------------------------------------------------------

class KubeLeaseStore:
    """``coordination.k8s.io/v1`` Lease ``namespace/name`` through ``kube.Kube`` (each call bounded
    by ``timeout``, so a hung API server cannot hold a leader past its renew deadline)."""

    def __init__(self, kube: Any, namespace: str, name: str, timeout: float) -> None:
        self.kube, self.namespace, self.name, self.timeout = kube, namespace, name, timeout
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"

    def _call(self, method: str, path: str, body: Any = None) -> dict | None:
        """The answer; None for 404 and 409 (absent, or a lost race); ``LeaseUnavailable`` otherwise."""
        try:
            return self.kube.request(method, path, body, timeout=self.timeout)
        except self.kube.ApiException as e:
            if e.status in (404, 409):
                return None
            raise LeaseUnavailable(f"{method} {path}: {e.status} {e.reason}") from None
        except (OSError, urllib3.exceptions.HTTPError) as e:   # unreachable, timed out
            raise LeaseUnavailable(f"{method} {path}: {e}") from None

    def get(self) -> LeaseRecord | None:
        lease = self._call("GET", f"{self.path}/{self.name}")
        return LeaseRecord.from_lease(lease) if lease else None

    def _body(self, record: LeaseRecord) -> dict:
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if record.resource_version:
            meta["resourceVersion"] = record.resource_version   # optimistic concurrency: 409 if it moved
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": record.spec()}

    def create(self, record: LeaseRecord) -> bool:
        return self._call("POST", self.path, self._body(record)) is not None

    def update(self, record: LeaseRecord) -> bool:
        return self._call("PUT", f"{self.path}/{self.name}", self._body(record)) is not None
