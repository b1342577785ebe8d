"""The README's performance table, regenerated from a side-by-side results file (by default the
newest: the largest ``date`` among ``bench/results/side-by-side-*.json``), so that it says what
the newest run measured and names that file (tests/bench/test_readme_table.py fails otherwise).

    .venv/bin/python -m bench.readme_table [bench/results/side-by-side-<date>.json]

One row per scenario case, its figures side by side (Kafka, Odradek, Odradek / Kafka); scenario
4's every round under the table (its tail moves from round to round). The text between the
markers in README.md is replaced; everything else is left as it is.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.side_by_side import KAFKA, ODRADEK, RESULTS, ROOT, fmt, fmt_ratio, joined

README = ROOT / "README.md"
BEGIN, END = "<!-- performance-table:begin -->", "<!-- performance-table:end -->"


def newest_results(folder: Path = RESULTS) -> Path:
    """The side-by-side results file with the latest ``date`` (names do not sort by time:
    suffixes such as -before/-after follow the date)."""
    runs = [(json.loads(p.read_text()).get("date", ""), p) for p in folder.glob("side-by-side-*.json")]
    return max(runs)[1]


def table(report: dict, path: Path) -> str:
    env = report.get("environment", {})
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    lines = [f"Odradek / Kafka {report.get('kafka_version', '?')} (KRaft) side by side in one run on "
             f"{env.get('cpus', '?')} cores, {report['date'].replace('T', ' ')[:16]}, commit "
             f"`{(env.get('commit') or '?')[:7]}`, {report['rounds']} alternating rounds, medians "
             f"(throughput: above 1 is better; latency, CPU, memory: below 1 is better). Command: "
             f"`{report['command']}`; data: `{name}`.", "",
             "| scenario | case | figures | Kafka | Odradek | Odradek/Kafka |", "| --- | --- | --- | ---: | ---: | ---: |"]
    cases: dict[tuple[str, str], list[dict]] = {}
    for row in report["summary"]:
        cases.setdefault((row["scenario"], row["case"]), []).append(row)
    for (scenario, case), rows in cases.items():
        lines.append(f"| {scenario} | {case} | {', '.join(r['figure'] for r in rows)} | {' | '.join(joined(rows))} |")
    for row in report["summary"]:
        if row.get("per_round"):
            rounds = "; ".join(f"{fmt(r[KAFKA])} / {fmt(r[ODRADEK])} ({fmt_ratio(r['ratio'])})" for r in row["per_round"])
            lines.append(f"\nScenario {row['scenario']} {row['figure']} per round (Kafka / Odradek, ratio): {rounds}.")
    return "\n".join(lines) + "\n"


def rewrite(readme: Path, text: str) -> None:
    doc = readme.read_text()
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{BEGIN}\n{text}{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.readme_table", description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="?", type=Path, help="a side-by-side JSON (default: the newest)")
    args = ap.parse_args(argv)
    path = (args.results or newest_results()).resolve()
    rewrite(README, table(json.loads(path.read_text()), path))
    print(f"README.md: table from {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
