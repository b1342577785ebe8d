"""Stale reads, and which nemesis each anomaly happened under (the per-nemesis table).

- **stale read**: a mid-run snapshot, complete up to the high watermark it was given, that ends
  below an offset acknowledged before the snapshot started (a deposed leader or a high
  watermark behind what acks=all already promised). Kafka allows it for a zombie leader until
  it learns of its deposition, so it is reported, not failed.
- **attribution**: every fault opens a window from its injection to its ``recovered`` entry
  (or the next fault, or the end of the run); an anomaly belongs to the kind whose window holds
  its moment, widened by ``SLACK`` seconds (a retried batch is written a little after the
  fault healed), else to ``none``. The moment of a lost value is its acknowledgement; of a
  duplicated, reordered or phantom value its send (its read for a value never sent); of a
  stale read its start.
"""

from __future__ import annotations

from collections import defaultdict

from .history import INVOKE, OK, Op, read_records

SLACK = 5.0
COLUMNS = ("faults", "lost", "duplicated", "reordered", "phantom", "stale", "inconsistent")
FAULT_OPS = ("fault", "kill")  # "kill": histories written before the nemesis had other kinds


def fault_ops(ops: list[Op]) -> list[Op]:
    return [op for op in ops if op.f in FAULT_OPS and op.type == INVOKE]


def stale_reads(snapshots: list[Op], sends: dict[str, dict]) -> list[dict]:
    acked: dict[int, list[tuple[float, int]]] = defaultdict(list)  # partition -> [(ack time, offset)]
    for s in sends.values():
        if s["outcome"] == OK and s["ack_partition"] is not None and s["ack_offset"] is not None:
            acked[s["ack_partition"]].append((s["ack_mono"], s["ack_offset"]))
    out = []
    for op in snapshots:
        started = (op.data or {}).get("started")
        if started is None:
            continue
        complete = set((op.data or {}).get("complete", []))
        for p, recs in read_records(op).items():
            if p not in complete or not recs:
                continue
            end = max(o for o, _ in recs)
            promised = max((o for t, o in acked.get(p, []) if t < started), default=-1)
            if promised > end:
                out.append({"read": op.value, "partition": p, "read_end": end, "acknowledged_before": promised,
                            "started": started})
    return out


def windows(ops: list[Op], end: float) -> list[tuple[float, float, str]]:
    faults = fault_ops(ops)
    recovered = [op for op in ops if op.f == "recovered"]
    out = []
    for i, op in enumerate(faults):
        nxt = faults[i + 1].mono if i + 1 < len(faults) else end
        healed = next((r.mono for r in recovered if r.mono >= op.mono and r.value == op.value), nxt)
        out.append((op.mono, min(healed, nxt), (op.data or {}).get("kind", "kill")))
    return out


def kind_at(spans: list[tuple[float, float, str]], t: float | None) -> str:
    if t is None:
        return "none"
    for a, b, kind in reversed(spans):
        if a <= t <= b + SLACK:
            return kind
    return "none"


def per_nemesis(report, ops: list[Op], sends: dict[str, dict], read_times: dict[str, float]) -> dict:
    """{kind: {faults, lost, duplicated, reordered, phantom, stale, inconsistent}}."""
    end = max((op.mono for op in ops), default=0.0)
    spans = windows(ops, end)
    table: dict[str, dict[str, int]] = {}

    def row(kind: str) -> dict[str, int]:
        return table.setdefault(kind, dict.fromkeys(COLUMNS, 0))

    for _, _, kind in spans:
        row(kind)["faults"] += 1

    def sent_at(value: str) -> float | None:
        s = sends.get(value)
        return s["invoke"] if s else None

    for item in report.lost:
        row(kind_at(spans, (sends.get(item["value"]) or {}).get("ack_mono")))["lost"] += 1
    for name in ("duplicated", "reordered"):
        for item in getattr(report, name):
            row(kind_at(spans, sent_at(item["value"])))[name] += 1
    for item in report.phantom:
        t = sent_at(item["value"])
        row(kind_at(spans, t if t is not None else read_times.get(str(item["read"]))))["phantom"] += 1
    for item in report.stale:
        row(kind_at(spans, item["started"]))["stale"] += 1
    for item in report.inconsistent:
        row(kind_at(spans, read_times.get(str(item.get("read") or (item.get("then") or {}).get("read")))))[
            "inconsistent"] += 1
    return dict(sorted(table.items()))


def table_lines(table: dict[str, dict[str, int]]) -> list[str]:
    if not table:
        return []
    width = max(len(k) for k in table) + 2
    lines = ["  per nemesis:".ljust(width + 2) + "".join(c.rjust(13) for c in COLUMNS)]
    for kind, counts in table.items():
        lines.append(f"    {kind}".ljust(width + 2) + "".join(str(counts[c]).rjust(13) for c in COLUMNS))
    return lines
