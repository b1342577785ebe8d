"""bench/side_by_side.py measures the client's CPU beside the brokers' (issue 33: the Java client
takes about a core, so a throughput ratio needs the client's cost to allow it): every measured
run records the client's, the brokers' and the machine's CPU seconds, the throughput scenarios
(1, 2, 3, 7) report each per GB of values in the summary, and the markdown puts them on one line
per case, the client's as its marginal cost beyond the case's warm-up run (a JVM's start is ~2 CPU s
of every run). Unit-level: no cluster; the clients are a child process and this process burning CPU."""

import json
import subprocess
import sys
import time

import pytest

from bench import readme_table, side_by_side
from bench.side_by_side import (CLIENT_CPU, CPU_LABEL, CPU_NOTE, KAFKA, ODRADEK, PLAIN_NOTE, System, marginal_client_cpu,
                                 measured, summarize)


class NoBrokers(System):
    name, bootstrap = KAFKA, "none:9092"

    def broker_pids(self) -> list[int]:
        return []

    def stop(self) -> list[str]:
        return []


def burn(seconds: float) -> None:
    deadline = time.process_time() + seconds
    while time.process_time() < deadline:
        pass


def child_client(value_bytes: int) -> dict:
    """A client in a child process (as ProducerPerformance's JVM is) that uses ~0.4 s of CPU."""
    busy = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-S", "-c", busy], check=True)
    return {"records": 1, "value_bytes": value_bytes}


def in_process_client(value_bytes: int) -> dict:
    """A client in this process (as scenario 7's confluent-kafka producer is)."""
    burn(0.3)
    return {"records": 1, "value_bytes": value_bytes}


@pytest.mark.parametrize("client, cpu", [(child_client, 0.4), (in_process_client, 0.3)])
def test_a_measured_run_has_the_clients_cpu_beside_the_brokers_and_the_machines(client, cpu):
    run = measured(NoBrokers(), client, 500_000_000)     # 0.5 GB of values
    assert cpu - 0.05 <= run["client_cpu_s"] <= cpu + 0.3
    assert run["broker_cpu_s"] == 0
    assert run["machine_cpu_s"] == round(side_by_side.CORES * run["wall_s"], 2)
    assert run["client_cpu_s_per_gb"] == round(run["client_cpu_s"] / 0.5, 2)
    assert run["broker_cpu_s_per_gb"] == 0
    assert run["machine_cpu_s_per_gb"] == round(run["machine_cpu_s"] / 0.5, 2)


def test_a_run_without_value_bytes_has_no_figure_per_gb():
    run = measured(NoBrokers(), lambda: {"records": 10, "p50_ms": 1.0})     # scenario 6's round trips
    assert "client_cpu_s" in run and not any(k.endswith("_per_gb") for k in run)


def run(scenario: str, case: str, system: str, rnd: int, client: float, broker: float, machine: float) -> dict:
    return {"scenario": scenario, "case": case, "system": system, "round": rnd, "mb_s": 10.0, "records_s": 100,
            "p50_ms": 1.0, "p99_ms": 2.0, "value_bytes": 1_000_000_000, "client_cpu_s": client, "client_cpu_s_per_gb": client,
            "broker_cpu_s_per_gb": broker, "machine_cpu_s_per_gb": machine}


RUNS = [run("1", "produce p=1 1024B acks=1", KAFKA, 0, 4.0, 2.0, 20.0),
        run("1", "produce p=1 1024B acks=1", ODRADEK, 0, 3.0, 1.0, 10.0),
        run("1", "produce p=1 1024B acks=1", KAFKA, 1, 6.0, 4.0, 30.0),
        run("1", "produce p=1 1024B acks=1", ODRADEK, 1, 5.0, 3.0, 14.0),
        run("3", "fill 1 partition 1KiB acks=1", KAFKA, 0, 9.0, 9.0, 9.0),
        run("3", "consume from the start", KAFKA, 0, 4.5, 0.4, 12.0),
        run("3", "consume from the start", ODRADEK, 0, 4.0, 0.3, 9.0),
        run("6", "one record at a time RF=3 acks=all", KAFKA, 0, 1.0, 1.0, 1.0),
        run("6", "one record at a time RF=3 acks=all", ODRADEK, 0, 1.0, 1.0, 1.0)]


def cpu_rows(summary: list[dict]) -> dict:
    return {(r["scenario"], r["case"], r["figure"]): (r[KAFKA], r[ODRADEK], r["ratio"])
            for r in summary if "CPU" in r["figure"]}


