"""The records the client acceptance tests produce and the check of what they read back.

``make_records`` builds keyed records with headers, binary values and non-monotonic explicit
timestamps (``Sent``); ``verify`` checks the consumed ones (``Got``) came back exactly once,
byte-identical, in order, each key on one partition, offsets dense from 0.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True)
class Sent:
    index: int           # position in produce order
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int       # ms, CreateTime


@dataclass(frozen=True)
class Got:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int
    create_time: bool    # timestamp type is CreateTime


def make_records(count: int, keys: int = 997, seed: int = 1) -> list[Sent]:
    """``count`` keyed records: values start with ``<index>:<per-key seq>|`` then random bytes
    (not UTF-8); every third record has headers (a repeated key, a non-ASCII key, an empty value);
    timestamps are explicit, in the last hour and deliberately not monotonic."""
    rng = random.Random(seed)
    base_ms = int(time.time() * 1000) - 3_600_000
    key_names = [f"key-{k:04d}".encode() + rng.randbytes(k % 4) for k in range(keys)]
    seq: dict[bytes, int] = defaultdict(int)
    out = []
    for i in range(count):
        key = key_names[rng.randrange(keys)]
        s = seq[key]
        seq[key] += 1
        value = f"{i}:{s}|".encode() + rng.randbytes(rng.randrange(0, 120))
        headers: tuple[tuple[str, bytes], ...] = ()
        if i % 3 == 0:
            headers = (("trace", rng.randbytes(8)), ("seq", str(s).encode()), ("trace", b"second"),
                       ("ключ", "значение".encode()), ("empty", b""))
        out.append(Sent(i, key, value, headers, base_ms + (i * 7919) % 600_000))
    return out


def _seqs(value: bytes) -> tuple[int, int]:
    head = value.split(b"|", 1)[0]
    index, seq = head.split(b":")
    return int(index), int(seq)


def verify(sent: list[Sent], got: list[Got], delivered_partition: dict[int, int] | None = None) -> None:
    """Everything produced came back exactly once, byte-identical, in order.

    ``got`` must be in consumption order. ``delivered_partition`` (index -> partition from the
    producer's delivery reports, for those it has) must agree with where records were read."""
    by_index = {s.index: s for s in sent}
    assert len(got) == len(sent), f"consumed {len(got)} records, produced {len(sent)}"
    seen: set[int] = set()
    per_partition: dict[int, list[Got]] = defaultdict(list)
    key_partition: dict[bytes, int] = {}
    mismatches = []
    for g in got:
        index, _ = _seqs(g.value or b"-1:-1|")
        s = by_index.get(index)
        assert s is not None, f"consumed a record that was never produced: {g!r}"
        assert index not in seen, f"record {index} consumed twice (partition {g.partition} offset {g.offset})"
        seen.add(index)
        if (g.key, g.value, g.headers, g.timestamp, g.create_time) != (s.key, s.value, s.headers, s.timestamp, True):
            mismatches.append((s, g))
        per_partition[g.partition].append(g)
        p = key_partition.setdefault(s.key, g.partition)
        assert p == g.partition, f"key {s.key!r} landed on partitions {p} and {g.partition}"
        if index in (delivered_partition or {}):
            assert delivered_partition[index] == g.partition, (
                f"record {index} was acknowledged on partition {delivered_partition[index]} "
                f"but read from {g.partition}")
    assert not mismatches, (f"{len(mismatches)} records differ, first: sent {mismatches[0][0]!r} "
                            f"got {mismatches[0][1]!r}")
    for partition, records in per_partition.items():
        offsets = [g.offset for g in records]
        assert offsets == list(range(len(offsets))), (
            f"partition {partition}: offsets not dense from 0 in consumption order: "
            f"first bad at {next(i for i, o in enumerate(offsets) if o != i)}")
        indices = [_seqs(g.value)[0] for g in records]
        assert indices == sorted(indices), f"partition {partition}: records out of produce order"
        last_seq: dict[bytes, int] = {}
        for g in records:
            _, s = _seqs(g.value)
            assert s > last_seq.get(g.key, -1), f"key {g.key!r}: seq {s} after {last_seq[g.key]}"
            last_seq[g.key] = s
