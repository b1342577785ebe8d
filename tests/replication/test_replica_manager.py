"""Leader/follower state machine, follower fetching, HW, ISR changes and acks=all, in one
process: real logs and real Kafka listeners, a fake controller (see harness)."""

from __future__ import annotations

import asyncio

import pytest

from odradek.errors import ErrorCode, KafkaError
from tests.replication.harness import TOPIC, FakeController, batch, eventually


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def values(log) -> list[bytes]:
    from odradek.records import iter_batches, iter_records
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        piece = log.read(offset, 1 << 20)
        data = memoryview(bytearray(piece.read()))
        for b in iter_batches(data):
            out.extend(r.value for r in iter_records(b))
            offset = b.last_offset + 1
    return out


def test_acks_all_waits_for_the_followers_and_the_hw_follows(tmp_path):
    async def scenario():
        c = FakeController(replicas=(1, 2, 3), min_isr=2)
        await c.start(tmp_path)
        try:
            c.set_state(leader=1, leader_epoch=1, isr=(1, 2, 3))
            leader = c.nodes[1]
            info = leader.replicas.append(TOPIC, 0, batch(b"a", b"b"), acks=-1)
            assert leader.log.high_watermark == 0, "the HW moves only when the followers have the batch"
            code = await asyncio.wait_for(leader.replicas.replicated(TOPIC, 0, info.last_offset), 10)
            assert code == ErrorCode.none
            assert leader.log.high_watermark == 2
            for f in (2, 3):
                await eventually(lambda: c.nodes[f].log.high_watermark == 2, 5, f"follower {f} HW")
                assert values(c.nodes[f].log) == [b"a", b"b"]
                assert c.nodes[f].log.leader_epochs.entries == [(1, 0)]
            with pytest.raises(KafkaError) as e:
                c.nodes[2].replicas.append(TOPIC, 0, batch(b"x"))
            assert e.value.code == ErrorCode.not_leader_or_follower
        finally:
            await c.stop()
    run(scenario())


def test_leader_epoch_fencing(tmp_path):
    async def scenario():
        c = FakeController(replicas=(1, 2))
        await c.start(tmp_path)
        try:
            c.set_state(leader=1, leader_epoch=5, isr=(1, 2))
            rm = c.nodes[1].replicas
            assert rm.leader(TOPIC, 0, 5).state.leader_epoch == 5
            for epoch, code in ((4, ErrorCode.fenced_leader_epoch), (6, ErrorCode.unknown_leader_epoch)):
                with pytest.raises(KafkaError) as e:
                    rm.leader(TOPIC, 0, epoch)
                assert e.value.code == code
        finally:
            await c.stop()
    run(scenario())


def test_not_enough_replicas_and_recovery(tmp_path):
    async def scenario():
        c = FakeController(replicas=(1, 2, 3), min_isr=2)
        await c.start(tmp_path)
        try:
            c.set_state(leader=1, leader_epoch=1, isr=(1,))
            rm = c.nodes[1].replicas
            with pytest.raises(KafkaError) as e:
                rm.append(TOPIC, 0, batch(b"a"), acks=-1)
            assert e.value.code == ErrorCode.not_enough_replicas
            rm.append(TOPIC, 0, batch(b"a"), acks=1)  # acks=1 still works
            # the followers catch up and the leader asks the controller to add them
            await eventually(lambda: len(c.state.isr) == 3, 10, "the followers to join the ISR")
            info = rm.append(TOPIC, 0, batch(b"b"), acks=-1)
            assert await asyncio.wait_for(rm.replicated(TOPIC, 0, info.last_offset), 10) == ErrorCode.none
        finally:
            await c.stop()
    run(scenario())


