"""The verify checker on synthetic histories: a clean history passes, each anomaly is found."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.verify.checker import Report, check
from odradek.verify.history import History, parse_value


class Run:
    """Builds a history with explicit monotonic times: sends, acknowledgements, reads, faults."""

    def __init__(self) -> None:
        self.h = History()
        self.t = 100.0
        self.seq: dict[str, int] = {}
        self.log: dict[int, list[tuple[int, str]]] = {}  # what the "broker" holds

    def tick(self, dt: float = 0.01) -> float:
        self.t += dt
        return self.t

    def start(self) -> "Run":
        self.h.invoke("runner", "workload", "t", mono=self.tick())
        return self

    def end(self) -> "Run":
        self.h.ok("runner", "workload", "t", mono=self.tick())
        return self

    def invoke(self, producer: str, partition: int) -> str:
        n = self.seq.get(producer, 0)
        self.seq[producer] = n + 1
        value = f"{producer}-{n}"
        self.h.invoke(producer, "send", value, partition=partition, mono=self.tick())
        return value

    def append(self, partition: int, value: str) -> int:
        log = self.log.setdefault(partition, [])
        offset = log[-1][0] + 1 if log else 0
        log.append((offset, value))
        return offset

    def ack(self, producer: str, value: str, partition: int, offset: int, dt: float = 0.01) -> None:
        self.h.ok(producer, "send", value, partition=partition, offset=offset, mono=self.tick(dt))

    def send(self, producer: str, partition: int, dt: float = 0.01) -> str:
        """A send the broker writes and acknowledges."""
        value = self.invoke(producer, partition)
        self.ack(producer, value, partition, self.append(partition, value), dt)
        return value

    def read(self, label: str, log: dict[int, list[tuple[int, str]]] | None = None,
             complete: list[int] | None = None) -> None:
        log = self.log if log is None else log
        self.h.read(label, {p: list(r) for p, r in log.items()}, sorted(log) if complete is None else complete,
                    mono=self.tick())

    def kill(self, name: str, kind: str = "leader") -> None:
        self.h.invoke("nemesis", "kill", name, data={"kind": kind, "why": "test"}, mono=self.tick())
        self.h.ok("nemesis", "kill", name, mono=self.tick())


def clean_run() -> Run:
    r = Run().start()
    for i in range(30):
        for producer in ("confluent-0", "kafka-python-1"):
            r.send(producer, i % 3)
    r.read("snapshot-1")
    for i in range(30):
        r.send("confluent-0", i % 3)
    r.end()
    r.read("final")
    return r


def test_clean_history_passes():
    r = clean_run()
    report = check(r.h, topic="t")
    assert report.problems() == []
    assert (report.sent, report.acked, report.read, report.snapshots) == (90, 90, 90, 1)
    assert not (report.lost or report.duplicated or report.reordered or report.phantom or report.inconsistent)
    assert report.per_producer == {"confluent-0": {"sent": 60, "ok": 60}, "kafka-python-1": {"sent": 30, "ok": 30}}
    assert "OK" in report.summary()


def test_acknowledged_but_lost():
    r = Run().start()
    kept = r.send("confluent-0", 0)
    lost = r.invoke("confluent-0", 0)
    r.ack("confluent-0", lost, 0, 1)          # acknowledged at offset 1 but never in the log
    r.end()
    r.read("final")
    report = check(r.h)
    assert [x["value"] for x in report.lost] == [lost]
    assert report.lost[0]["offset"] == 1 and report.lost[0]["now_at_offset"] is None
    assert kept not in [x["value"] for x in report.lost]
    assert "1 lost" in report.problems()


def test_overwritten_offset_is_lost_not_duplicate():
    """A new leader that lacks an acknowledged record writes another one at its offset."""
    r = Run().start()
    a = r.send("confluent-0", 0)
    r.log[0] = []                             # truncated away by an unclean election
    b = r.send("kafka-python-1", 0)
    r.end()
    r.read("final")
    report = check(r.h)
    assert report.lost == [{"value": a, "partition": 0, "offset": 0, "acked_at": report.lost[0]["acked_at"],
                            "now_at_offset": b}]


def test_unacknowledged_sends_are_not_lost_and_found_ones_are_counted():
    r = Run().start()
    r.send("confluent-0", 0)
    written = r.invoke("confluent-0", 0)      # delivery report: error, but it was written
    r.append(0, written)
    r.h.info("confluent-0", "send", written, partition=0, error="timed out", mono=r.tick())
    r.invoke("confluent-0", 0)                # no delivery report at all, not written
    r.end()
    r.read("final")
    report = check(r.h)
    assert report.problems() == []
    assert (report.acked, report.indeterminate, report.indeterminate_found) == (1, 2, 1)


def test_duplicates_are_reported_and_fail_only_on_request():
    r = Run().start()
    v = r.send("confluent-0", 0)
    r.append(0, v)                            # a retried batch written twice
    r.send("confluent-0", 0)
    r.end()
    r.read("final")
    report = check(r.h)
    assert report.duplicated == [{"value": v, "at": [(0, 0), (0, 1)]}]
    assert report.problems() == []
    assert report.problems(fail_on_duplicates=True) == ["1 duplicated"]
    assert report.reordered == []             # the same value again is not a reordering


def test_a_retried_batch_written_again_after_later_values_is_duplication_not_reordering():
    r = Run().start()
    a = r.invoke("confluent-0", 0)
    b = r.invoke("confluent-0", 0)
    oa, ob = r.append(0, a), r.append(0, b)   # the batch [a, b] is written ...
    r.append(0, a)                            # ... its acknowledgement is lost, the retry writes it again
    r.append(0, b)
    r.ack("confluent-0", a, 0, oa)
    r.ack("confluent-0", b, 0, ob)
    r.send("confluent-0", 0)
    r.end()
    r.read("final")
    report = check(r.h)
    assert report.reordered == []
    assert [d["value"] for d in report.duplicated] == [a, b]


def test_duplicate_across_partitions_is_a_duplicate():
    r = Run().start()
    v = r.send("confluent-0", 0)
    r.append(1, v)
    r.end()
    r.read("final")
    assert check(r.h).duplicated == [{"value": v, "at": [(0, 0), (1, 0)]}]


def test_reordering_within_a_partition():
    r = Run().start()
    first = r.invoke("confluent-0", 0)
    second = r.invoke("confluent-0", 0)
    r.send("kafka-python-1", 0)
    o2 = r.append(0, second)                  # the broker wrote them the other way round
    o1 = r.append(0, first)
    r.ack("confluent-0", second, 0, o2)
    r.ack("confluent-0", first, 0, o1)
    r.end()
    r.read("final")
    report = check(r.h)
    assert report.reordered == [{"partition": 0, "producer": "confluent-0", "value": first, "offset": o1,
                                 "after": {"value": second, "offset": o2}}]
    assert "1 reordered" in report.problems()


def test_a_plain_librdkafka_producers_reorder_is_reported_as_its_clients_not_failed():
    """librdkafka's max.in.flight=1 is per connection (librdkafka#1969): a plain producer can reorder
    by itself across a leader change. Its reorders are reported with the reason; an order-keeping
    producer's reorder in the same run still fails it."""
    from odradek.verify.workload import PLAIN_LIBRDKAFKA_REORDERS
    r = Run().start()
    firsts = {name: r.invoke(name, 0) for name in ("confluent-0", "kafka-python-1")}
    seconds = {name: r.invoke(name, 0) for name in firsts}
    for name in firsts:
        o2, o1 = r.append(0, seconds[name]), r.append(0, firsts[name])
        r.ack(name, seconds[name], 0, o2)
        r.ack(name, firsts[name], 0, o1)
    r.end()
    r.read("final")
    report = check(r.h, client_reorders={"confluent-0": PLAIN_LIBRDKAFKA_REORDERS})
    assert [(x["producer"], x["value"], x["why"]) for x in report.reordered_by_client] == [
        ("confluent-0", firsts["confluent-0"], PLAIN_LIBRDKAFKA_REORDERS)]
    assert [x["producer"] for x in report.reordered] == ["kafka-python-1"]
    assert report.problems() == ["1 reordered"]
    assert report.to_json()["reordered_by_client"]["count"] == 1
    assert "by plain producers' clients, not failed" in report.summary()


