"""Which replica a consumer should read from (KIP-392, Kafka's ``RackAwareReplicaSelector``).

The leader decides, for a consumer's Fetch (v11+) that names its rack (``client.rack`` ->
``rack_id``), when ``replica.selector.class`` is the rack-aware selector:

- no rack from the client, or the leader in the client's rack: the leader;
- else, among the replicas in the client's rack that are in the ISR, whose log end offset
  reached the fetch offset and whose broker is live, the most caught-up one (largest log end
  offset, then the most recently caught up), as Kafka's ``ReplicaView.comparator``;
- none such: the leader.

A follower chosen is answered as ``preferred_read_replica`` with no records; the consumer then
fetches from it, and the follower serves up to its high watermark. A follower that leaves the
ISR is never chosen again, so a consumer coming back to the leader (its preferred replica down,
or expired) is kept on the leader. Pure: the caller passes what it knows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # the read path imports this module, and the partition imports the read path's types
    from odradek.broker.replication.partition import Partition


def preferred_read_replica(part: "Partition", client_rack: str, fetch_offset: int, now_ms: int,
                           rack_of: Callable[[int], str | None], is_live: Callable[[int], bool]) -> int | None:
    """A follower's broker id the consumer should fetch from, or None for the leader (us)."""
    if not client_rack or rack_of(part.broker_id) == client_rack:
        return None
    best: tuple[int, int, int] | None = None   # (log end offset, -time since caught up, id)
    for replica, follower in part.followers.items():
        if (replica in part.isr and follower.leo >= fetch_offset and rack_of(replica) == client_rack
                and is_live(replica)):
            candidate = (follower.leo, -(now_ms - follower.last_caught_up_ms), replica)
            if best is None or candidate[:2] > best[:2]:
                best = candidate
    return best[2] if best is not None else None