def test_lagging_follower_leaves_the_isr_and_rejoins(tmp_path):
    async def scenario():
        c = FakeController(replicas=(1, 2, 3), min_isr=2)
        await c.start(tmp_path, lag_ms=400)
        try:
            c.set_state(leader=1, leader_epoch=1, isr=(1, 2, 3))
            rm = c.nodes[1].replicas
            info = rm.append(TOPIC, 0, batch(b"a"), acks=-1)
            assert await asyncio.wait_for(rm.replicated(TOPIC, 0, info.last_offset), 10) == ErrorCode.none
            c.nodes[3].replicas.fetchers.remove((TOPIC, 0))  # broker 3 stops fetching
            rm.append(TOPIC, 0, batch(b"b"), acks=1)
            await eventually(lambda: c.state.isr == (1, 2), 5, "broker 3 to leave the ISR")
            # the readiness count: broker 3 is out of an ISR it belongs to, the others are not
            assert [len(c.nodes[b].replicas.out_of_isr) for b in (1, 2, 3)] == [0, 0, 1]
            info = rm.append(TOPIC, 0, batch(b"c"), acks=-1)  # 2 of 3 in sync: acks=all works
            assert await asyncio.wait_for(rm.replicated(TOPIC, 0, info.last_offset), 10) == ErrorCode.none
            c.nodes[3].replicas.fetchers.add((TOPIC, 0), 1, 1)  # it comes back
            await eventually(lambda: sorted(c.state.isr) == [1, 2, 3], 10, "broker 3 to rejoin the ISR")
            assert values(c.nodes[3].log) == [b"a", b"b", b"c"]
            assert len(c.nodes[3].replicas.out_of_isr) == 0, "back in the ISR: ready again"
            c.set_state(leader=-1, leader_epoch=2, isr=(1,))  # offline: nothing to catch up from
            assert [len(c.nodes[b].replicas.out_of_isr) for b in (1, 2, 3)] == [0, 0, 0]
        finally:
            await c.stop()
    run(scenario())


def test_idle_followers_in_fetch_sessions_stay_in_the_isr_and_get_new_records(tmp_path):
    """Followers fetch in sessions (KIP-227): idle, their fetches name no partition, yet the
    leader counts them caught up (no ISR shrink past the lag time), and records still flow."""
    async def scenario():
        c = FakeController(replicas=(1, 2, 3), min_isr=2)
        await c.start(tmp_path, lag_ms=1200)  # over the fetches' 500 ms long poll
        try:
            c.set_state(leader=1, leader_epoch=1, isr=(1, 2, 3))
            rm = c.nodes[1].replicas
            info = rm.append(TOPIC, 0, batch(b"a"), acks=-1)
            assert await asyncio.wait_for(rm.replicated(TOPIC, 0, info.last_offset), 10) == ErrorCode.none
            fetchers = [c.nodes[b].replicas.fetchers._fetchers[1] for b in (2, 3)]
            await eventually(lambda: all(f.session.epoch > 2 for f in fetchers), 10, "incremental fetches")
            alters = len(c.alters)
            await asyncio.sleep(3)  # idle for over two lag times
            assert c.state.isr == (1, 2, 3) and len(c.alters) == alters, c.alters[alters:]
            info = rm.append(TOPIC, 0, batch(b"b"), acks=-1)
            assert await asyncio.wait_for(rm.replicated(TOPIC, 0, info.last_offset), 10) == ErrorCode.none
            assert values(c.nodes[3].log) == [b"a", b"b"]
        finally:
            await c.stop()
    run(scenario())


def test_an_idle_followers_fetches_do_not_read_its_logs_again(tmp_path):
    """Between walks a follower keeps its fetch positions: an idle fetch (nothing answered)
    looks at no log, so its cost does not grow with the partitions followed."""
    async def scenario():
        c = FakeController(replicas=(1, 2, 3), min_isr=2)
        await c.start(tmp_path)
        try:
            c.set_state(leader=1, leader_epoch=1, isr=(1, 2, 3))
            rm = c.nodes[1].replicas
            info = rm.append(TOPIC, 0, batch(b"a"), acks=-1)
            assert await asyncio.wait_for(rm.replicated(TOPIC, 0, info.last_offset), 10) == ErrorCode.none
            manager = c.nodes[2].replicas.fetchers
            fetcher = manager._fetchers[1]
            await eventually(lambda: fetcher.session.epoch > 2, 10, "incremental fetches")
            reads = []
            log_of = manager.log_of
            manager.log_of = lambda topic, partition: reads.append(partition) or log_of(topic, partition)
            epoch = fetcher.session.epoch
            await eventually(lambda: fetcher.session.epoch >= epoch + 6, 10, "six more fetches")
            assert len(reads) <= 2, f"{len(reads)} log reads in 6 idle fetches (at most one walk: 2)"
            info = rm.append(TOPIC, 0, batch(b"b"), acks=-1)  # records still flow, then are read again
            assert await asyncio.wait_for(rm.replicated(TOPIC, 0, info.last_offset), 10) == ErrorCode.none
            assert values(c.nodes[2].log) == [b"a", b"b"]
        finally:
            await c.stop()
    run(scenario())


