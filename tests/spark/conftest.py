"""One local SparkSession per module (start-up costs ~5 s), with the pitfalls known here:
the workers run this interpreter, Spark binds loopback, scratch space in the test's tmp dir.
The dev cluster with its gateway is the root conftest's ``gw_cluster``."""

from __future__ import annotations

import os

import pytest

from tests.support.spark import spark_env


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    tmp = tmp_path_factory.mktemp("spark")
    os.environ.update(spark_env(tmp))
    session = (SparkSession.builder.master("local[2]").appName("odradek-tests")
               .config("spark.local.dir", str(tmp)).config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    yield session
    session.stop()
