"""Server-side assignors of KIP-848 consumer groups: ``uniform`` (the default) and ``range``.

An assignor maps the group's members to a target assignment from their subscriptions and the
subscribed topics' partitions, as Kafka's ``UniformAssignor`` and ``RangeAssignor`` of the
group-coordinator module do (pure functions; the coordinator decides when to run one).

- ``uniform``: balanced and sticky. A member keeps the partitions it was given by the previous
  target while it is still subscribed to their topic and under its share; the partitions left
  go, one at a time, to the eligible member holding the fewest (ties: member id). With equal
  subscriptions every member ends with ``P // M`` or one more (Kafka's minimum quota and
  remainder).
- ``range``: per topic, the subscribed members sorted by member id get contiguous ranges, the
  first ``P % M`` one partition more (co-partitioned topics land together).

Partitions are ``(topic_id, partition)``; ``topics`` maps a topic name to (id, partition count).
"""

from __future__ import annotations

from typing import Callable, Mapping

TP = tuple[str, int]
Topics = Mapping[str, tuple[str, int]]          # name -> (topic id, partitions)
Subscriptions = Mapping[str, frozenset[str]]    # member id -> subscribed topic names
Targets = dict[str, frozenset[TP]]              # member id -> its target partitions


def _partitions(topics: Topics, names) -> list[TP]:
    return [(topics[n][0], p) for n in sorted(names) if n in topics for p in range(topics[n][1])]


def uniform(subscriptions: Subscriptions, topics: Topics, previous: Mapping[str, frozenset[TP]]) -> Targets:
    members = sorted(subscriptions)
    eligible: dict[TP, list[str]] = {}
    for m in members:
        for tp in _partitions(topics, subscriptions[m]):
            eligible.setdefault(tp, []).append(m)
    share = {m: _share(m, eligible) for m in members}
    extras = len(eligible) - sum(share.values())  # with equal subscriptions: P % M
    out: dict[str, set[TP]] = {m: set() for m in members}
    taken: set[TP] = set()
    for extra_pass in (False, True):  # stickiness: keep the previous target up to the share,
        for m in members:             # then one more while the remainder lasts
            for tp in sorted(previous.get(m, ())):
                if tp not in eligible or m not in eligible[tp] or tp in taken:
                    continue
                if len(out[m]) < share[m] or (extra_pass and extras > 0 and len(out[m]) == share[m]):
                    extras -= len(out[m]) == share[m]
                    out[m].add(tp)
                    taken.add(tp)
    for tp in sorted(eligible):
        if tp not in taken:
            out[min(eligible[tp], key=lambda m: (len(out[m]), m))].add(tp)
    return {m: frozenset(ps) for m, ps in out.items()}


def _share(member: str, eligible: dict[TP, list[str]]) -> int:
    """The partitions ``member`` keeps at least from before: its topics' partitions over the
    members that may take them, rounded down (with equal subscriptions, P // M)."""
    mine = [tp for tp, ms in eligible.items() if member in ms]
    if not mine:
        return 0
    sharing = {m for tp in mine for m in eligible[tp]}
    return len(mine) // len(sharing)


def range_(subscriptions: Subscriptions, topics: Topics, previous: Mapping[str, frozenset[TP]]) -> Targets:
    out: dict[str, set[TP]] = {m: set() for m in subscriptions}
    for name in sorted({t for ts in subscriptions.values() for t in ts}):
        if name not in topics:
            continue
        topic_id, count = topics[name]
        members = sorted(m for m, ts in subscriptions.items() if name in ts)
        per, extra = divmod(count, len(members))
        start = 0
        for i, m in enumerate(members):
            n = per + (1 if i < extra else 0)
            out[m].update((topic_id, p) for p in range(start, start + n))
            start += n
    return {m: frozenset(ps) for m, ps in out.items()}


Assignor = Callable[[Subscriptions, Topics, Mapping[str, frozenset[TP]]], Targets]
ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}  # the first is the default
DEFAULT_ASSIGNOR = "uniform"
