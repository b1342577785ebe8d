"""A follower's side of its fetch session with one leader (KIP-227, Kafka's FetchSessionHandler).

``build`` turns the partitions a fetch wants (position per partition) into what to send: all
of them in a full request (session epoch 0: "give me a session"), else only those whose
position differs from what the leader's session holds, plus the ones to forget.
``handle_response`` moves to the next epoch, or resets:
- FETCH_SESSION_ID_NOT_FOUND (the leader restarted, or evicted us): a new session from scratch
  (id 0, epoch 0);
- any other top-level error (INVALID_FETCH_SESSION_EPOCH, ...) and a broken connection
  (``reset``): a full request naming the old session, which closes it and opens a new one;
- a full request answered without a session (the leader's cache is full): full requests go on.
Kafka's fetcher retries a session error at once (no backoff): the caller does too.
"""

from __future__ import annotations

from typing import Hashable

from odradek.broker.replication.fetch_session import next_epoch
from odradek.errors import ErrorCode

INITIAL_EPOCH = 0


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self._held: dict[Hashable, tuple] = {}      # what the leader's session holds
        self._pending: dict[Hashable, tuple] = {}   # what it will hold once the request in flight is answered
        self._pending_is_delta = False              # ``_pending`` only updates ``_held`` (an incremental ``changed``)

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH

    def build(self, wanted: dict[Hashable, tuple], changed: set[Hashable] | None = None
              ) -> tuple[dict[Hashable, tuple], list[Hashable]]:
        """(partitions to list with their fetch data, partitions to forget) for the next request.
        ``changed``: the only keys whose data may differ from the last request's, the key set
        being the same (a follower's idle fetch compares nothing); None compares everything."""
        held = self._held
        if changed is not None and not self.full:  # copying all of ``wanted`` per idle fetch was O(partitions)
            self._pending = {key: wanted[key] for key in changed if key in wanted}
            self._pending_is_delta = True
            return {key: data for key, data in self._pending.items() if held.get(key) != data}, []
        self._pending = dict(wanted)  # the caller goes on updating its own
        self._pending_is_delta = False
        if self.full:
            return self._pending, []
        listed = {key: data for key, data in wanted.items() if held.get(key) != data}
        return listed, [key for key in held if key not in wanted]

    def handle_response(self, error_code: int, session_id: int) -> bool:
        """True if the answer is usable; False after a session error (the next request is full)."""
        if error_code != ErrorCode.none:
            if error_code == ErrorCode.fetch_session_id_not_found:
                self.session_id = 0
            self.reset()
            return False
        if session_id == 0:  # no room for a session, or the leader closed it: full requests
            self.session_id = 0
            self.reset()
            return True
        self.epoch = 1 if self.full or self.session_id != session_id else next_epoch(self.epoch)
        self.session_id = session_id
        if self._pending_is_delta:
            self._held.update(self._pending)
        else:
            self._held = self._pending
        return True

    def reset(self) -> None:
        """The next request is full (and closes the current session, if any)."""
        self.epoch = INITIAL_EPOCH
        self._held = {}
