"""The transaction APIs' wire handlers on fakes: Kafka's authorization answers (the
TRANSACTIONAL_ID resource, topics, OPERATION_NOT_ATTEMPTED), unknown partitions, and the
admin APIs' filters (ListTransactions leaves out what the principal may not describe)."""

import asyncio
from types import SimpleNamespace

from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.list_transactions.v1.request import ListTransactionsRequest

from odradek.broker.handlers import transactions as h
from odradek.protocol.api_keys import ApiKey
from odradek.broker.security.acl import Operation, ResourceType
from odradek.broker.txn.metadata import TxnState
from odradek.errors import ErrorCode as E
from odradek.protocol.codec import encode_response, make
from tests.transactions.test_coordinator import Harness

OPEN, SECRET = "open-tx", "secret-tx"


class Deny:
    """An authorizer allowing everything but the (operation, type, name) triples given."""

    def __init__(self, *denied) -> None:
        self.denied = set(denied)

    def authorize(self, who, op, rtype, name, log_denied=True):
        return (op, rtype, name) not in self.denied


def context(*denied):
    harness = Harness()
    topics = {"out": SimpleNamespace(partitions=[0, 1])}
    return harness, SimpleNamespace(authorizer=Deny(*denied), txn=SimpleNamespace(coordinator=harness.coord),
                                    replicas=SimpleNamespace(topic=topics.get))


def call(handler, ctx, version, req):
    return asyncio.run(handler(ctx, SimpleNamespace(api_version=version), req))


def add(tid, *topics):
    return AddPartitionsToTxnRequest(v3_and_below_transactional_id=tid, v3_and_below_producer_id=1001,
                                     v3_and_below_producer_epoch=0, v3_and_below_topics=tuple(
                                         AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics))


def codes(response):
    return {(t.name, p.partition_index): p.partition_error_code
            for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}


def test_add_partitions_checks_the_transactional_id_then_each_topic():
    harness, ctx = context((Operation.WRITE, ResourceType.TRANSACTIONAL_ID, SECRET),
                           (Operation.WRITE, ResourceType.TOPIC, "private"))
    asyncio.run(harness.coord.init_producer_id(OPEN, 60_000, None))
    assert set(codes(call(h.add_partitions_to_txn, ctx, 3, add(SECRET, ("out", (0,))))).values()) == {
        E.transactional_id_authorization_failed}
    assert codes(call(h.add_partitions_to_txn, ctx, 3, add(OPEN, ("out", (0, 7)), ("private", (0,))))) == {
        ("out", 0): E.operation_not_attempted, ("out", 7): E.unknown_topic_or_partition,
        ("private", 0): E.topic_authorization_failed}
    assert codes(call(h.add_partitions_to_txn, ctx, 3, add(OPEN, ("out", (0, 1))))) == {
        ("out", 0): E.none, ("out", 1): E.none}
    end = EndTxnRequest(transactional_id=SECRET, producer_id=1001, producer_epoch=0, committed=True)
    assert call(h.end_txn, ctx, 3, end).error_code == E.transactional_id_authorization_failed


def test_admin_apis_describe_only_what_the_principal_may():
    harness, ctx = context((Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, SECRET))
    for tid in (OPEN, SECRET):
        asyncio.run(harness.coord.init_producer_id(tid, 60_000, None))
    listed = call(h.list_transactions, ctx, 1, ListTransactionsRequest(
        state_filters=("Empty", "Sleeping"), producer_id_filters=(), duration_filter=-1))
    assert [t.transactional_id for t in listed.transaction_states] == [OPEN]
    assert (listed.error_code, listed.unknown_state_filters) == (E.none, ("Sleeping",))
    described = call(h.describe_transactions, ctx, 0, DescribeTransactionsRequest(
        transactional_ids=(OPEN, SECRET, "nobody")))
    assert [(s.error_code, s.transaction_state) for s in described.transaction_states] == [
        (E.none, "Empty"), (E.transactional_id_authorization_failed, ""), (E.transactional_id_not_found, "")]
    # no transaction started: Kafka's -1 as the start time, on the wire
    encoded = bytes(encode_response(ApiKey.DESCRIBE_TRANSACTIONS, 0, 1, described))
    assert b"Empty" + (60_000).to_bytes(4, "big") + b"\xff" * 8 in encoded   # state, timeout, start time


# -- Kafka 3.9's versions ------------------------------------------------------------------------
def batch(*txns, version=4):
    from kio.index import load_request_schema
    s = load_request_schema(ApiKey.ADD_PARTITIONS_TO_TXN, version)
    mod = __import__(s.__module__, fromlist=["x"])
    return s(transactions=tuple(mod.AddPartitionsToTxnTransaction(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=verify, topics=tuple(
            mod.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics))
        for tid, pid, epoch, verify, topics in txns))


def batch_codes(response):
    return {r.transactional_id: {(t.name, p.partition_index): p.partition_error_code
                                 for t in r.topic_results for p in t.results_by_partition}
            for r in response.results_by_transaction}


