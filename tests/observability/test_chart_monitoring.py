"""The chart's monitoring (issue 19, item 3), without a cluster: ``helm template`` with the
options off (nothing from monitoring.coreos.com) and on (PodMonitors, the PrometheusRule, the
dashboard ConfigMap); ``promtool check rules`` on the rendered PrometheusRule's groups and
``promtool test rules`` with a unit case per alert (prometheus-rules.test.yaml). That the
dashboard's queries name only exported metrics is checked against a live scrape in
test_prometheus.py."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.k8s import build
from tests.support.monitoring import DASHBOARD, alert_names, panel_queries
from tests.support.tools import tool_missing

pytestmark = pytest.mark.k8s  # helm, built with the Kubernetes binaries

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "odradek"
UNIT_TESTS = Path(__file__).with_name("prometheus-rules.test.yaml")
ALL_ON = ["--set", "metrics.podMonitor.enabled=true,metrics.prometheusRule.enabled=true,"
          "metrics.grafanaDashboard.enabled=true,metrics.podMonitor.labels.release=kps"]


@pytest.fixture(scope="module")
def helm() -> Path:
    path, why = build("helm")  # the pinned helm in .cache/k8s, built once
    if path is None:
        tool_missing(why)
    return path


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        tool_missing("promtool (Debian's prometheus package) is not installed: make test-tools runs scripts/prometheus.sh")
    return path


def run(*argv) -> str:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{' '.join(map(str, argv))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def render(helm: Path, *options: str) -> dict[tuple[str, str], dict]:
    out = run(helm, "template", "rel", CHART, "--namespace", "ops", *options)
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out) if d}


def test_monitoring_is_off_by_default_and_the_operator_serves_metrics(helm):
    docs = render(helm)
    assert not [k for k in docs if k[0] in ("PodMonitor", "PrometheusRule", "ConfigMap")]
    container = docs["Deployment", "rel-odradek"]["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "metrics", "containerPort": 9404} in container["ports"]
    assert container["args"][container["args"].index("--metrics-port") + 1] == "9404"


def test_monitoring_on_renders_pod_monitors_rules_and_dashboard(helm):
    docs = render(helm, *ALL_ON)
    metrics, gateway = docs["PodMonitor", "rel-odradek-metrics"], docs["PodMonitor", "rel-odradek-gateway"]
    assert metrics["apiVersion"] == "monitoring.coreos.com/v1" and metrics["metadata"]["labels"]["release"] == "kps"
    assert [e["port"] for e in metrics["spec"]["podMetricsEndpoints"]] == ["metrics"]
    assert metrics["spec"]["selector"]["matchExpressions"][0]["values"] == ["broker", "controller", "operator"]
    assert [e["port"] for e in gateway["spec"]["podMetricsEndpoints"]] == ["http"]
    assert metrics["spec"]["namespaceSelector"] == {"any": True}
    watched = render(helm, *ALL_ON, "--set", "operator.watchNamespaces={data}")["PodMonitor", "rel-odradek-metrics"]
    assert watched["spec"]["namespaceSelector"] == {"matchNames": ["data"]}
    rule = docs["PrometheusRule", "rel-odradek"]
    assert [r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]] == alert_names()
    dashboard = docs["ConfigMap", "rel-odradek-dashboard"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["odradek.json"]) == json.loads(DASHBOARD.read_text())


def test_rendered_rules_pass_promtool_check_and_unit_tests(helm, promtool, tmp_path):
    groups = render(helm, *ALL_ON)["PrometheusRule", "rel-odradek"]["spec"]
    (tmp_path / "prometheus-rules.yaml").write_text(yaml.safe_dump(groups))
    assert "SUCCESS: 7 rules found" in run(promtool, "check", "rules", tmp_path / "prometheus-rules.yaml")
    cases = yaml.safe_load(UNIT_TESTS.read_text())["tests"]
    tested = {t["alertname"] for case in cases for t in case["alert_rule_test"] if t["exp_alerts"]}
    assert tested == set(alert_names()), "every alert has a unit case in which it fires"
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    assert "SUCCESS" in run(promtool, "test", "rules", tmp_path / UNIT_TESTS.name)


def test_dashboard_has_cluster_topic_and_group_panels():
    rows = [p["title"] for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] == "row"]
    assert rows == ["Cluster", "Topics", "Consumer groups"]
    assert all(panel_queries().values())