def test_only_plain_librdkafka_producers_are_said_to_reorder_by_themselves():
    """Idempotent and transactional producers keep order in every client, and so does a plain
    kafka-python producer at max_in_flight 1 (it mutes the partition, as Java's producer does)."""
    import threading

    from odradek.verify.workload import make_producers
    kafka, stop = object(), threading.Event()
    plain = make_producers(4, ("confluent", "kafka-python"), kafka, "t", [0], History(), stop, idempotent_last=2)
    txn = make_producers(1, ("confluent",), kafka, "t", [0], History(), stop, transactional=True)
    assert {w.name: w.reorder_reason() is not None for w in plain} == {
        "confluent-0": True, "kafka-python-1": False, "confluent-2": False, "kafka-python-3": False}
    assert txn[0].reorder_reason() is None


def test_interleaving_producers_and_partitions_is_not_reordering():
    r = Run().start()
    for i in range(20):
        r.send(f"p-{i % 3}", (i * 7) % 4)
    r.end()
    r.read("final")
    assert check(r.h).reordered == []


def test_phantom_values():
    r = Run().start()
    r.send("confluent-0", 0)
    r.append(0, "confluent-0-99")             # never sent
    r.append(0, "garbage")                    # not a workload value at all
    refused = r.invoke("confluent-0", 1)      # refused by the client before sending ...
    r.h.fail("confluent-0", "send", refused, partition=1, error="queue full", mono=r.tick())
    r.append(1, refused)                      # ... yet there it is
    r.end()
    r.read("final")
    report = check(r.h)
    assert sorted((x["value"], x["why"]) for x in report.phantom) == [
        ("confluent-0-1", "its send failed"), ("confluent-0-99", "never sent"), ("garbage", "never sent")]
    assert "3 phantom" in report.problems()


