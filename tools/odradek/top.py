"""``odradek top``: a live terminal view of a cluster from its processes' ``/metrics``
(docs/observability.md, "odradek top"): brokers (up or down, partitions, leaders, URP, under
min ISR, connections, bytes in/out per second), the active controller, bytes and messages per
topic, and each consumer group's lag, redrawn every ``--interval`` seconds with ``rich``.

The metrics URLs come from a dev cluster (``--data-dir``: ``odradek dev status --json``'s
``metrics_url``) or from ``--metrics-url NAME=URL`` options (``broker-1=http://...``; a name
starting with ``controller`` is read as a controller). Scraping, aggregation (``Frame``) and
drawing (``render``) are separate so each can be read and tested alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

Samples = list[tuple[str, dict[str, str], float]]

RM = "kafka_server_replicamanager_"
BTM = "kafka_server_brokertopicmetrics_"
KC = "kafka_controller_kafkacontroller_"


def scrape(url: str, timeout: float = 2.0) -> Samples | None:
    """Every sample of one ``/metrics``, or None when the process does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    return [(s.name, s.labels, s.value) for fam in text_string_to_metric_families(text) for s in fam.samples]


def _value(samples: Samples, name: str, **labels: str) -> float:
    return sum(v for n, ls, v in samples if n == name and all(ls.get(k) == w for k, w in labels.items()))


