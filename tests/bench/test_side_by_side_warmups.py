"""bench/side_by_side.py: every scenario warms its own path on each system before its first
measured run (the same client, topic shape and settings, not recorded), so that a subset of
scenarios (``--scenarios 1,3,6``) measures both systems warm. The clients are replaced by fakes
that log each call: nothing is started."""

import pytest

from bench import side_by_side
from bench.round_trip import WARM_CHUNK, WARM_CHUNKS
from bench.side_by_side import Bench, System


class FakeSystem(System):
    def __init__(self, name: str) -> None:
        self.name, self.bootstrap = name, f"{name}:9092"
        self.topics: dict[str, tuple] = {}      # every topic ever created: (partitions, rf, config)
        self.deleted: list[str] = []

    def broker_pids(self) -> list[int]:
        return []

    def stop(self) -> list[str]:
        return []

    def create_topic(self, name, partitions, rf, config=None) -> None:
        self.topics[name] = (partitions, rf, tuple(sorted((config or {}).items())))

    def delete_topic(self, name) -> None:
        self.deleted.append(name)


@pytest.fixture
def calls(monkeypatch):
    """[(system, path, timed)]: each client call, the path it exercises, inside ``measured`` or not."""
    log, timing = [], []
    systems = {}

    def note(bootstrap_or_system, topic, *path):
        s = bootstrap_or_system if isinstance(bootstrap_or_system, FakeSystem) else systems[bootstrap_or_system]
        log.append((s.name, (*path, s.topics[topic]), bool(timing)))

    def measured(system, fn, *args):
        timing.append(1)
        try:
            return fn(*args)
        finally:
            timing.pop()

    def assigned_client(mode, *args, timeout=0):
        opts = dict(zip(args[::2], args[1::2]))
        note(opts["--bootstrap"], opts["--topic"], "AssignedClients", mode, opts.get("--rate"), opts.get("--acks"))
        records = int(opts.get("--records", 1))
        return {"records": records, "value_bytes": records * 1024, "p50_ms": 1.0, "p99_ms": 2.0, "p999_ms": 3.0}

    monkeypatch.setattr(side_by_side, "measured", measured)
    monkeypatch.setattr(side_by_side, "producer_performance", lambda s, topic, records, size, acks: (
        note(s, topic, "ProducerPerformance", size, acks),
        {"records": records, "value_bytes": records * size, "records_s": 1, "mb_s": 1.0})[1])
    monkeypatch.setattr(side_by_side, "assigned_client", assigned_client)
    monkeypatch.setattr(side_by_side, "single_record_round_trip", lambda bootstrap, topic, records, warmup=200: (
        note(bootstrap, topic, "round trip"), {"records": records, "p50_ms": 1.0, "p99_ms": 2.0})[1])
    monkeypatch.setattr(side_by_side, "transactional_produce", lambda bootstrap, topic, records: (
        note(bootstrap, topic, "transactions"), {"records": records, "records_s": 1})[1])
    pair = [FakeSystem(side_by_side.KAFKA), FakeSystem(side_by_side.ODRADEK)]
    systems.update({s.bootstrap: s for s in pair})
    return pair, log


SCENARIOS = {
    "1": lambda bench, systems: bench.scenario1(systems),
    "2": lambda bench, systems: bench.scenario2(systems),
    "3": lambda bench, systems: bench.scenario3(systems),
    "4": lambda bench, systems: bench.scenario4(systems, {}, 10, fixed_rate=1000),
    "6": lambda bench, systems: bench.scenario6(systems, {}),
    "7": lambda bench, systems: bench.scenario7(systems, {}),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_each_scenario_warms_every_path_it_measures_on_each_system_first(calls, scenario):
    systems, log = calls
    bench = Bench(rounds=2, scale=0.01)
    SCENARIOS[scenario](bench, systems)
    measured_runs = [r for r in bench.runs if r["scenario"] == scenario and not r["case"].startswith("fill")]
    assert measured_runs and not any("error" in r for r in measured_runs)
    for s in systems:
        # scenario 3's fill is timed (its CPU is reported) but is not what scenario 3 measures
        mine = [(path, timed) for name, path, timed in log
                if name == s.name and not (scenario == "3" and path[0] == "ProducerPerformance")]
        for i, (path, timed) in enumerate(mine):
            assert not timed or (path, False) in mine[:i], (
                f"scenario {scenario} on {s.name}: a path measured before it was warmed: {mine}")


def test_the_warm_ups_are_not_recorded(calls):
    systems, log = calls
    bench = Bench(rounds=1, scale=0.01)
    bench.scenario6(systems, {})
    assert len(bench.runs) == 2     # one measured run per system
    assert sum(1 for _, _, timed in log if not timed) == 2 * (1 + WARM_CHUNKS)   # burst and chunks, outside ``measured``
    assert [n for n in bench.notes if "warm-up" in n] == [
        f"scenario 6 warm-up, {s.name}: p50 ms per {WARM_CHUNK:,} records: " + " ".join(["1.00"] * WARM_CHUNKS)
        for s in systems]


def test_scenario_6_warms_first_with_scenario_2s_load_on_a_topic_of_its_own(calls):
    """A fresh Kafka's G1 sizes its young generation only after many collections; until then its
    single record's p99 is a few young pauses (docs/performance.md, "What runs")."""
    systems, log = calls
    bench = Bench(rounds=1, scale=0.5)
    bench.scenario6(systems, {})
    for s in systems:
        mine = [(path, timed) for name, path, timed in log if name == s.name]
        burst, *chunks, measured_run = mine
        assert burst == (("ProducerPerformance", 1024, "all", (6, 3, (("min.insync.replicas", "2"),))), False)
        assert [timed for _, timed in chunks] == [False] * WARM_CHUNKS and measured_run[1]
        assert {path[-1][0] for path, _ in chunks + [measured_run]} == {1}, "the single records: their own topic"
        assert sorted(s.deleted) == sorted(s.topics)   # the burst's topic and the scenario's, both gone after


@pytest.mark.parametrize("scenario, cases", [("1", 4), ("2", 1), ("4", 1), ("6", 1), ("7", 1)])
def test_each_cases_rounds_run_on_the_topic_its_warm_up_ran_on(calls, scenario, cases):
    """Not a fresh topic per round: Kafka's first seconds on a new partition are its slowest."""
    systems, _ = calls
    bench = Bench(rounds=2, scale=0.01)
    SCENARIOS[scenario](bench, systems)
    assert len(bench.runs) == 2 * 2 * cases
    assert all(len([t for t in s.topics if "probe" not in t and "burst" not in t]) == cases for s in systems)


@pytest.mark.parametrize("scenario", ["1", "2", "3", "7"])
def test_a_throughput_scenarios_warm_ups_keep_their_client_cpu_and_bytes_apart_from_its_runs(calls, scenario):
    """For the client's marginal CPU per GB (``marginal_client_cpu``): warm-up minus run, per case."""
    systems, _ = calls
    bench = Bench(rounds=2, scale=0.01)
    SCENARIOS[scenario](bench, systems)
    cases = {(r["case"], r["system"]) for r in bench.runs if not r["case"].startswith("fill")}
    assert sorted((w["case"], w["system"]) for w in bench.warmups) == sorted(cases)   # one per case and system
    assert all(w["client_cpu_s"] >= 0 and 0 < w["value_bytes"] < run["value_bytes"]
               for w in bench.warmups for run in bench.runs if run["case"] == w["case"])
    assert len(bench.runs) == 2 * len(cases) + (2 if scenario == "3" else 0)    # rounds (and scenario 3's fills) only
