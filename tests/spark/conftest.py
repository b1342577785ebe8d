"""One local SparkSession per module (start-up costs ~5 s), with the pitfalls known here:
the workers run this interpreter, Spark binds loopback, scratch space in the test's tmp dir."""

from __future__ import annotations

import os
import sys

import pytest

from tests.gateway.conftest import gw_cluster  # noqa: F401  (a dev cluster with its gateway)


def spark_env(tmp) -> dict[str, str]:
    return {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_DIRS": str(tmp)}


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession
    import odradek.spark
    tmp = tmp_path_factory.mktemp("spark")
    os.environ.update(spark_env(tmp))
    session = (SparkSession.builder.master("local[2]").appName("odradek-tests")
               .config("spark.local.dir", str(tmp)).config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    odradek.spark.register(session)
    yield session
    session.stop()
