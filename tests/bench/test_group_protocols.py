"""bench.group_protocols' pure parts (nothing is started): GroupMembers' event lines, the figures
per system, protocol and change, the table (a change that never settled is named under it), and
where Kafka 4.x's broker resolves (its own home, apart from the compat suite's 4.x clients)."""

from pathlib import Path

from bench import apache_kafka
from bench.apache_kafka import KAFKA4_POM, KAFKA4_SERVER_POM
from bench.group_protocols import markdown, parse_events, summarize

STDOUT = """[2026-11-29 19:00:00] WARN something the clients logged (org.apache.kafka.clients.NetworkClient)
GROUPS {"event": "form", "members": 3, "settled_s": 2.5, "resumed_s": 2.6}
GROUPS {"event": "join", "round": 0, "members": 4, "settled_s": 3.0, "resumed_s": 3.1, "member_pause_max_ms": 900, "member_pause_p50_ms": 400, "group_pause_ms": 300}
GROUPS {"event": "leave", "round": 0, "members": 3, "settled_s": 1.0, "resumed_s": 1.2, "member_pause_max_ms": 100, "member_pause_p50_ms": 50, "group_pause_ms": 40}
GROUPS {"event": "join", "round": 1, "members": 4, "settled_s": 5.0, "resumed_s": 5.5, "member_pause_max_ms": 700, "member_pause_p50_ms": 200, "group_pause_ms": 100}
"""


def test_only_the_marked_lines_are_events():
    events = parse_events(STDOUT)
    assert [e["event"] for e in events] == ["form", "join", "leave", "join"]
    assert events[1]["member_pause_max_ms"] == 900


def test_figures_are_the_median_and_worst_of_each_change_over_the_rounds():
    rows = summarize([{"system": "odradek", "protocol": "consumer", "events": parse_events(STDOUT), "failure": None}])
    by_change = {r["change"]: r for r in rows}
    assert set(by_change) == {"form", "join", "leave"}
    join = by_change["join"]
    assert join["n"] == 2
    assert join["settled_s"] == {"median": 4.0, "max": 5.0}
    assert join["member_pause_max_ms"] == {"median": 800, "max": 900}
    assert "group_pause_ms" not in by_change["form"]


def report(runs: list[dict]) -> dict:
    return {"date": "2026-11-29T19:00:00", "command": "python -m bench.groups --compare", "kafka_version": "4.1.1",
            "args": {"brokers": 3, "members": 3, "partitions": 12, "rate": 1000, "rounds": 2},
            "environment": {"commit": "0123456789", "cpus": 2}, "load_before": "1.0", "load_after": "2.0",
            "json": "bench/results/groups-x.json", "runs": runs, "summary": summarize(runs)}


def test_table_lists_each_change_and_names_a_group_that_never_settled():
    good = {"system": "kafka", "protocol": "classic", "events": parse_events(STDOUT), "failure": None}
    stuck = {"system": "odradek", "protocol": "consumer", "events": parse_events(STDOUT)[:1],
             "failure": {"event": "join", "error": "not settled after the deadline", "holdings": {"m3": {"held": 0}}}}
    table = markdown(report([good, stuck]))
    rows = [line for line in table.splitlines() if line.startswith("| join")]
    assert rows == ["| join | classic, range (eager; Java's default) | kafka | 4.00 (5.00) | 4.30 (5.50) "
                    "| 300 (400) | 800 (900) | 200 (300) |"]
    assert "| leave | classic, range (eager; Java's default) | kafka | 1.00 | 1.20 | 50 | 100 | 40 |" in table
    assert "**odradek, consumer (KIP-848): did not finish**" in table and "not settled after the deadline" in table


def test_kafka_4_broker_resolves_apart_from_the_4x_clients(monkeypatch):
    monkeypatch.delenv("ODRADEK_KAFKA4_HOME", raising=False)
    monkeypatch.delenv("ODRADEK_KAFKA4_SERVER_HOME", raising=False)
    assert apache_kafka.home_of(KAFKA4_SERVER_POM) == apache_kafka.CACHE / "4.1.1-server"
    assert apache_kafka.home_of(KAFKA4_POM) == apache_kafka.CACHE / apache_kafka.KAFKA4_VERSION
    monkeypatch.setenv("ODRADEK_KAFKA4_SERVER_HOME", "/elsewhere")
    assert apache_kafka.home_of(KAFKA4_SERVER_POM) == Path("/elsewhere")


def test_kafka_4_logs_through_log4j2(tmp_path):
    props = apache_kafka.log4j2_properties(tmp_path / "log4j2.properties", tmp_path / "server.log").read_text()
    assert f"appender.out.fileName = {tmp_path / 'server.log'}" in props and "rootLogger.level = INFO" in props
    tools = apache_kafka.log4j2_properties(tmp_path / "tools.properties").read_text()
    assert "appender.out.target = SYSTEM_ERR" in tools and "rootLogger.level = WARN" in tools
