"""Running PySpark here: the environment a local SparkSession needs, and an interpreter that
sees this venv's libraries but not the odradek packages (as a Spark worker without them)."""

from __future__ import annotations

import os
import site
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path


# Spark's defaults (SPARK_CONF_DIR) for every JVM the tests start, spark-submit or a PySpark
# session: what runs is Spark's start and small jobs, so C1 alone (no C2 compiles of code run
# once), the serial collector (two cores), no web UI, a few shuffle partitions. A spark-submit of
# examples/spark_counts_by_key.py took 54 and 64 s without them, 41 and 38 s with them (2 cores,
# load ~7, 2026-11-29). Nothing a test checks depends on them. Not for ``local_session``.
SPARK_DEFAULTS = ("spark.ui.enabled false\n"
                  "spark.sql.shuffle.partitions 4\n"
                  "spark.driver.extraJavaOptions -XX:TieredStopAtLevel=1 -XX:+UseSerialGC\n")


def spark_env(tmp) -> dict[str, str]:
    conf = Path(tmp) / "spark-conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "spark-defaults.conf").write_text(SPARK_DEFAULTS)
    return {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_DIRS": str(tmp), "SPARK_CONF_DIR": str(conf)}


@contextmanager
def local_session(tmp: Path):
    """A local[2] SparkSession (start-up ~5 s), its scratch space in ``tmp``; stopped on exit."""
    from pyspark.sql import SparkSession

    # not SPARK_DEFAULTS' C1-only JIT: this JVM lives through a whole package of jobs (streaming
    # micro-batches among them), where C2's compiled code pays for itself
    os.environ.update({k: v for k, v in spark_env(tmp).items() if k != "SPARK_CONF_DIR"})
    session = (SparkSession.builder.master("local[2]").appName("odradek-tests")
               .config("spark.local.dir", str(tmp)).config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    try:
        yield session
    finally:
        session.stop()


def python_without_odradek(where: Path) -> str:
    """An interpreter that sees this venv's libraries (pyspark, pyarrow, httpx) but not the
    odradek packages: a bare venv whose .pth adds the site-packages directory as a plain path,
    so the editable install's own .pth there is not processed."""
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(where)], check=True)
    site_packages = next(where.glob("lib/python*/site-packages"))
    (site_packages / "main_venv.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    python = str(where / "bin" / "python")
    probe = subprocess.run([python, "-c", "import odradek.spark"], capture_output=True)
    assert probe.returncode != 0, "the bare interpreter still finds odradek"
    return python
