"""One local SparkSession per module (start-up costs ~5 s), with the pitfalls known here:
the workers run this interpreter, Spark binds loopback, scratch space in the test's tmp dir.
The dev cluster with its gateway is the root conftest's ``gw_cluster``."""

from __future__ import annotations

import pytest

from tests.support.spark import local_session


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    with local_session(tmp_path_factory.mktemp("spark")) as session:
        yield session
