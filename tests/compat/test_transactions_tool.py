"""Kafka's Java ``kafka-transactions`` (TransactionsCommand) lists and describes an open
transaction on Odradek as on Apache Kafka: the same columns, state, timeout and partitions;
``kafka-broker-api-versions`` shows the same versions of the transaction APIs on both."""

from __future__ import annotations

import re

from confluent_kafka import Producer

from odradek.dev.waiting import wait_until
from tests.support.kafka_tools import BROKER_API_VERSIONS, TRANSACTIONS_COMMAND

TXN_APIS = ("InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "WriteTxnMarkers",
            "TxnOffsetCommit", "DescribeTransactions", "ListTransactions")


def ok(proc) -> str:
    assert proc.returncode == 0, f"exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc.stdout


def table(text: str) -> list[dict[str, str]]:
    """The tool's whitespace-separated table as one dict per row, keyed by the header."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    header = lines[0]
    return [dict(zip(header, row)) for row in lines[1:]]


def open_transaction(bootstrap: str, tid: str, topic: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 120_000})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(topic, value=b"open", partition=1)
    assert p.flush(30) == 0
    return p


def seen(endpoint, topic: str) -> tuple:
    tid = f"{topic}-tx"
    endpoint.create_topic(topic, 2)
    producer = open_transaction(endpoint.bootstrap, tid, topic)
    try:
        listed = [r for r in table(ok(endpoint.tool(TRANSACTIONS_COMMAND, "list"))) if r["TransactionalId"] == tid]
        described = table(ok(endpoint.tool(TRANSACTIONS_COMMAND, "describe", "--transactional-id", tid)))
    finally:
        producer.abort_transaction(30)
    # the abort's markers are written after EndTxn's answer: CompleteAbort follows them
    def aborted():
        rows = table(ok(endpoint.tool(TRANSACTIONS_COMMAND, "describe", "--transactional-id", tid)))
        return rows if rows[0]["TransactionState"] == "CompleteAbort" else None
    return listed, described, wait_until(aborted, 60, f"{tid} CompleteAbort", 0.5)


def test_kafka_transactions_list_and_describe(both, topic):
    results = {endpoint.name: seen(endpoint, f"{topic}-{endpoint.name}") for endpoint in both}
    for name, (listed, described, after) in results.items():
        assert [r["TransactionState"] for r in listed] == ["Ongoing"], (name, listed)
        assert listed[0]["ProducerId"] == described[0]["ProducerId"]
        row = described[0]
        assert (row["TransactionState"], row["TransactionTimeoutMs"], row["ProducerEpoch"]) == (
            "Ongoing", "120000", "0"), (name, row)
        assert row["TopicPartitions"] == f"{topic}-{name}-1", (name, row)
        assert int(row["CurrentTransactionStartTimeMs"]) > 0 and int(row["TransactionDurationMs"]) >= 0
        assert after[0]["ProducerId"] == row["ProducerId"], (name, after)
    assert [list(r) for r in results["odradek"][1]] == [list(r) for r in results["kafka"][1]]


def txn_api_versions(endpoint) -> dict[str, str]:
    """{API: "0 to 5 [usable: 5]"} of the transaction APIs, as kafka-broker-api-versions prints them."""
    found = re.findall(r"\b(\w+)\(\d+\): ([^,\n]+)", ok(endpoint.tool(BROKER_API_VERSIONS)))
    return {name: versions.strip() for name, versions in found if name in TXN_APIS}


def test_transaction_api_versions_are_kafka_39s(both):
    kafka, odradek = both
    expected = txn_api_versions(kafka)
    assert set(expected) == set(TXN_APIS), expected
    assert txn_api_versions(odradek) == expected
