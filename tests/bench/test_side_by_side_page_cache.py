"""bench/side_by_side.py: before each measured run that writes, the page cache of the system's
files is given back (``drop_page_cache``), so that the run's writes reuse memory the machine
used lately; a run that reads what earlier runs wrote (scenario 3's consume) keeps it, and the
other system's files are left alone (its filled topic waits in memory for its consume)."""

import os
import subprocess

import pytest

from bench.side_by_side import Bench, drop_page_cache


def cached_bytes(path) -> int:
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def test_the_cached_pages_of_every_file_under_the_root_are_given_back(tmp_path):
    log = tmp_path / "odradek-1" / "broker-1" / "topic-0" / "00000000000000000000.log"
    log.parent.mkdir(parents=True)
    with open(log, "wb") as f:
        f.write(os.urandom(4 << 20))
        os.fsync(f.fileno())   # clean pages: the harness syncs first too
    assert cached_bytes(log) == 4 << 20
    drop_page_cache(tmp_path)
    assert cached_bytes(log) == 0
    assert log.stat().st_size == 4 << 20   # the data stays, on disk


class FakeSystem:
    name = "fake"
    dir = None


@pytest.mark.parametrize("reads_cache, dropped", [(False, 1), (True, 0)])
def test_a_write_run_drops_the_page_cache_and_a_read_of_earlier_runs_keeps_it(monkeypatch, tmp_path,
                                                                              reads_cache, dropped):
    roots = []
    monkeypatch.setattr("bench.side_by_side.drop_page_cache", roots.append)
    system = FakeSystem()
    system.dir = tmp_path / "odradek-1"
    bench = Bench(rounds=1, scale=0.01)
    bench.record("1", "a case", system, 0, lambda: {"mb_s": 1.0}, reads_cache=reads_cache)
    assert roots == [system.dir] * dropped and bench.runs[0]["mb_s"] == 1.0


def test_scenario_3s_consume_reads_from_the_page_cache(monkeypatch):
    """Its rounds read the topic its fill wrote: from memory, as in the runs before this change."""
    import bench.side_by_side as sbs
    kept = []
    monkeypatch.setattr(sbs.Bench, "record", lambda self, scenario, case, s, rnd, fn, reads_cache=False:
                        kept.append((case, reads_cache)))
    monkeypatch.setattr(sbs.Bench, "warm", lambda *a, **k: None)

    class Topics(FakeSystem):
        bootstrap = "127.0.0.1:1"

        def create_topic(self, *a, **k): pass

        def delete_topic(self, *a, **k): pass

    sbs.Bench(rounds=2, scale=0.01).scenario3([Topics()])
    assert kept == [("fill 1 partition 1KiB acks=1", False), ("consume from the start", True),
                    ("consume from the start", True)]
