"""One local SparkSession and one dev cluster with its gateway for the whole tests/spark package
(each Spark start and each cluster start/stop costs CI seconds; the modules' topics are uuid-named
and no test stops a broker, so they share both), with the pitfalls known here: the workers run
this interpreter, Spark binds loopback, scratch space in a tmp dir. ``gw_cluster`` overrides the
root conftest's module-scoped one for this package."""

from __future__ import annotations

import pytest

from odradek.dev.harness import Cluster
from tests.support.gateway import cluster_with_gateway
from tests.support.spark import local_session


@pytest.fixture(scope="package")
def spark(tmp_path_factory):
    with local_session(tmp_path_factory.mktemp("spark")) as session:
        yield session


@pytest.fixture(scope="package")
def gw_cluster(tmp_path_factory) -> Cluster:
    with cluster_with_gateway(tmp_path_factory.mktemp("spark-gateway")) as c:
        yield c
