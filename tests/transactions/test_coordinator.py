"""The transaction coordinator's state machine on fakes (no cluster): Kafka's answers for
InitProducerId (epoch bump, fencing, KIP-360 recovery, a transaction open at re-init),
AddPartitionsToTxn, EndTxn (markers, then the Complete state), timeouts, id expiry, and
the ``__transaction_state`` records written (Kafka's TransactionLog format)."""

import asyncio

import pytest

from odradek.broker.txn.config import TxnConfig
from odradek.broker.txn.coordinator import Owned, TransactionCoordinator
from odradek.broker.txn.metadata import TxnState
from odradek.broker.txn.records import TxnLogValue, decode_key, decode_value, txn_key, txn_value
from odradek.broker.txn.timers import TxnTimers
from odradek.errors import ErrorCode as E
from odradek.records import iter_batches, iter_records

S = TxnState
TID = "app-1"
T0 = ("out", 0)


class FakeMarkers:
    def __init__(self) -> None:
        self.sent = []   # (producer id, epoch, commit, coordinator epoch, partitions)

    async def send(self, producer_id, epoch, commit, coordinator_epoch, partitions, still_valid):
        self.sent.append((producer_id, epoch, commit, coordinator_epoch, frozenset(partitions)))
        partitions.clear()
        return True

    def close(self):
        pass


class Harness:
    def __init__(self, max_timeout_ms: int = 900_000) -> None:
        self.clock = 1_000_000
        self.log: list[tuple[str, TxnLogValue | None]] = []
        self.next_pid = 1000
        self.markers = FakeMarkers()
        self.coord = TransactionCoordinator(1, TxnConfig(partitions=1, max_timeout_ms=max_timeout_ms),
                                            self._append, self._allocate, self.markers, now_ms=lambda: self.clock)
        self.coord.owned[0] = Owned(epoch=7, loaded=True)

    async def _append(self, partition, batch):
        for b in iter_batches(memoryview(batch)):
            for r in iter_records(b):
                self.log.append((decode_key(r.key), None if r.value is None else decode_value(r.value)))

    async def _allocate(self):
        self.next_pid += 1
        return self.next_pid

    def md(self, tid=TID):
        return self.coord.owned[0].txns[tid]


def run(coro):
    return asyncio.run(coro)


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


def test_init_bumps_the_epoch_and_fences_the_older_instance():
    async def scenario():
        h = Harness()
        c = h.coord
        assert await c.init_producer_id(TID, 60_000, None) == (E.none, 1001, 0)
        assert await c.init_producer_id(TID, 60_000, None) == (E.none, 1001, 1)   # a new instance
        assert await c.add_partitions(TID, 1001, 0, {T0}) == E.producer_fenced    # the zombie
        assert await c.end_txn(TID, 1001, 0, True) == E.producer_fenced
        assert await c.add_partitions(TID, 1001, 1, {T0}) == E.none
        assert await c.add_partitions(TID, 999, 1, {T0}) == E.invalid_producer_id_mapping
        assert await c.add_partitions("other", 1001, 1, {T0}) == E.invalid_producer_id_mapping
        assert h.md().state == S.ONGOING
    run(scenario())


def test_commit_writes_prepare_then_markers_then_complete():
    async def scenario():
        h = Harness()
        c = h.coord
        await c.init_producer_id(TID, 60_000, None)
        h.clock += 5
        assert await c.add_partitions(TID, 1001, 0, {T0, ("out", 1)}) == E.none
        assert await c.add_partitions(TID, 1001, 0, {T0}) == E.none   # already in: nothing written
        assert await c.end_txn(TID, 1001, 0, True) == E.none
        await settle()
        assert h.markers.sent == [(1001, 0, True, 7, frozenset({T0, ("out", 1)}))]
        states = [(v.status, v.partitions) for _, v in h.log]
        assert states == [(S.EMPTY, ()), (S.ONGOING, (T0, ("out", 1))), (S.PREPARE_COMMIT, (T0, ("out", 1))),
                          (S.COMPLETE_COMMIT, ())]
        assert h.log[1][1].start_ms == 1_000_005
        assert h.md().state == S.COMPLETE_COMMIT
        assert await c.end_txn(TID, 1001, 0, True) == E.none            # a retry of the finished commit
        assert await c.end_txn(TID, 1001, 0, False) == E.invalid_txn_state
        assert await c.add_partitions(TID, 1001, 0, {T0}) == E.none     # the next transaction
        assert h.md().state == S.ONGOING
    run(scenario())


