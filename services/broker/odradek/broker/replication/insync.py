"""Which hosted partitions this broker is out of the ISR of: the count behind the broker's
readiness (``control_plane.READY``, docs/broker.md "Broker states and readiness").

A partition counts while it has a leader, this broker is one of its replicas, and this broker
is not in its ISR: a restarted broker still catching up, a follower the leader dropped. An
offline partition (no leader) does not count: nothing can be caught up from, and holding the
broker not-ready would not bring it back. A replica being added by a reassignment counts until
it joins (the broker's snapshot does not tell added replicas apart), which is the cautious side.

Kept up to date from every change of a partition's state (a snapshot applied, the leader's own
ISR change, a partition dropped), so that a probe reads a number: O(1) however many
partitions the broker hosts. Event-loop thread only.
"""

from __future__ import annotations

from odradek.cluster.model import PartitionState


class OutOfIsr:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self._keys: set[tuple[str, int]] = set()

    def __len__(self) -> int:
        return len(self._keys)

    def note(self, key: tuple[str, int], state: PartitionState | None) -> None:
        """``key``'s state is now ``state`` (None: not known yet)."""
        if state is not None and state.leader >= 0 and self.broker_id in state.replicas \
                and self.broker_id not in state.isr:
            self._keys.add(key)
        else:
            self._keys.discard(key)

    def forget(self, key: tuple[str, int]) -> None:
        """No longer hosted here (reassigned away, deleted)."""
        self._keys.discard(key)
