"""The purgatories' waits (no processes): a parked fetch wakes on its partition's notify or at
its timeout, and an acks=all produce's single wait answers success, the purgatory's error, or
REQUEST_TIMED_OUT at the request's timeout (the timer-based waits of the single-record path)."""

from __future__ import annotations

import asyncio
import datetime
from types import SimpleNamespace

from odradek.broker.handlers import produce
from odradek.broker.replication.purgatory import FetchWakeup, ProducePurgatory
from odradek.errors import ErrorCode


def test_a_parked_fetch_wakes_on_its_partition_and_times_out_otherwise():
    async def main():
        wakeup = FetchWakeup()
        loop = asyncio.get_running_loop()
        started = loop.time()
        await wakeup.wait(0.05, {("t", 0)})
        assert loop.time() - started >= 0.04 and wakeup.waiting == 0
        task = asyncio.ensure_future(wakeup.wait(30, {("t", 0)}, appends_only=True))
        await asyncio.sleep(0)
        wakeup.notify(("t", 1), appended=True)   # another partition
        wakeup.notify(("t", 0))                  # a HW advance: followers wait for bytes
        await asyncio.sleep(0)
        assert not task.done()
        wakeup.notify(("t", 0), appended=True)
        await asyncio.wait_for(task, 5)
        assert wakeup.waiting == 0
        task = asyncio.ensure_future(wakeup.wait(30))
        await asyncio.sleep(0)
        task.cancel()                            # a connection closed meanwhile
        await asyncio.gather(task, return_exceptions=True)
        assert wakeup.waiting == 0
    asyncio.run(main())


def _answered(results) -> tuple:
    a = results[("t", 0)]
    return a.error_code, a.base_offset, a.log_append_time_ms, a.log_start_offset, a.error_message


def test_a_single_acks_all_wait_answers_the_purgatorys_code_or_times_out():
    """Each answer keeps the append's base offset, append time and log start offset, without a
    message, as Kafka's DelayedProduce only sets the code of the append's answer."""
    async def main():
        info = SimpleNamespace(log_append_time_ms=1234, first_offset=7, log_start_offset=3)
        purgatory = ProducePurgatory()
        results = {}
        waits = {("t", 0): (purgatory.park(8), info)}
        asyncio.get_running_loop().call_soon(purgatory.complete, 8, 3, 2)
        await produce._await_replication(waits, results, 30_000)
        assert _answered(results) == (ErrorCode.none, 7, 1234, 3, None)

        waits = {("t", 0): (purgatory.park(9), info)}
        asyncio.get_running_loop().call_soon(purgatory.complete, 9, 1, 2)   # the ISR shrank meanwhile
        await produce._await_replication(waits, results, datetime.timedelta(seconds=30))
        assert _answered(results) == (ErrorCode.not_enough_replicas_after_append, 7, 1234, 3, None)

        future = purgatory.park(10)
        await produce._await_replication({("t", 0): (future, info)}, results, 50)
        assert _answered(results) == (ErrorCode.request_timed_out, 7, 1234, 3, None) and future.cancelled()
        purgatory.complete(10, 3, 2)             # the HW arrives late: nothing left to answer
        assert len(purgatory) == 0
    asyncio.run(main())


def test_deadlines_share_one_timer_and_forget_what_was_answered():
    from odradek.broker.replication import deadlines

    async def main():
        loop = asyncio.get_running_loop()
        timers = deadlines.on(loop)
        assert deadlines.on(loop) is timers
        late, answered = loop.create_future(), [loop.create_future() for _ in range(3000)]
        timers.expire(late, 0.05, deadlines.cancel)
        for future in answered:                  # parked and answered at once, as in the round trip
            timers.expire(future, 30, deadlines.resolve)
            future.set_result("answered")
        assert len(timers) < 2100                # answered ones swept out, not kept for 30 s
        early = loop.create_future()
        timers.expire(early, 0.02, deadlines.resolve)   # earlier than the timer is armed for
        started = loop.time()
        assert await asyncio.wait_for(early, 5) is None
        assert loop.time() - started >= 0.02 - deadlines.SLACK - 0.001 and not late.done()
        await asyncio.wait([late], timeout=5)
        assert late.cancelled() and all(f.result() == "answered" for f in answered)
        assert len(timers) == 0                  # the timer dropped every answered entry it reached
    asyncio.run(main())
