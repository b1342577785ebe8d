"""bench/round_trip_timeline.py: the round trips read from the brokers' probe files (grouped by
their sequence of events, medians per event), and the probes on a real 3-broker cluster (their
wrapped methods must still exist in the broker, and the events come in the order of the path)."""

import os
import subprocess
import sys

import pytest

from bench.round_trip_timeline import PROBES, format_timeline, main, parser, read_events, round_trips, timelines

LEADER, F2, F3 = 10, 20, 30
NAMES = {LEADER: "leader", F2: "follower 2", F3: "follower 3"}


def trip(start: int, gap: int, second: int = F3) -> list[tuple[int, int, str]]:
    """One round trip from ``start`` ns: the leader answers both followers, the first follower
    fetches again after ``gap`` ns, ``second`` last."""
    first = F2 if second == F3 else F3
    return [(start, LEADER, "Produce in"), (start + 1000, LEADER, "Fetch answer"),
            (start + 2000, first, "fetch answer in"), (start + 2000 + gap, first, "fetch out"),
            (start + 9000, second, "fetch out"), (start + 10000, LEADER, "produce acked"),
            (start + 12000, LEADER, "Produce answer")]


def test_round_trips_are_grouped_by_their_sequence_with_median_offsets():
    events = ([(0, F2, "fetch out"), (0, F3, "fetch out")]
              + trip(100_000, 1000) + trip(200_000, 3000) + trip(300_000, 5000) + trip(400_000, 1000, second=F2)
              + [(500_000, F2, "fetch out"), (500_000, F3, "fetch out")])
    trips = round_trips(sorted(events), LEADER, NAMES)
    assert len(trips) == 4
    common, other = timelines(trips)
    assert (common["round_trips"], common["share"], other["round_trips"]) == (3, 0.75, 1)
    assert common["events"] == [["leader: Fetch answer", 1.0], ["follower 2: fetch answer in", 2.0],
                                ["follower 2: fetch out", 5.0], ["follower 3: fetch out", 9.0],
                                ["leader: produce acked", 10.0], ["leader: Produce answer", 12.0]]


def test_each_line_says_the_time_since_its_brokers_previous_event():
    text = format_timeline({"round_trips": 3, "share": 0.75, "events": [
        ["leader: Fetch answer", 1.0], ["follower 2: fetch answer in", 2.0], ["follower 2: fetch out", 5.0],
        ["leader: Produce answer", 12.0]]})
    assert text.splitlines()[2:] == ["      1.0    +1.0  leader: Fetch answer",
                                     "      2.0          follower 2: fetch answer in",
                                     "      5.0    +3.0  follower 2: fetch out",
                                     "     12.0   +11.0  leader: Produce answer"]


def test_a_round_trip_outside_a_followers_notes_is_left_out():
    """A follower's probe file starts and ends with a signal: a round trip before its first note
    would miss its events and be grouped as a sequence of its own."""
    events = trip(100_000, 1000) + [(150_000, F2, "fetch out"), (150_000, F3, "fetch out")] + trip(200_000, 1000)
    events += [(300_000, F2, "fetch out"), (300_000, F3, "fetch out")]
    assert [offsets[0] for _, offsets in round_trips(sorted(events), LEADER, NAMES)] == [1000]


def test_probe_files_are_read_in_time_order(tmp_path):
    (tmp_path / "broker.7").write_text("300 Produce in\n100 fetch out\n")
    (tmp_path / "broker.8").write_text("200 fetch answer in\n")
    assert read_events(tmp_path / "broker") == [(100, 7, "fetch out"), (200, 8, "fetch answer in"),
                                                (300, 7, "Produce in")]


@pytest.mark.parametrize("detail", ["", "1"])
def test_the_probes_wrap_methods_the_broker_has(detail):
    """Installed in a process of their own (they patch the broker's classes); with
    ODRADEK_TIMELINE_DETAIL=1, also the functions the detail probes replace."""
    code = (f"import runpy, sys; probes = runpy.run_path({str(PROBES)!r}); probes['_install']();"
            "from odradek.protocol.connection import KafkaConnection as K;"
            "from odradek.broker.storage import log; from odradek.broker.replication import client;"
            "assert K._enqueue.__qualname__.startswith('_install') and log.Log.append.__name__ == 'wrapper';"
            "detail = [f.__qualname__.startswith('_install_detail') for f in "
            "(client.decode_response, client.encode_request, log.validate_append)];"
            f"assert detail == [{bool(detail)}] * 3, detail")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "ODRADEK_TIMELINE_DETAIL": detail})
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.slow
def test_a_probed_cluster_gives_the_paths_timeline(tmp_path, capsys):
    """With a what-if delay of 300 µs after each follower's append: every follower's next event
    comes at least that much later (medians of per-trip times keep a per-trip lower bound). With
    ``--detail``, the steps inside the follower's pass and the appends come in their order."""
    out = tmp_path / "timeline.json"
    assert main(["--records", "300", "--warm-chunks", "0", "--json", str(out), "--delay", "follower appended:300",
                 "--detail"]) == 0
    import json
    figures = json.loads(out.read_text())
    assert figures["round_trips_probed"] >= 250 and figures["loopback_rtt_us"] > 0
    timed = figures["timelines"][0]["events"]
    events = [event for event, _ in timed]
    path = ["leader: Produce start", "leader: append", "leader: validated", "leader: appended",
            "leader: fetches woken", "leader: Fetch answer", "fetch answer in", "answer decode", "answer decoded",
            "follower append", "validated", "follower appended", "fetch encode", "fetch out", "leader: Fetch in",
            "leader: produce acked", "leader: Produce answer"]
    at = 0
    for step in path:   # in this order, other events between
        at = next(i for i in range(at, len(events)) if step in events[i]) + 1
    assert events[-1] == "leader: Produce answer"
    for i, (event, us) in enumerate(timed):
        if event.endswith(": follower appended"):
            follower = event.split(":")[0]
            after = next(t for e, t in timed[i + 1:] if e.startswith(follower + ":"))
            assert after - us >= 300, timed
    assert "300 µs spun after each 'follower appended'" in capsys.readouterr().out


@pytest.mark.parametrize("text", ["follower appended", "follower appended:", ":30", "follower appended:-5",
                                  "follower appended:x"])
def test_a_delay_names_an_event_and_a_positive_time(text):
    with pytest.raises(SystemExit):
        parser().parse_args(["--delay", text])


def test_without_a_delay_nothing_is_spun():
    assert parser().parse_args([]).delay is None
    assert parser().parse_args(["--delay", "produce acked:12.5"]).delay == "produce acked:12.5"
