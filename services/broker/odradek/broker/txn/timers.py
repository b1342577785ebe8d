"""The transaction coordinator's periodic work (Kafka's two scheduled tasks).

- Every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``: an Ongoing
  transaction started more than its ``transaction.timeout.ms`` ago is aborted, its epoch bumped
  first (the epoch fence: the hung producer's next request gets PRODUCER_FENCED / its batches
  INVALID_PRODUCER_EPOCH), then EndTxn(abort) as if the coordinator had been asked.
- Every ``transaction.remove.expired.transaction.cleanup.interval.ms``: an id whose last
  transaction ended (Empty, CompleteCommit, CompleteAbort) and that has had no update for
  ``transactional.id.expiration.ms`` is written as a tombstone and forgotten.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.broker.txn.coordinator import TransactionCoordinator
from odradek.broker.txn.metadata import COMPLETED, TxnState
from odradek.errors import ErrorCode

log = logging.getLogger(__name__)


class TxnTimers:
    def __init__(self, coord: TransactionCoordinator) -> None:
        self.coord = coord
        self._handles: list[asyncio.TimerHandle] = []
        self.started = False

    def start(self) -> None:
        """Schedule both jobs (on the running loop: the first snapshot's)."""
        self.started = True
        cfg = self.coord.config
        self._every(cfg.abort_interval_ms, self.abort_timed_out)
        self._every(cfg.expire_interval_ms, self.expire_ids)

    def _every(self, interval_ms: int, job) -> None:
        def tick() -> None:
            job()
            self._handles.remove(handle)
            self._every(interval_ms, job)
        handle = asyncio.get_running_loop().call_later(interval_ms / 1000, tick)
        self._handles.append(handle)

    def close(self) -> None:
        for handle in self._handles:
            handle.cancel()
        self._handles.clear()

    def abort_timed_out(self) -> int:
        """Fence and abort every transaction past its timeout; how many were started."""
        coord, now, started = self.coord, self.coord.now(), 0
        for owned, md in coord.loaded_txns():
            if md.state != TxnState.ONGOING or md.pending_in_progress or md.start_ms + md.timeout_ms >= now:
                continue
            log.info("aborting transaction %s (producer %d, epoch %d): started %d ms ago, timeout %d ms",
                     md.transactional_id, md.producer_id, md.producer_epoch, now - md.start_ms, md.timeout_ms)
            fence = md.prepare_fence()
            coord.spawn(coord.end_txn(md.transactional_id, fence.producer_id, fence.producer_epoch, False,
                                      from_client=False))
            started += 1
        return started

    def expire_ids(self) -> int:
        """Forget ids idle past ``transactional.id.expiration.ms``; how many were started."""
        coord, now, started = self.coord, self.coord.now(), 0
        for owned, md in coord.loaded_txns():
            if (md.state in COMPLETED and not md.pending_in_progress
                    and md.last_update_ms + coord.config.id_expiration_ms <= now):
                coord.spawn(self._expire(owned, md))
                started += 1
        return started

    async def _expire(self, owned, md) -> None:
        if await self.coord.write(owned, md, md.prepare_dead()) == ErrorCode.none:
            if owned.txns.get(md.transactional_id) is md:
                del owned.txns[md.transactional_id]
            log.info("transactional id %s expired", md.transactional_id)