def test_end_txn_answers_concurrent_transactions_while_markers_are_pending():
    async def scenario():
        h = Harness()
        c = h.coord
        release = asyncio.Event()

        async def slow_send(*args):
            await release.wait()
            args[4].clear()
            return True
        h.markers.send = slow_send
        await c.init_producer_id(TID, 60_000, None)
        await c.add_partitions(TID, 1001, 0, {T0})
        assert await c.end_txn(TID, 1001, 0, False) == E.none
        assert await c.end_txn(TID, 1001, 0, False) == E.concurrent_transactions
        assert await c.add_partitions(TID, 1001, 0, {T0}) == E.concurrent_transactions
        assert await c.init_producer_id(TID, 60_000, None) == (E.concurrent_transactions, -1, -1)
        release.set()
        await settle()
        assert h.md().state == S.COMPLETE_ABORT
    run(scenario())


def test_init_during_an_open_transaction_aborts_it_with_a_bumped_epoch():
    async def scenario():
        h = Harness()
        c = h.coord
        await c.init_producer_id(TID, 60_000, None)
        await c.add_partitions(TID, 1001, 0, {T0})
        assert await c.init_producer_id(TID, 60_000, None) == (E.concurrent_transactions, -1, -1)
        await settle()
        assert h.markers.sent == [(1001, 1, False, 7, frozenset({T0}))]   # markers fence epoch 0
        assert h.md().state == S.COMPLETE_ABORT
        assert await c.init_producer_id(TID, 60_000, None) == (E.none, 1001, 2)
        assert await c.end_txn(TID, 1001, 0, True) == E.producer_fenced
    run(scenario())


def test_kip_360_recovery_bumps_for_the_current_producer_only():
    async def scenario():
        h = Harness()
        c = h.coord
        await c.init_producer_id(TID, 60_000, None)
        assert await c.init_producer_id(TID, 60_000, (1001, 0)) == (E.none, 1001, 1)
        assert await c.init_producer_id(TID, 60_000, (1001, 0)) == (E.none, 1001, 1)  # retry: same answer
        assert await c.init_producer_id(TID, 60_000, (1001, 5)) == (E.producer_fenced, -1, -1)
        assert await c.init_producer_id(TID, 60_000, (77, 0)) == (E.producer_fenced, -1, -1)
    run(scenario())


def test_timeout_bounds_and_routing_errors():
    async def scenario():
        h = Harness(max_timeout_ms=10_000)
        c = h.coord
        assert (await c.init_producer_id(TID, 10_001, None))[0] == E.invalid_transaction_timeout
        assert (await c.init_producer_id(TID, 0, None))[0] == E.invalid_transaction_timeout
        assert (await c.init_producer_id("", 1000, None))[0] == E.invalid_request
        c.owned[0].loaded = False
        with pytest.raises(Exception) as e:
            await c.init_producer_id(TID, 1000, None)
        assert e.value.code == E.coordinator_load_in_progress
        del c.owned[0]
        with pytest.raises(Exception) as e:
            c.describe(TID)
        assert e.value.code == E.not_coordinator
    run(scenario())


