"""The produce path's refusals of writes a hostile tenant must not make (issue 30), on a real
ReplicaManager and log (the replication harness, one broker) and the transaction
coordinator on fakes: Kafka 3.9's answers for transactional batches without a
transactional.id (or one the producer may not WRITE), for client appends to internal topics,
and KIP-890 part 1's verification (a partition not added to the transaction, the guard a
marker voids, no question asked once the transaction is open on the partition)."""

import asyncio
import datetime
from types import SimpleNamespace

from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from odradek.broker.handlers.produce import produce
from odradek.broker.metrics.stats import TopicStats
from odradek.broker.security.acl import Operation, ResourceType
from odradek.broker.txn.verification import TxnVerifier, produce_error
from odradek.errors import ErrorCode as E, KafkaError
from odradek.protocol.connection import ConnectionClosed
from odradek.records import ControlType, Record, build_batch
from tests.replication.harness import TOPIC, FakeController
from tests.transactions.test_coordinator import TID, Harness

TP = (TOPIC, 0)


class Deny:
    def __init__(self, *denied) -> None:
        self.denied = set(denied)

    def authorize(self, who, op, rtype, name, log_denied=True):
        return (op, rtype, name) not in self.denied


def records(pid=1001, epoch=0, seq=0, transactional=True) -> bytes:
    return bytes(build_batch([Record(b"v", b"k")], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                             transactional=transactional))


def request(data: bytes, tid: str | None = TID, topic: str = TOPIC, acks: int = -1) -> ProduceRequest:
    return ProduceRequest(transactional_id=tid, acks=acks, timeout=datetime.timedelta(seconds=10), topic_data=(
        TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=0, records=data),)),))


async def answer(ctx, req, version: int = 9) -> tuple[E, str | None]:
    response = (await produce(ctx, SimpleNamespace(api_version=version, client_id="test"), req)).body
    (p,) = response.responses[0].partition_responses
    return p.error_code, p.error_message


def scenario(body, authorizer=None):
    """Run ``body(ctx, harness, node)`` against one broker leading ``t-0`` and a coordinator
    that coordinates every transactional id (in process); counts the coordinator's verifications."""
    async def run(tmp):
        c = FakeController(replicas=(1,))
        await c.start(tmp)
        try:
            c.set_state(leader=1, leader_epoch=1, isr=(1,))
            harness, rm = Harness(), c.nodes[1].replicas
            assert rm.verify_transactions, "transaction.partition.verification.enable is true by default"
            verifier = TxnVerifier(1, rm, harness.coord, enabled=True)
            verifier._coordinator_of = lambda tid: 1
            asked = []
            verify = harness.coord.verify_partitions
            harness.coord.verify_partitions = lambda *a: asked.append(a) or verify(*a)
            ctx = SimpleNamespace(authorizer=authorizer, replicas=rm, topic_stats=TopicStats(),
                                  quotas=SimpleNamespace(enabled=lambda key: False),
                                  txn=SimpleNamespace(verifier=verifier))
            assert await harness.coord.init_producer_id(TID, 60_000, None) == (E.none, 1001, 0)
            await body(ctx, harness, c.nodes[1], asked)
        finally:
            await c.stop()
    return run


def test_a_transactional_batch_needs_a_transactional_id_it_may_write(tmp_path):
    async def body(ctx, harness, node, asked):
        assert await answer(ctx, request(records(), tid=None)) == (
            E.transactional_id_authorization_failed, "Transactional Id authorization failed.")
        assert await answer(ctx, request(records(), tid="not-mine")) == (
            E.transactional_id_authorization_failed, "Transactional Id authorization failed.")
        assert node.log.log_end_offset == 0 and not asked
        try:   # acks=0: no answer, Kafka closes the connection
            await answer(ctx, request(records(), tid=None, acks=0))
            raise AssertionError("acks=0 refusal must close the connection")
        except ConnectionClosed:
            pass
        # an idempotent (not transactional) batch needs no transactional.id
        assert (await answer(ctx, request(records(pid=77, transactional=False), tid=None)))[0] == E.none
    asyncio.run(scenario(body, Deny((Operation.WRITE, ResourceType.TRANSACTIONAL_ID, "not-mine")))(tmp_path))