def test_add_partitions_v4_v5_verify_only_batches_of_transactions_from_brokers():
    harness, ctx = context()
    pid, epoch = asyncio.run(harness.coord.init_producer_id(OPEN, 60_000, None))[1:]
    assert codes(call(h.add_partitions_to_txn, ctx, 3, add(OPEN, ("out", (0,))))) == {("out", 0): E.none}
    for version in (4, 5):
        response = call(h.add_partitions_to_txn, ctx, version, batch(
            (OPEN, pid, epoch, True, (("out", (0, 1)),)),     # out-0 is in the transaction, out-1 not
            (OPEN + "-x", 7, 0, True, (("out", (0,)),)),       # an id the coordinator does not know
            ("", 7, 0, True, (("out", (0,)),)), version=version))
        assert response.error_code == E.none
        assert batch_codes(response) == {
            OPEN: {("out", 0): E.none, ("out", 1): E.transaction_abortable},
            OPEN + "-x": {("out", 0): E.invalid_producer_id_mapping}, "": {("out", 0): E.invalid_request}}
    fenced = call(h.add_partitions_to_txn, ctx, 4, batch((OPEN, pid, epoch + 1, True, (("out", (0,)),))))
    assert batch_codes(fenced) == {OPEN: {("out", 0): E.producer_fenced}}
    # not verify_only: the partitions are added, as a client's request would
    added = call(h.add_partitions_to_txn, ctx, 5, batch((OPEN, pid, epoch, False, (("out", (1, 9)),))))
    assert batch_codes(added) == {OPEN: {("out", 1): E.operation_not_attempted,
                                         ("out", 9): E.unknown_topic_or_partition}}
    added = call(h.add_partitions_to_txn, ctx, 5, batch((OPEN, pid, epoch, False, (("out", (1,)),))))
    assert batch_codes(added) == {OPEN: {("out", 1): E.none}}
    # a transaction being completed (its markers in flight): CONCURRENT_TRANSACTIONS
    harness.coord.owned[0].txns[OPEN].state = TxnState.PREPARE_COMMIT
    busy = call(h.add_partitions_to_txn, ctx, 5, batch((OPEN, pid, epoch, True, (("out", (0,)),))))
    assert batch_codes(busy) == {OPEN: {("out", 0): E.concurrent_transactions}}


def test_add_partitions_v4_needs_cluster_action():
    _, ctx = context((Operation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster"))
    response = call(h.add_partitions_to_txn, ctx, 4, batch((OPEN, 1, 0, True, (("out", (0,)),))))
    assert (response.error_code, response.results_by_transaction) == (E.cluster_authorization_failed, ())


def test_producer_fenced_is_invalid_producer_epoch_for_versions_before_it():
    harness, ctx = context()
    pid, epoch = asyncio.run(harness.coord.init_producer_id(OPEN, 60_000, None))[1:]
    asyncio.run(harness.coord.init_producer_id(OPEN, 60_000, None))   # a newer instance: epoch + 1
    old = EndTxnRequest(transactional_id=OPEN, producer_id=pid, producer_epoch=epoch, committed=True)
    assert call(h.end_txn, ctx, 2, old).error_code == E.producer_fenced
    assert call(h.end_txn, ctx, 1, old).error_code == E.invalid_producer_epoch
    assert set(codes(call(h.add_partitions_to_txn, ctx, 1, add(OPEN, ("out", (0,))))).values()) == {
        E.invalid_producer_epoch}


def test_the_transaction_apis_advertise_kafka_39s_versions():
    from odradek.broker.handlers import _TABLE
    kafka_39 = {22: (0, 5), 24: (0, 5), 25: (0, 4), 26: (0, 4), 27: (0, 1), 28: (0, 4), 65: (0, 0), 66: (0, 1)}
    assert {key: _TABLE[key][:2] for key in kafka_39} == kafka_39


def test_write_txn_markers_v0_is_the_non_flexible_v1():
    """Kafka 3.9 serves WriteTxnMarkers 0-1; kio has no v0: ``legacy_schemas`` does."""
    import io
    import struct

    from kio.serial import entity_writer

    from odradek.protocol import legacy_schemas as legacy
    from odradek.protocol.codec import Schemas, decode_request
    buf = io.BytesIO()
    entity_writer(legacy.RequestHeader)(buf, legacy.RequestHeader(
        request_api_key=27, request_api_version=0, correlation_id=5, client_id="broker-1"))
    entity_writer(legacy.WriteTxnMarkersRequest)(buf, legacy.WriteTxnMarkersRequest(markers=(legacy.WritableTxnMarker(
        producer_id=7, producer_epoch=1, transaction_result=True, coordinator_epoch=3,
        topics=(legacy.WritableTxnMarkerTopic(name="t", partition_indexes=(0, 2)),)),)))
    frame = buf.getvalue()
    header, body = decode_request(memoryview(frame))
    assert (header.api_version, header.correlation_id) == (0, 5)
    assert [(m.producer_id, m.coordinator_epoch, m.topics[0].partition_indexes)
            for m in body.markers] == [(7, 3, (0, 2))]
    # classic encoding: int32 array lengths and int16 string lengths, no tagged fields
    assert frame.endswith(struct.pack(">iqh?ihsiiii", 1, 7, 1, True, 1, 1, b"t", 2, 0, 2, 3))
    s = Schemas(27, 0)
    response = make(s.WriteTxnMarkersResponse, markers=(make(s.WritableTxnMarkerResult, producer_id=7, topics=(
        make(s.WritableTxnMarkerTopicResult, name="t", partitions=(make(
            s.WritableTxnMarkerPartitionResult, partition_index=0, error_code=E.none),)),)),))
    assert bytes(encode_response(27, 0, 5, response)) == struct.pack(
        ">iiiqihsiih", 33, 5, 1, 7, 1, 1, b"t", 1, 0, 0)