def test_a_hung_transaction_is_fenced_and_aborted_at_its_timeout():
    async def scenario():
        h = Harness()
        c = h.coord
        timers = TxnTimers(c)
        await c.init_producer_id(TID, 1_000, None)
        await c.add_partitions(TID, 1001, 0, {T0})
        h.clock += 1_000
        assert timers.abort_timed_out() == 0
        h.clock += 1
        assert timers.abort_timed_out() == 1
        await settle()
        assert h.markers.sent == [(1001, 1, False, 7, frozenset({T0}))]
        assert (h.md().state, h.md().producer_epoch) == (S.COMPLETE_ABORT, 1)
        assert await c.add_partitions(TID, 1001, 0, {T0}) == E.producer_fenced
    run(scenario())


def test_a_request_cancelled_mid_write_still_completes_its_transition():
    """A client that disconnects cancels its request's handler while the coordinator waits for
    its write to replicate; the transition must still complete, or it stays pending: every
    later request answered CONCURRENT_TRANSACTIONS and the timeout never aborted the transaction."""
    async def scenario():
        h = Harness()
        c = h.coord
        await c.init_producer_id(TID, 1_000, None)
        replicated = asyncio.Event()
        append = h.coord._append_batch

        async def slow_append(partition, batch):
            await replicated.wait()
            await append(partition, batch)
        c._append_batch = slow_append
        for request in (c.add_partitions(TID, 1001, 0, {T0}), c.end_txn(TID, 1001, 0, True)):
            handler = asyncio.ensure_future(request)
            await settle()
            handler.cancel()          # the connection closed
            await settle()
            replicated.set()          # the write replicates after all
            await settle()
            replicated.clear()
        assert not h.md().pending_in_progress
        assert [v.status for _, v in h.log] == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
        assert h.markers.sent == [(1001, 0, True, 7, frozenset({T0}))]
        c._append_batch = append
        assert await c.init_producer_id(TID, 1_000, None) == (E.none, 1001, 1)
    run(scenario())


def test_idle_ids_expire_as_tombstones():
    async def scenario():
        h = Harness()
        c = h.coord
        timers = TxnTimers(c)
        await c.init_producer_id(TID, 1_000, None)
        h.clock += c.config.id_expiration_ms
        assert timers.expire_ids() == 1
        await settle()
        assert h.log[-1] == (TID, None) and TID not in c.owned[0].txns
        assert await c.add_partitions(TID, 1001, 0, {T0}) == E.invalid_producer_id_mapping
    run(scenario())


def test_describe_and_list():
    async def scenario():
        h = Harness()
        c = h.coord
        await c.init_producer_id(TID, 60_000, None)
        await c.add_partitions(TID, 1001, 0, {T0})
        md = c.describe(TID)
        assert (md.state.kafka_name, md.partitions) == ("Ongoing", {T0})
        with pytest.raises(Exception) as e:
            c.describe("nobody")
        assert e.value.code == E.transactional_id_not_found
        assert c.listing() == (False, [md])
    run(scenario())


def test_transaction_log_records_are_kafkas_format():
    v = TxnLogValue(42, 3, 60_000, int(S.ONGOING), (("a", 0), ("a", 2), ("b", 1)), 1700, 1600)
    assert txn_key("app") == b"\x00\x00\x00\x03app"
    raw = txn_value(v)
    assert raw[:2] == b"\x00\x00" and decode_value(raw) == v
    # version 1 (flexible): compact lengths + 1, tagged-field sections, as Kafka 4 writes it
    flexible = (b"\x00\x01" + (42).to_bytes(8, "big") + (3).to_bytes(2, "big") + (60_000).to_bytes(4, "big")
                + b"\x01" + b"\x02" + b"\x02a" + b"\x03" + (0).to_bytes(4, "big") + (2).to_bytes(4, "big") + b"\x00"
                + (1700).to_bytes(8, "big") + (1600).to_bytes(8, "big") + b"\x00")
    assert decode_value(flexible) == TxnLogValue(42, 3, 60_000, 1, (("a", 0), ("a", 2)), 1700, 1600)