def test_divergent_follower_truncates_by_leader_epoch(tmp_path):
    """Broker 1 led epoch 1 and wrote two records nobody else got; broker 2 took over at
    epoch 2 and wrote others at the same offsets. Back as a follower, broker 1 asks where
    epoch 1 ends (OffsetForLeaderEpoch), truncates there, not to its HW, and copies epoch 2."""
    async def scenario():
        c = FakeController(replicas=(1, 2), min_isr=1)
        await c.start(tmp_path)
        try:
            c.set_state(leader=1, leader_epoch=1, isr=(1, 2))
            n1, n2 = c.nodes[1], c.nodes[2]
            info = n1.replicas.append(TOPIC, 0, batch(b"a", b"b"), acks=-1)
            assert await asyncio.wait_for(n1.replicas.replicated(TOPIC, 0, info.last_offset), 10) == ErrorCode.none
            await eventually(lambda: n2.log.high_watermark == 2, 5, "broker 2 HW")
            c.reachable = {2}  # broker 1 is cut off from the controller
            n2.replicas.fetchers.remove((TOPIC, 0))  # and from broker 2
            n1.replicas.append(TOPIC, 0, batch(b"lost-1", b"lost-2"), acks=1)
            c.set_state(leader=2, leader_epoch=2, isr=(2,))
            n2.replicas.append(TOPIC, 0, batch(b"c", b"d", b"e"), acks=1)
            assert n1.log.log_end_offset == 4 and n2.log.log_end_offset == 5
            c.reachable = {1, 2}
            c.push()
            await eventually(lambda: values(n1.log) == [b"a", b"b", b"c", b"d", b"e"], 10,
                             "broker 1 to truncate and copy epoch 2")
            assert n1.log.leader_epochs.entries == [(1, 0), (2, 2)]
            await eventually(lambda: c.state.isr == (2, 1), 10, "broker 1 to rejoin the ISR")
        finally:
            await c.stop()
    run(scenario())


def test_parked_produce_fails_when_leadership_moves(tmp_path):
    async def scenario():
        c = FakeController(replicas=(1, 2), min_isr=1)
        await c.start(tmp_path)
        try:
            c.set_state(leader=1, leader_epoch=1, isr=(1, 2))
            c.nodes[2].replicas.fetchers.remove((TOPIC, 0))
            rm = c.nodes[1].replicas
            info = rm.append(TOPIC, 0, batch(b"a"), acks=-1)
            parked = rm.replicated(TOPIC, 0, info.last_offset)
            await asyncio.sleep(0.2)
            assert not parked.done()
            c.set_state(leader=2, leader_epoch=2, isr=(2,))
            assert await asyncio.wait_for(parked, 5) == ErrorCode.not_leader_or_follower
        finally:
            await c.stop()
    run(scenario())


def test_expansion_refused_as_ineligible_is_retried_without_a_new_snapshot(tmp_path):
    """A returning broker can catch up before the controller sees it live again: the
    controller answers INELIGIBLE_REPLICA, and the leader must try again by itself."""
    async def scenario():
        c = FakeController(replicas=(1, 2), refusals=[ErrorCode.ineligible_replica])
        await c.start(tmp_path)
        try:
            c.set_state(leader=1, leader_epoch=1, isr=(1,))
            c.nodes[1].replicas.append(TOPIC, 0, batch(b"a"), acks=1)
            await eventually(lambda: c.state.isr == (1, 2), 10, "broker 2 to join the ISR after a refusal")
            assert len(c.alters) == 2
        finally:
            await c.stop()
    run(scenario())