def test_without_warm_ups_the_summary_has_the_medians_of_client_broker_and_machine_cpu_per_gb_of_each_case():
    summary = summarize(RUNS, {})
    assert cpu_rows(summary) == {
        ("1", "produce p=1 1024B acks=1", CLIENT_CPU): (5.0, 4.0, 0.8),
        ("1", "produce p=1 1024B acks=1", "broker CPU s/GB"): (3.0, 2.0, 0.67),
        ("1", "produce p=1 1024B acks=1", "machine CPU s/GB"): (25.0, 12.0, 0.48),
        ("3", "consume from the start", CLIENT_CPU): (4.5, 4.0, 0.89),
        ("3", "consume from the start", "broker CPU s/GB"): (0.4, 0.3, 0.75),
        ("3", "consume from the start", "machine CPU s/GB"): (12.0, 9.0, 0.75),
    }   # not scenario 3's fill, not scenario 6 (100 B records one at a time: not a throughput)
    assert [row.get("plain") for row in summary if row["figure"] == CLIENT_CPU] == [[KAFKA, ODRADEK]] * 2


def warm_up(scenario: str, case: str, system: str, client: float, gb: float) -> dict:
    return {"scenario": scenario, "case": case, "system": system, "client_cpu_s": client, "value_bytes": int(gb * 1e9)}


# scenario 1 p=1 1 KiB: both systems warmed up with 0.1 GB; scenario 3: Kafka only, with more CPU than its run
WARM_UPS = [warm_up("1", "produce p=1 1024B acks=1", KAFKA, 2.3, 0.1),
            warm_up("1", "produce p=1 1024B acks=1", ODRADEK, 2.2, 0.1),
            warm_up("3", "consume from the start", KAFKA, 4.6, 0.1)]


def test_the_client_cpu_per_gb_is_marginal_the_median_run_beyond_its_warm_up():
    runs = [r for r in RUNS if r["system"] == KAFKA and r["scenario"] == "1"]   # 4.0 and 6.0 CPU s for 1 GB each
    assert marginal_client_cpu(runs, WARM_UPS[0]) == round((5.0 - 2.3) / 0.9, 2)
    assert marginal_client_cpu(runs, None) is None                                 # no warm-up
    assert marginal_client_cpu(runs, warm_up("1", "c", KAFKA, 5.0, 0.1)) is None   # no CPU beyond it
    assert marginal_client_cpu(runs, warm_up("1", "c", KAFKA, 1.0, 1.0)) is None   # no bytes beyond it


def test_the_summary_falls_back_to_the_runs_median_per_system_where_there_is_no_marginal_figure():
    rows = {(r["scenario"], r["figure"]): r for r in summarize(RUNS, {}, WARM_UPS)}
    assert (rows["1", CLIENT_CPU][KAFKA], rows["1", CLIENT_CPU][ODRADEK], rows["1", CLIENT_CPU]["ratio"]) == (3.0, 2.0, 0.67)
    assert rows["1", CLIENT_CPU][f"{KAFKA}_values"] == [4.0, 6.0]     # each run's own figure stays in the JSON
    assert "plain" not in rows["1", CLIENT_CPU]
    assert (rows["3", CLIENT_CPU][KAFKA], rows["3", CLIENT_CPU][ODRADEK], rows["3", CLIENT_CPU]["plain"]) == (
        4.5, 4.0, [KAFKA, ODRADEK])
    assert rows["1", "broker CPU s/GB"][KAFKA] == 3.0                  # the brokers' and machine's: medians as before


def report(summary: list[dict]) -> dict:
    return {"date": "2026-11-30T07:30:00", "environment": {"commit": "abcdef0", "cpus": 2, "cpu": "x"},
            "kafka_version": "3.9.2", "rounds": 2, "command": "python -m bench.side_by_side", "json": "r.json",
            "chart": "bench/results/r.png", "summary": summary, "not_runnable": {}, "notes": []}


def test_the_markdown_table_has_one_cpu_line_per_throughput_case_and_says_what_it_means():
    text = side_by_side.markdown(report(summarize(RUNS, {}, WARM_UPS)))
    assert (f"| 1 | produce p=1 1024B acks=1 | {CPU_LABEL} | 3.00 / 3.00 / 25.0 | 2.00 / 2.00 / 12.0 | "
            "0.67 / 0.67 / 0.48 |") in text
    assert f"| 3 | consume from the start | {CPU_LABEL} | 4.50 / 0.40 / 12.0 | 4.00 / 0.30 / 9.00 | " in text
    assert text.count(CPU_LABEL) == 2 and CPU_NOTE in text and "marginal" in CPU_LABEL
    assert f"{PLAIN_NOTE}3 consume from the start (kafka, odradek)." in text     # only the case without one
    lines = [line for line in text.splitlines() if line.startswith("| 1 |")]
    assert [line.split(" | ")[2] for line in lines] == ["MB/s", "records/s", CPU_LABEL]


def test_the_readme_table_carries_the_cpu_figures_too(tmp_path):
    path = tmp_path / "side-by-side.json"
    data = report(summarize(RUNS, {}))
    path.write_text(json.dumps(data))
    text = readme_table.table(data, path)
    assert (f"| 3 | consume from the start | MB/s, records/s, {CLIENT_CPU}, broker CPU s/GB, machine CPU s/GB | "
            "10.0 / 100 / 4.50 / 0.40 / 12.0 |") in text
