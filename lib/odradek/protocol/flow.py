"""Write flow control shared by the protocols of Kafka connections (the broker's server side,
``connection``, and the inter-broker client, ``odradek.broker.replication.client``): while the
transport's write buffer is over its high-water mark, ``drained`` is a future that resolves once
it is back under the low one (or the connection is lost: call ``resume_writing`` then)."""

from __future__ import annotations

import asyncio


class WriteFlow:
    """Mixed into an ``asyncio`` protocol: its ``pause_writing``/``resume_writing``."""

    _drained: asyncio.Future | None = None   # while the transport's write buffer is over its limit

    def pause_writing(self) -> None:
        if self._drained is None:
            self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)
