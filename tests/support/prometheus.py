"""A real Prometheus server for the observability tests: Debian's ``prometheus`` package
(``make test-tools`` installs it, scripts/prometheus.sh), started on 127.0.0.1 port 0 (the port
it bound read from its listening socket), a scrape interval of 1 s and the given targets, and stopped by PID.

``PrometheusServer(dir, targets).start()``; ``query(promql)`` answers an instant query as
``{label tuple: value}`` (``scalar(promql)`` for a single value or None); ``stop()``.
``targets`` maps a job name to metrics URLs (``odradek dev status --json``'s ``metrics_url``).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

from odradek.dev.processes import listening_ports
from odradek.dev.waiting import wait_until
from tests.support.tools import tool_missing

SCRAPE_INTERVAL_S = 1


def binary() -> str:
    """The prometheus executable, or the test is skipped (fails under make test)."""
    path = shutil.which("prometheus")
    if path is None:
        tool_missing("Debian's prometheus package is not installed (make test-tools runs scripts/prometheus.sh)")
    return path


def _scrape_config(targets: dict[str, list[str]]) -> dict:
    jobs = []
    for job, urls in targets.items():
        parsed = [urllib.parse.urlsplit(u) for u in urls]
        paths = {p.path for p in parsed}
        assert len(paths) == 1, f"one metrics path per job: {paths}"
        jobs.append({"job_name": job, "metrics_path": paths.pop(), "scrape_interval": f"{SCRAPE_INTERVAL_S}s",
                     "scrape_timeout": f"{SCRAPE_INTERVAL_S}s",
                     "static_configs": [{"targets": [p.netloc for p in parsed]}]})
    return {"global": {"scrape_interval": f"{SCRAPE_INTERVAL_S}s"}, "scrape_configs": jobs}


class PrometheusServer:
    def __init__(self, directory: Path, targets: dict[str, list[str]]) -> None:
        self.directory = directory
        self.targets = targets
        self.port = 0
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> PrometheusServer:
        exe = binary()
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "prometheus.yml"
        config.write_text(json.dumps(_scrape_config(self.targets)))  # JSON is YAML
        log = open(self.directory / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [exe, f"--config.file={config}", f"--storage.tsdb.path={self.directory / 'data'}",
             "--web.listen-address=127.0.0.1:0", "--storage.tsdb.retention.time=1h"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited {self.proc.returncode}: "
                                   + (self.directory / "prometheus.log").read_text()[-2000:])
            if not self.port:
                self.port = next(iter(listening_ports(self.proc.pid)), 0)
                return False
            with urllib.request.urlopen(self.url + "/-/ready", timeout=10) as resp:
                return resp.status == 200
        wait_until(ready, timeout, "prometheus to be ready", 0.2, retry_on=(OSError,))
        return self

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def query(self, promql: str) -> dict[tuple[tuple[str, str], ...], float]:
        """An instant query's vector: {sorted (label, value) pairs: value}."""
        url = self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=5) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        data = body["data"]
        if data["resultType"] == "scalar":
            return {(): float(data["result"][1])}
        return {tuple(sorted(r["metric"].items())): float(r["value"][1]) for r in data["result"]}

    def scalar(self, promql: str) -> float | None:
        """The one value of ``promql`` (e.g. a ``sum(...)``), or None when it has none yet."""
        result = self.query(promql)
        assert len(result) <= 1, result
        return next(iter(result.values()), None)

    def targets_up(self) -> bool:
        """Every configured target scraped successfully at least once (``up == 1``)."""
        expected = sum(len(urls) for urls in self.targets.values())
        return sum(self.query("up == 1").values()) >= expected


def broker_metrics(cluster, address: str) -> dict[tuple[str, frozenset], float]:
    """The broker at ``address``'s Prometheus series: (name, labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families
    broker = next(i for i, a in cluster.brokers.items() if a == address)
    with urllib.request.urlopen(cluster.status()["metrics_url"][f"broker-{broker}"], timeout=10) as r:
        text = r.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}
