"""The head and the publishing of a side-by-side benchmark's results file (bench.rebalance,
bench.group_protocols): when, how and under which machine load it ran, the JSON kept under
bench/results/, its table printed and put between its markers in docs/performance.md."""

from __future__ import annotations

import datetime
import json
import subprocess
from pathlib import Path

from bench.side_by_side import RESULTS, environment, write_doc


def uptime() -> str:
    """The machine's load, as `uptime` says it (benchmarks record it before and after)."""
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def report_head(command: str, kafka_version: str, args, load_before: str, out: Path) -> dict:
    """What every side-by-side results file starts with: when, how, where, under which load."""
    repo = RESULTS.parent.parent
    return {"date": datetime.datetime.now().isoformat(timespec="seconds"), "command": command,
            "kafka_version": kafka_version,
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "environment": environment(), "load_before": load_before, "load_after": uptime(),
            "json": str(out.relative_to(repo)) if out.is_relative_to(repo) else str(out)}


def publish(report: dict, out: Path, table: str, begin: str, end: str, doc: bool = True) -> None:
    """Keep ``report`` as ``out``, print ``table`` and put it between ``begin`` and ``end`` of
    docs/performance.md (unless ``doc`` is False)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print("\n" + table)
    if doc:
        write_doc(table, begin, end)
    print(f"wrote {out}")