def test_offset_changed_value_between_snapshot_and_final():
    r = Run().start()
    a = r.invoke("confluent-0", 0)
    r.append(0, a)
    r.read("snapshot-1")                      # a consumer saw `a` at offset 0 ...
    r.log[0] = []
    b = r.send("kafka-python-1", 0)           # ... which now holds `b`
    r.h.info("confluent-0", "send", a, partition=0, error="timed out", mono=r.tick())
    r.end()
    r.read("final")
    report = check(r.h)
    assert report.lost == []                  # `a` was never acknowledged
    assert report.inconsistent == [{"kind": "offset-changed-value", "partition": 0, "offset": 0,
                                    "first": {"read": "snapshot-1", "value": a},
                                    "then": {"read": "final", "value": b}}]
    assert "1 inconsistent" in report.problems()


def test_offset_vanished_from_the_final_read():
    r = Run().start()
    r.send("confluent-0", 0)
    v = r.invoke("confluent-0", 0)
    r.append(0, v)
    r.read("snapshot-1")                      # read at offset 1 (so below the high watermark) ...
    r.log[0].pop()                            # ... then truncated away
    r.h.info("confluent-0", "send", v, partition=0, error="timed out", mono=r.tick())
    r.end()
    r.read("final")
    report = check(r.h)
    assert [(x["kind"], x["offset"], x["value"]) for x in report.inconsistent] == [("offset-vanished", 1, v)]


def test_vanished_is_not_judged_when_the_final_read_is_incomplete():
    r = Run().start()
    r.send("confluent-0", 0)
    r.read("snapshot-1")
    r.end()
    r.read("final", log={0: []}, complete=[])
    report = check(r.h)
    assert report.inconsistent == [] and report.lost == []
    assert report.unverifiable == 1
    assert report.problems() == ["final read incomplete for partitions [0]"]


def test_acknowledged_offset_moved():
    r = Run().start()
    r.send("kafka-python-1", 0)
    v = r.invoke("confluent-0", 0)
    r.append(0, v)
    r.ack("confluent-0", v, 0, 5)             # the broker acknowledged another offset
    r.end()
    r.read("final")
    report = check(r.h)
    assert report.inconsistent == [{"kind": "acknowledged-offset-moved", "value": v, "acked": [0, 5],
                                    "read_at": [(0, 1)]}]


def test_offsets_not_increasing_within_a_read():
    r = Run().start()
    a, b = r.send("confluent-0", 0), r.send("confluent-0", 0)
    r.end()
    r.read("final", log={0: [(0, a), (1, b), (1, b)]})
    kinds = [x["kind"] for x in check(r.h).inconsistent]
    assert "offsets-not-increasing" in kinds


def test_longest_unavailability_overall_and_per_partition():
    r = Run().start()
    for _ in range(10):
        r.send("c-0", 0, dt=0.1)
        r.send("c-0", 1, dt=0.1)
    r.kill("broker-2")
    r.send("c-0", 0, dt=0.1)
    v = r.invoke("c-0", 1)                    # partition 1 is down for 7 s ...
    for _ in range(5):
        r.send("c-0", 0, dt=0.5)              # ... while partition 0 keeps going
    r.ack("c-0", v, 1, r.append(1, v), dt=5.0)
    r.end()
    r.read("final")
    report = check(r.h)
    assert report.problems() == []
    g = report.longest_unavailability
    assert g.seconds == pytest.approx(5.0, abs=0.05)
    p1 = report.unavailability_per_partition[1]
    assert p1.seconds == pytest.approx(7.65, abs=0.1)
    assert p1.faults and p1.faults[0].startswith("broker-2@")
    assert report.unavailability_per_partition[0].seconds < 5.1
    assert report.faults == {"leader": 1}
    assert report.unavailability_per_producer["c-0"].seconds == pytest.approx(5.0, abs=0.05)


