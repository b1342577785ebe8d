"""The chart's monitoring files (charts/odradek/files/) as the observability tests read them:
the Grafana dashboard's panel queries and the metric names they use, and the alerts' names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

FILES = Path(__file__).resolve().parents[2] / "charts" / "odradek" / "files"
DASHBOARD = FILES / "grafana-dashboard.json"
RULES = FILES / "prometheus-rules.yaml"

# Every metric Odradek exports starts with one of these (docs/observability.md); PromQL's
# functions, label names and keywords do not.
_METRIC = re.compile(r"\b(?:kafka|process|odradek)_[a-zA-Z0-9_]+")


def panel_queries() -> dict[str, list[str]]:
    """Panel title -> its query expressions (rows have none)."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return {p["title"]: [t["expr"] for t in p["targets"]] for p in panels if p["type"] != "row"}


def metric_names(expr: str) -> set[str]:
    return set(_METRIC.findall(expr))


def alert_names() -> list[str]:
    return [r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r]