def _by(samples: Samples, name: str, label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for n, ls, v in samples:
        if n == name and ls.get(label):
            out[ls[label]] = out.get(ls[label], 0.0) + v
    return out


@dataclass
class Frame:
    """One refresh: each process's samples (None: down) at ``at`` (monotonic seconds)."""
    at: float
    scrapes: dict[str, Samples | None]

    def brokers(self) -> dict[str, Samples | None]:
        return {n: s for n, s in sorted(self.scrapes.items(), key=lambda i: _order(i[0])) if n.startswith("broker")}

    def controllers(self) -> dict[str, Samples | None]:
        return {n: s for n, s in sorted(self.scrapes.items()) if n.startswith("controller")}

    def active_controller(self) -> str | None:
        return next((n for n, s in self.controllers().items() if s and _value(s, KC + "activecontrollercount")), None)

    def urp(self) -> int:
        return int(sum(_value(s, RM + "underreplicatedpartitions") for s in self.brokers().values() if s))

    def per_topic(self, metric: str) -> dict[str, float]:
        """A per-topic counter summed over the brokers (their ``topic``-labelled series only)."""
        out: dict[str, float] = {}
        for s in self.brokers().values():
            for topic, v in _by(s or [], BTM + metric, "topic").items():
                out[topic] = out.get(topic, 0.0) + v
        return out

    def group_lag(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for s in self.brokers().values():
            for group, v in _by(s or [], "kafka_consumergroup_lag_sum", "consumergroup").items():
                out[group] = out.get(group, 0.0) + v
        return out


def _order(name: str) -> tuple[str, int]:
    head, _, tail = name.rpartition("-")
    return (head, int(tail)) if tail.isdigit() else (name, -1)


@dataclass
class Rates:
    """Per-second rates of counters between two frames (blank on the first)."""
    previous: Frame | None = None
    current: Frame | None = None

    def push(self, frame: Frame) -> None:
        self.previous, self.current = self.current, frame

    def rate(self, now: float | None, before: float | None) -> float | None:
        if now is None or before is None or self.previous is None or self.current is None:
            return None
        elapsed = self.current.at - self.previous.at
        return max(now - before, 0.0) / elapsed if elapsed > 0 else None


def _bytes(v: float | None) -> str:
    if v is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if v < 1024 or unit == "GiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return "-"


def render(rates: Rates):
    """The ``rich`` renderable of the current frame (rates against the previous one)."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    frame, prev = rates.current, rates.previous
    assert frame is not None
    active = frame.active_controller()
    urp = frame.urp()
    head = Text.assemble(("odradek top", "bold"), f"   active controller: {active or 'NONE'}   URP: ",
                         (str(urp), "bold red" if urp else "bold green"))
    def table(title: str, *columns: str) -> Table:
        return Table(*columns, title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                     min_width=40)

    brokers = table("Brokers", "broker", "state", "parts", "leaders", "URP", "<minISR", "conns", "in/s", "out/s")
    for name, s in frame.brokers().items():
        if s is None:
            brokers.add_row(name, Text("DOWN", "bold red"), *["-"] * 7)
            continue
        before = prev.scrapes.get(name) if prev else None
        io = [rates.rate(_value(s, BTM + m), _value(before, BTM + m) if before else None)
              for m in ("bytesin_total", "bytesout_total")]
        brokers.add_row(name, Text("up", "green"), *(str(int(_value(s, RM + m))) for m in
                        ("partitioncount", "leadercount", "underreplicatedpartitions", "underminisrpartitioncount")),
                        str(int(_value(s, "kafka_server_socket_server_metrics_connection_count"))),
                        *map(_bytes, io))
    controllers = table("Controllers", "controller", "state", "active", "offline partitions", "topics", "partitions")
    for name, s in frame.controllers().items():
        cells = ["-"] * 4 if s is None else [str(int(_value(s, KC + m))) for m in
                                             ("activecontrollercount", "offlinepartitionscount",
                                              "globaltopiccount", "globalpartitioncount")]
        controllers.add_row(name, Text("DOWN", "bold red") if s is None else Text("up", "green"), *cells)
    topics = table("Topics", "topic", "bytes in/s", "bytes out/s", "messages in/s")
    now = {m: frame.per_topic(m) for m in ("bytesin_total", "bytesout_total", "messagesin_total")}
    then = {m: prev.per_topic(m) if prev else {} for m in now}
    for topic in sorted(now["bytesin_total"].keys() | now["bytesout_total"].keys()):
        r = {m: rates.rate(now[m].get(topic), then[m].get(topic)) for m in now}
        msgs = r["messagesin_total"]
        topics.add_row(topic, _bytes(r["bytesin_total"]), _bytes(r["bytesout_total"]),
                       "-" if msgs is None else f"{msgs:.0f}")
    groups = table("Consumer groups", "group", "lag")
    for group, lag in sorted(frame.group_lag().items()):
        groups.add_row(group, str(int(lag)))
    return Group(head, brokers, controllers, topics, groups)


def dev_metrics_urls(data_dir: Path) -> dict[str, str]:
    """``metrics_url`` of ``odradek dev status --json`` (which also enters a --netns cluster's namespace)."""
    proc = subprocess.run([sys.executable, "-m", "odradek.cli", "dev", "status", "--json", "--data-dir", str(data_dir)],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise SystemExit(f"odradek top: `odradek dev status --json` failed: {proc.stderr.strip()}")
    return dict(json.loads(proc.stdout).get("metrics_url") or {})


def take(urls: dict[str, str], pool: ThreadPoolExecutor) -> Frame:
    at = time.monotonic()
    return Frame(at, dict(zip(urls, pool.map(scrape, urls.values()))))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="odradek top", description="A live view of a cluster's brokers, controller, "
                                "URP, topics and group lag, from their /metrics.")
    p.add_argument("--data-dir", type=Path, help="a dev cluster's data directory (default var/dev)")
    p.add_argument("--metrics-url", action="append", default=[], metavar="NAME=URL",
                   help="a process's /metrics (repeatable; NAME broker-1, controller-0, ...)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes (default 1)")
    p.add_argument("--once", action="store_true", help="print one view (rates over one interval) and exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    urls = dict(u.split("=", 1) for u in args.metrics_url)
    if args.data_dir or not urls:
        urls = {**dev_metrics_urls(args.data_dir or Path("var/dev")), **urls}
    urls = {n: u for n, u in urls.items() if n != "gateway"}  # the gateway has none of these series
    from rich.console import Console
    from rich.live import Live

    rates, console = Rates(), Console()
    with ThreadPoolExecutor(max(len(urls), 1)) as pool:
        if args.once:
            rates.push(take(urls, pool))
            time.sleep(args.interval)
            rates.push(take(urls, pool))
            console.print(render(rates))
            return 0
        rates.push(take(urls, pool))
        with Live(render(rates), console=console, screen=False, auto_refresh=False) as live:
            try:
                while True:
                    time.sleep(args.interval)
                    rates.push(take(urls, pool))
                    live.update(render(rates), refresh=True)
            except KeyboardInterrupt:
                return 0
