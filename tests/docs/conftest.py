"""One dev cluster (3 brokers, RF 3 by default, the HTTP gateway) for the whole tests/docs
package: the docs runner and the wheel checks share it (each start costs seconds of CI).

It lives in ``<tmp>/var/dev``, the data directory ``odradek dev`` and ``odradek produce`` use
by default, so commands pasted from the docs, run from ``<tmp>``, find it as a reader's
``make up`` cluster. A cluster the docs start themselves in another directory of ``<tmp>/var``
(docs/security.md's secured one) is stopped afterwards too, should a block have failed before
its ``odradek dev down``."""

from __future__ import annotations

import pytest

from odradek.dev.harness import Cluster, start_cluster, stop_cluster


@pytest.fixture(scope="package")
def docs_cluster(tmp_path_factory) -> Cluster:
    work = tmp_path_factory.mktemp("docs")
    c = start_cluster(work / "var" / "dev", brokers=3, replication_factor=3, min_insync_replicas=2, gateway=True)
    try:
        yield c
    finally:
        for state in sorted((work / "var").glob("*/cluster.json")):
            if state.parent != c.data_dir:
                stop_cluster(Cluster(state.parent), strict=False)
        stop_cluster(c)