def _no_space(*_args, **_kwargs):
    import errno
    raise OSError(errno.ENOSPC, "No space left on device")


def _answers_storage_error(call) -> None:
    with pytest.raises(KafkaError) as e:
        call()
    assert e.value.code == ErrorCode.kafka_storage_error


def _failures_told(node) -> list[str]:
    """What the node's failure channel tells its listeners (the broker: shut down)."""
    told: list[str] = []
    node.replicas.logs.failures.subscribe(told.append)
    return told


def test_a_failed_write_takes_the_log_dir_offline_with_kafka_storage_error(tmp_path):
    """ENOSPC on the leader's append: KAFKA_STORAGE_ERROR (56) for that produce and every later
    request for the broker's partitions; the failure channel tells its listeners once."""
    async def scenario():
        c = FakeController(replicas=(1, 2), min_isr=1)
        await c.start(tmp_path)
        try:
            c.set_state(leader=1, leader_epoch=1, isr=(1, 2))
            leader = c.nodes[1]
            told = _failures_told(leader)
            leader.log.append = _no_space
            for _ in range(2):
                _answers_storage_error(lambda: leader.replicas.append(TOPIC, 0, batch(b"a")))
            assert len(told) == 1 and "No space left on device" in told[0]
            _answers_storage_error(lambda: leader.replicas.leader(TOPIC, 0))
        finally:
            await c.stop()
    run(scenario())


def test_a_failed_checkpoint_write_on_becoming_leader_takes_the_log_dir_offline(tmp_path):
    """Issue 15's duplicates: a broker on a full disk whose leader-epoch checkpoint write failed
    while it became leader was left half-switched (leading, still fetching) and kept being made
    leader; partitions stalled past the producers' message.timeout.ms. Kafka's answer: the write
    takes the log directory offline (KAFKA_STORAGE_ERROR everywhere, the broker then exits)."""
    async def scenario():
        c = FakeController(replicas=(1, 2), min_isr=1)
        await c.start(tmp_path)
        try:
            c.set_state(leader=1, leader_epoch=1, isr=(1, 2))
            n2 = c.nodes[2]
            told = _failures_told(n2)
            n2.log.leader_epochs._flush = _no_space
            _answers_storage_error(lambda: c.set_state(leader=2, leader_epoch=2, isr=(1, 2)))
            assert len(told) == 1 and "No space left on device" in told[0]
            _answers_storage_error(lambda: n2.replicas.append(TOPIC, 0, batch(b"a")))
            _answers_storage_error(c.push)  # later snapshots: the offline directory's partitions answer the same
        finally:
            await c.stop()
    run(scenario())


def test_a_failed_truncation_takes_the_log_dir_offline(tmp_path):
    """A follower whose truncation (OffsetForLeaderEpoch) fails with ENOSPC: the directory goes
    offline, as for a failed append, instead of the fetcher retrying for ever."""
    async def scenario():
        c = FakeController(replicas=(1, 2), min_isr=1)
        await c.start(tmp_path)
        try:
            c.set_state(leader=1, leader_epoch=1, isr=(1,))
            n1, n2 = c.nodes[1], c.nodes[2]
            n2.replicas.fetchers.remove((TOPIC, 0))
            n2.log.append(batch(b"divergent"), leader_epoch=1)  # n2 has a record n1 never had
            n2.log.truncate_to = _no_space
            c.set_state(leader=1, leader_epoch=2, isr=(1,))  # a new epoch: broker 2 truncates first
            await eventually(lambda: n2.replicas.logs.failures.offline, 10, "broker 2's log dir to go offline")
            assert "truncating" in n2.replicas.logs.failures.cause
            assert n1.log.log_end_offset == 0
        finally:
            await c.stop()
    run(scenario())
