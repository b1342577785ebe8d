"""The package as a newcomer gets it: a wheel built from this checkout, installed into a clean
virtual environment (uv), first without extras, then with the spark extra only.

- Without extras, ``odradek dev up`` stops before starting anything and names the extra to
  install (or ``--no-gateway``), and ``--no-gateway`` does start a cluster.
- The console's static files (HTML, CSS, JS modules) are package data of the wheel.
- With ``odradek[spark]`` (pyspark, pyarrow, httpx, the codecs' fastavro, jsonschema, protobuf, and
  nothing else), ``spark-submit`` of a job using ``format("odradek")`` with no registration call
  reads a topic and writes one.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import pytest

from odradek.client import GatewayClient
from odradek.dev.harness import Cluster, stop_cluster
from tests.support.spark import spark_env
from tests.support.tools import tool_missing

ROOT = Path(__file__).resolve().parents[2]
JOB = '''
import sys
from pyspark.sql import SparkSession

gateway, source, target = sys.argv[1:]
spark = SparkSession.builder.appName("wheel-check").getOrCreate()
rows = (spark.read.format("odradek").option("gateway", gateway).option("subscribe", source)
        .option("startingOffsets", "earliest").load())
rows.selectExpr("key", "upper(CAST(value AS STRING)) AS value").write.format("odradek") \\
    .option("gateway", gateway).option("topic", target).mode("append").save()
spark.stop()
'''


def _uv() -> str:
    found = shutil.which("uv") or next((str(p) for p in (Path.home() / ".local/bin/uv",) if p.exists()), None)
    if found is None:
        tool_missing("uv (scripts/bootstrap.sh installs it)")
    return found


def _run(argv: list, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, stdin=subprocess.DEVNULL, **kw)
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def clean_venv(tmp_path_factory) -> dict:
    uv, tmp = _uv(), tmp_path_factory.mktemp("wheel")
    _run([uv, "build", "--wheel", "--out-dir", tmp / "dist", ROOT], timeout=300)
    wheel = next((tmp / "dist").glob("odradek-*.whl"))
    _run([uv, "venv", "--python", sys._base_executable, tmp / "venv"], timeout=120)
    python = tmp / "venv" / "bin" / "python"
    _run([uv, "pip", "install", "--python", python, wheel], timeout=300)
    return {"uv": uv, "wheel": wheel, "python": python, "bin": python.parent, "tmp": tmp}


def test_the_wheel_ships_the_console_files(clean_venv):
    names = set(zipfile.ZipFile(clean_venv["wheel"]).namelist())
    console = sorted(n for n in names if n.startswith("odradek/gateway/console/"))
    assert {"odradek/gateway/console/index.html", "odradek/gateway/console/console.css",
            "odradek/gateway/console/js/app.js", "odradek/gateway/console/js/views/groups.js"} <= names, console


def test_dev_up_without_the_gateway_extra_stops_naming_it_and_no_gateway_starts(clean_venv):
    odradek, data = clean_venv["bin"] / "odradek", clean_venv["tmp"] / "dev"
    proc = subprocess.run([odradek, "dev", "up", "--detach", "--data-dir", data], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'odradek[gateway]'" in proc.stderr and "--no-gateway" in proc.stderr, proc.stderr
    assert "uvicorn" in proc.stderr and not data.exists(), "nothing may start before the check"
    gateway = subprocess.run([odradek, "gateway", "--bootstrap-servers", "127.0.0.1:9"], capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert gateway.returncode == 2 and "pip install 'odradek[gateway]'" in gateway.stderr, gateway.stderr
    cluster = Cluster(data_dir=data)
    try:
        up = subprocess.run([odradek, "dev", "up", "--detach", "--no-gateway", "--brokers", "1", "--kafka-port", "0",
                             "--data-dir", data], capture_output=True, text=True, timeout=180,
                            stdin=subprocess.DEVNULL)
        assert up.returncode == 0, up.stderr
        status = cluster.status()
        assert len(status["brokers"]) == 1 and status["gateway"] is None
    finally:
        stop_cluster(cluster)


def test_spark_submit_with_only_the_spark_extra_reads_and_writes_through_format_odradek(clean_venv, docs_cluster,
                                                                                         tmp_path):
    _run([clean_venv["uv"], "pip", "install", "--python", clean_venv["python"], f"{clean_venv['wheel']}[spark]"],
         timeout=600)
    source, target = f"wheel-in-{uuid.uuid4().hex[:6]}", f"wheel-out-{uuid.uuid4().hex[:6]}"
    docs_cluster.create_topic(source, partitions=2, replication_factor=3)
    docs_cluster.create_topic(target, partitions=1, replication_factor=3)
    with GatewayClient(docs_cluster.gateway) as gw:
        assert all(r.error_code is None for r in gw.produce(source, [{"value": b"v%d" % i} for i in range(50)]))
    job = tmp_path / "job.py"
    job.write_text(JOB)
    python = str(clean_venv["python"])
    env = {**os.environ, **spark_env(tmp_path), "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}
    env.pop("PYTHONPATH", None)
    _run([clean_venv["bin"] / "spark-submit", "--master", "local[2]", "--conf", f"spark.local.dir={tmp_path}",
          "--conf", "spark.ui.enabled=false", job, docs_cluster.gateway, source, target], env=env, timeout=600)
    with GatewayClient(docs_cluster.gateway) as gw:  # the job's writes were acknowledged (acks=all)
        records, _ = gw.read_json(target, 0, 0)
    assert sorted(base64.b64decode(r["value"]).decode() for r in records) == sorted(f"V{i}" for i in range(50))
