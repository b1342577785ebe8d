"""The operator's leader election (``odradek.operator.leadership``, ``odradek.operator.ha``) on an
in-memory Lease and a fake clock: one leader at a time, takeover bounded by the lease duration,
a leader that cannot renew stops before a standby may take over, a clean stop hands over at once."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from odradek.operator import ha
from odradek.operator.leadership import (Elector, LeaseRecord, LeaseTimings, LeaseUnavailable, decide,
                                         keep_renewing, wait_for_leadership)

T = LeaseTimings(lease_duration=15, renew_deadline=10, retry_period=2)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeLeases:
    """One Lease with the API server's optimistic concurrency (a stale resourceVersion: 409 -> False)."""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.version = 0
        self.down = False
        self.writes: list[str] = []

    def get(self) -> LeaseRecord | None:
        if self.down:
            raise LeaseUnavailable("connection refused")
        return self.record

    def _store(self, record: LeaseRecord) -> bool:
        self.version += 1
        self.record = LeaseRecord(record.holder, record.duration_s, record.acquire_time, record.renew_time,
                                  record.transitions, str(self.version))
        self.writes.append(record.holder)
        return True

    def create(self, record: LeaseRecord) -> bool:
        if self.down:
            raise LeaseUnavailable("connection refused")
        return self.record is None and self._store(record)

    def update(self, record: LeaseRecord) -> bool:
        if self.down:
            raise LeaseUnavailable("connection refused")
        if self.record is None or record.resource_version != self.record.resource_version:
            return False
        return self._store(record)


class Ticking:
    """A stop event whose ``wait`` advances the fake clock instead of sleeping."""

    def __init__(self, clock: Clock, until: float) -> None:
        self.clock, self.until = clock, until

    def wait(self, seconds: float) -> bool:
        self.clock.now += seconds
        return self.clock.now >= self.until

    def is_set(self) -> bool:
        return self.clock.now >= self.until


def pair(store: FakeLeases, clock: Clock) -> tuple[Elector, Elector]:
    return Elector(store, "a", T, clock), Elector(store, "b", T, clock)


def test_first_candidate_leads_and_the_other_follows_while_it_renews():
    store, clock = FakeLeases(), Clock()
    a, b = pair(store, clock)
    assert a.try_acquire_or_renew() and a.leading
    assert not b.try_acquire_or_renew()
    assert b.status().holder == "a" and "a leads" in b.status().reason
    for _ in range(100):   # 200 s of renewals every retry period: the standby never takes over
        clock.now += T.retry_period
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew()
    assert store.record.holder == "a" and store.record.transitions == 0


def test_standby_takes_over_a_dead_leader_within_the_lease_duration_of_its_own_observation():
    store, clock = FakeLeases(), Clock()
    a, b = pair(store, clock)
    a.try_acquire_or_renew()
    clock.now += 1.0
    assert not b.try_acquire_or_renew()
    last_renewal = clock.now = clock.now + 1.0
    assert a.try_acquire_or_renew()   # the leader's last renewal; then it dies (SIGKILL)
    took_over = None
    while took_over is None:
        clock.now += T.retry_period   # the standby polls every retry period
        if b.try_acquire_or_renew():
            took_over = clock.now
    assert T.lease_duration <= took_over - last_renewal <= T.takeover_bound
    assert store.record.holder == "b" and store.record.transitions == 1
    assert "expired" in b.status().reason


def test_expiry_is_judged_on_the_standbys_clock_not_the_leases_timestamps():
    stale = LeaseRecord("a", 15, "2001-01-01T00:00:00.000000Z", "2001-01-01T00:00:00.000000Z", 3, "7")
    assert decide(stale, "b", observed_at=100.0, now=100.0).action == "follow"
    assert decide(stale, "b", observed_at=100.0, now=114.9).action == "follow"
    assert decide(stale, "b", observed_at=100.0, now=115.0).action == "acquire"
    assert decide(None, "b", 0, 0).action == "acquire"
    assert decide(LeaseRecord("", 1), "b", 100.0, 100.0).action == "acquire"   # released
    assert decide(stale, "a", 0, 10_000).action == "renew"


def test_of_two_candidates_racing_for_an_expired_lease_one_wins():
    store, clock = FakeLeases(), Clock()
    a, b = pair(store, clock)
    c = Elector(store, "c", T, clock)
    c.try_acquire_or_renew()
    a.try_acquire_or_renew()
    b.try_acquire_or_renew()
    clock.now += T.lease_duration + 1
    # both read the expired record before either writes: the second write carries a stale version
    seen = store.get()
    assert decide(seen, "a", a._observed_at, clock.now).action == "acquire"
    assert a.try_acquire_or_renew()
    assert not store.update(LeaseRecord("b", 15, "x", "x", seen.transitions + 1, seen.resource_version))
    assert not b.try_acquire_or_renew() and store.record.holder == "a"