def test_unrecovered_restarts_are_reported_not_failed():
    r = clean_run()
    r.kill("broker-2")
    r.h.info("nemesis", "recovered", "broker-2", error="not recovered after 60s", mono=r.tick())
    report = check(r.h)
    assert report.unrecovered == [{"process": "broker-2", "at": report.unrecovered[0]["at"],
                                   "error": "not recovered after 60s"}]
    assert report.problems() == [] and "NOT RECOVERED" in report.summary()


def test_unavailable_until_the_end_counts():
    r = Run().start()
    r.send("c-0", 0)
    r.invoke("c-0", 0)
    r.tick(3.0)
    r.end()
    r.read("final")
    assert check(r.h).longest_unavailability.seconds == pytest.approx(3.0, abs=0.05)


def test_nothing_acknowledged_fails():
    r = Run().start()
    r.invoke("c-0", 0)
    r.end()
    r.read("final", log={0: []})
    assert check(r.h).problems() == ["no send was acknowledged"]


def test_history_round_trips_through_jsonl(tmp_path: Path):
    r = clean_run()
    r.kill("broker-1")
    r.h.dump(tmp_path / "h.jsonl")
    loaded = History.load(tmp_path / "h.jsonl")
    assert [op.to_json() for op in loaded] == [op.to_json() for op in r.h]
    assert check(loaded).to_json() == check(r.h).to_json()


def test_report_json_caps_examples():
    r = Run().start()
    values = [r.send("c-0", 0) for _ in range(30)]
    for v in values:
        r.append(0, v)
    r.end()
    r.read("final")
    d = check(r.h).to_json(examples=5)
    assert d["duplicated"]["count"] == 30 and len(d["duplicated"]["examples"]) == 5


def test_parse_value():
    assert parse_value("kafka-python-1-17") == ("kafka-python-1", 17)
    assert parse_value("garbage") is None and parse_value("x-") is None


def test_stale_snapshot_behind_an_acknowledgement_is_reported_not_failed():
    r = Run().start()
    for _ in range(3):
        r.send("confluent-0", 0)
    started = r.tick()
    r.h.read("snapshot-1", {0: r.log[0][:2]}, [0], started=started, mono=r.tick())  # ends at offset 1 < 2
    r.end()
    r.read("final")
    report = check(r.h)
    assert report.stale == [{"read": "snapshot-1", "partition": 0, "read_end": 1, "acknowledged_before": 2,
                             "started": started}]
    assert report.problems() == []
    assert report.per_nemesis["none"]["stale"] == 1  # no fault: counted under "none"


def test_anomalies_are_counted_under_the_fault_they_happened_during():
    r = Run().start()
    r.send("confluent-0", 0)
    r.h.invoke("nemesis", "fault", "zookeeper", data={"kind": "zk-pause"}, mono=r.tick())
    lost = r.invoke("confluent-0", 0)
    r.ack("confluent-0", lost, 0, 1)          # acknowledged during the pause, never in the log
    r.h.ok("nemesis", "recovered", "zookeeper", mono=r.tick())
    r.t += 60                                 # long after the window and its slack
    r.h.invoke("nemesis", "fault", "broker-1", data={"kind": "pause"}, mono=r.tick())
    r.h.ok("nemesis", "recovered", "broker-1", mono=r.tick())
    late = r.invoke("confluent-0", 0)
    r.ack("confluent-0", late, 0, 2, dt=30)   # outside every window
    r.end()
    r.read("final")
    report = check(r.h)
    assert report.faults == {"zk-pause": 1, "pause": 1}
    assert report.per_nemesis["zk-pause"]["lost"] == 1 and report.per_nemesis["zk-pause"]["faults"] == 1
    assert report.per_nemesis["pause"] == {"faults": 1, "lost": 0, "duplicated": 0, "reordered": 0,
                                           "phantom": 0, "stale": 0, "inconsistent": 0}
    assert report.per_nemesis["none"]["lost"] == 1
    assert "per nemesis" in report.summary()


def test_only_an_idempotent_producers_duplicates_fail_a_run_of_both_kinds():
    """Plain and idempotent producers side by side (``Config.idempotent_producers``): a plain
    producer's retried batch written twice is reported, an idempotent one's fails the run."""
    plain = {"value": "confluent-0-7", "at": [(0, 3), (0, 4)]}
    idem = {"value": "kafka-python-3-9", "at": [(1, 5), (1, 6)]}
    report = Report(acked=10, duplicated=[plain], idempotent_producers=["kafka-python-3"])
    assert report.duplicated_by_idempotent() == [] and report.problems() == []
    report.duplicated.append(idem)
    assert report.duplicated_by_idempotent() == [idem]
    assert report.problems() == ["1 duplicated by idempotent producers"]
    assert report.problems(fail_on_duplicates=True) == ["2 duplicated"]
