"""Fixtures of the client acceptance tests (the ``cluster`` fixture is the root conftest's).

- ``shared_cluster`` (package): one dev cluster of 3 brokers for the modules that only create
  their own distinctly named topics and never stop a broker nor change a broker-wide setting
  (admin, bad_input, clients, compression, retention: their module-scoped ``cluster`` is it);
  each cluster start and stop it saves is ~20 s of CI. Durability and leadership kill brokers
  and fetch counts the brokers' fetch sessions: they keep a cluster of their own.

- ``dataset``: the record generator and the verifier (``tests.support.records``).
- ``clients``: produce and consume with each Kafka client (``tests.support.clients``).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from odradek.dev.harness import Cluster, start_cluster, stop_cluster
from odradek.dev.waiting import wait_until
from tests.support import clients as kafka_clients
from tests.support.records import Got, Sent, make_records, verify


@pytest.fixture(scope="session")
def dataset():
    return SimpleNamespace(make=make_records, verify=verify, Sent=Sent, Got=Got, wait_until=wait_until)


@pytest.fixture(scope="session")
def clients():
    c = kafka_clients
    return SimpleNamespace(confluent_produce=c.confluent_produce, confluent_consume=c.confluent_consume,
                           kafka_python_produce=c.kafka_python_produce, kafka_python_consume=c.kafka_python_consume,
                           aiokafka_produce=c.aiokafka_produce, aiokafka_consume=c.aiokafka_consume,
                           PRODUCE_TIMEOUT_S=c.PRODUCE_TIMEOUT_S, CONSUME_TIMEOUT_S=c.CONSUME_TIMEOUT_S)


@pytest.fixture(scope="package")
def shared_cluster(tmp_path_factory) -> Cluster:
    c = start_cluster(tmp_path_factory.mktemp("shared-cluster"), brokers=3)
    yield c
    stop_cluster(c)