def test_leader_that_cannot_renew_stops_before_a_standby_may_take_over():
    store, clock = FakeLeases(), Clock()
    a, b = pair(store, clock)
    a.try_acquire_or_renew()
    b.try_acquire_or_renew()
    last_renewal = clock.now
    store.down = True        # the leader is cut off from the API server; the standby's view stays
    lost: list[tuple[float, str]] = []
    keep_renewing(a, Ticking(clock, clock.now + 60), lambda why: lost.append((clock.now, why)))
    assert len(lost) == 1, lost
    at, why = lost[0]
    assert T.renew_deadline <= at - last_renewal < T.lease_duration
    assert "not renewed for 10s" in why
    store.down = False
    assert not b.try_acquire_or_renew(), "the standby took over while the old leader could still act"


def test_leader_that_sees_another_holder_stops_at_once():
    store, clock = FakeLeases(), Clock()
    a, b = pair(store, clock)
    a.try_acquire_or_renew()
    store.record = LeaseRecord("b", 15, "x", "x", 1, "99")   # taken over behind its back
    lost: list[str] = []
    keep_renewing(a, Ticking(clock, clock.now + 60), lost.append)
    assert lost and "b holds the lease" in lost[0]


def test_released_lease_is_taken_on_the_next_round():
    store, clock = FakeLeases(), Clock()
    a, b = pair(store, clock)
    a.try_acquire_or_renew()
    b.try_acquire_or_renew()
    assert a.release() and not a.leading
    assert store.record.holder == "" and store.record.duration_s == 1
    clock.now += T.retry_period
    assert b.try_acquire_or_renew() and store.record.holder == "b"
    assert not a.release()   # not leading: nothing to release


def test_wait_for_leadership_returns_false_when_stopped_and_true_once_leading():
    store, clock = FakeLeases(), Clock()
    a, b = pair(store, clock)
    a.try_acquire_or_renew()
    assert not wait_for_leadership(b, Ticking(clock, clock.now + 10))
    assert wait_for_leadership(b, Ticking(clock, clock.now + 60))   # a never renews: b takes over
    assert b.leading


def test_timings_are_validated_and_parsed():
    with pytest.raises(ValueError):
        LeaseTimings(10, 10, 2)
    with pytest.raises(ValueError):
        LeaseTimings(15, 10, 0)
    assert ha.timings("6/4/1") == LeaseTimings(6, 4, 1)
    assert T.takeover_bound == pytest.approx(19.8)
    with pytest.raises(SystemExit):
        ha.timings("15/10")


def test_lease_reference_and_identity():
    assert ha.lease_ref("ops/lead", {}) == ("ops", "lead")
    assert ha.lease_ref("lead", {"POD_NAMESPACE": "odradek"}) == ("odradek", "lead")
    one, two = ha.identity({"POD_NAME": "op-7d9-x"}), ha.identity({"POD_NAME": "op-7d9-x"})
    assert one.startswith("op-7d9-x_") and one != two   # a restarted process is a new candidate


def test_lease_record_round_trips_through_the_lease_object():
    lease = {"metadata": {"resourceVersion": "42"},
             "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "acquireTime": "t0", "renewTime": "t1",
                      "leaseTransitions": 2}}
    record = LeaseRecord.from_lease(lease)
    assert record == LeaseRecord("a", 15, "t0", "t1", 2, "42")
    assert record.spec() == lease["spec"]


def test_run_elected_runs_only_as_leader_and_releases_at_the_end():
    store, clock = FakeLeases(), Clock()
    a = Elector(store, "a", LeaseTimings(3, 2, 0.05), clock)
    ran: list[float] = []
    assert ha.run_elected(a, None, lambda: ran.append(ha.LEADER._value.get())) == 0
    assert ran == [1.0] and store.record.holder == "" and ha.LEADER._value.get() == 0


def test_standby_serves_its_liveness_url_with_the_election_state():
    store, clock = FakeLeases(), Clock()
    a, b = pair(store, clock)
    a.try_acquire_or_renew()
    b.try_acquire_or_renew()
    health = ha.StandbyHealth("http://127.0.0.1:0/healthz", b, clock)
    try:
        port = health.server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            body = json.loads(r.read())
        assert body["leadership"] == {"leader": False, "identity": "b", "holder": "a",
                                      "reason": b.status().reason}
        clock.now += 3 * T.lease_duration   # the election loop is stuck: not alive
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)
        assert e.value.code == 503
    finally:
        health.close()