def test_clients_never_append_to_internal_topics(tmp_path):
    async def body(ctx, harness, node, asked):
        for topic in ("__consumer_offsets", "__transaction_state"):
            # Kafka answers it without a message (ReplicaManager: hasCustomErrorMessage = false)
            assert await answer(ctx, request(records(transactional=False), tid=None, topic=topic)) == (
                E.invalid_topic_exception, None)
            assert await answer(ctx, request(records(), topic=topic)) == (E.invalid_topic_exception, None)
    asyncio.run(scenario(body)(tmp_path))


def test_a_partition_not_added_to_the_transaction_is_refused_then_verified_once(tmp_path):
    async def body(ctx, harness, node, asked):
        assert await answer(ctx, request(records())) == (E.invalid_txn_state,
                                                         "Partition was not added to the transaction")
        # KIP-890 part 2: a v11 producer is told the coordinator's TRANSACTION_ABORTABLE as it is
        assert await answer(ctx, request(records()), version=11) == (E.transaction_abortable, None)
        assert (await answer(ctx, request(records()), version=10))[0] == E.invalid_txn_state
        assert node.log.log_end_offset == 0 and len(asked) == 3
        assert await harness.coord.add_partitions(TID, 1001, 0, {TP}) == E.none
        assert (await answer(ctx, request(records(seq=0))))[0] == E.none
        assert (await answer(ctx, request(records(seq=1))))[0] == E.none
        assert len(asked) == 4, "once the transaction is open on the partition the leader asks no more"
        assert len(node.replicas.leader(*TP).partition.verifications) == 0
        # another producer id for the same transactional id: the coordinator's INVALID_PRODUCER_ID_MAPPING
        assert (await answer(ctx, request(records(pid=5555))))[0] == E.invalid_producer_id_mapping
    asyncio.run(scenario(body)(tmp_path))


def test_a_marker_voids_a_verification_in_flight(tmp_path):
    """The hanging transaction KIP-890 closes: verified, then the transaction ends (its marker)
    before the batch is appended; the late batch must not open a new transaction."""
    async def body(ctx, harness, node, asked):
        rm = node.replicas
        guard = rm.start_verification(*TP, 1001, 0)
        assert guard is not None and rm.start_verification(*TP, 1001, 0) is guard   # shared while in flight
        rm.append_marker(*TP, ControlType.ABORT, 1001, 0, 7)
        try:
            rm.append(*TP, memoryview(bytearray(records())), guard=guard)
            raise AssertionError("a voided guard must not append")
        except KafkaError as e:
            assert (e.code, e.message) == (E.invalid_txn_state, "Record was not part of an ongoing transaction")
        try:
            rm.append(*TP, memoryview(bytearray(records())))
            raise AssertionError("a transactional batch without a guard must not append")
        except KafkaError as e:
            assert e.code == E.invalid_txn_state
        fresh = rm.start_verification(*TP, 1001, 0)
        assert fresh is not guard
        assert rm.append(*TP, memoryview(bytearray(records())), guard=fresh).records_count == 1
        assert rm.start_verification(*TP, 1001, 0) is None    # open on the partition: nothing to verify
    asyncio.run(scenario(body)(tmp_path))


def test_coordinator_answers_become_kafkas_produce_errors():
    assert produce_error(E.none) is None
    assert (produce_error(E.transaction_abortable).code, produce_error(E.transaction_abortable).message) == (
        E.invalid_txn_state, "Partition was not added to the transaction")
    assert produce_error(E.producer_fenced).code == E.invalid_producer_epoch
    for retriable in (E.not_coordinator, E.coordinator_not_available, E.coordinator_load_in_progress,
                      E.concurrent_transactions, E.network_exception):
        error = produce_error(retriable)
        assert error.code == E.not_enough_replicas and error.message.endswith(retriable.name.upper())
    assert produce_error(E.invalid_producer_id_mapping).code == E.invalid_producer_id_mapping
