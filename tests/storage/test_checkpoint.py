"""Checkpoint files and the leader epoch cache."""

from __future__ import annotations

import pytest

from odradek.broker.storage.checkpoint import (CorruptCheckpoint, OffsetCheckpointFile, grouped_writes, read_checkpoint,
                                               write_checkpoint)
from odradek.broker.storage.epoch import EpochEntry, LeaderEpochCache


def test_offset_checkpoint_roundtrip_and_format(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(path)
    assert checkpoint.read() == {}
    checkpoint.write({("orders", 1): 99, ("orders", 0): 1234, ("a.b-c", 7): 0})
    assert path.read_text() == "0\n3\na.b-c 7 0\norders 0 1234\norders 1 99\n"
    assert checkpoint.read() == {("orders", 1): 99, ("orders", 0): 1234, ("a.b-c", 7): 0}
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # the temp file was renamed away
    checkpoint.write({})
    assert checkpoint.read() == {}


@pytest.mark.parametrize("text", ["", "1\n0\n", "0\n2\nt 0 5\n", "0\n1\nt 0\n", "0\n1\nt x 5\n", "0\nzz\n"])
def test_corrupt_checkpoints_are_reported(tmp_path, text):
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CorruptCheckpoint):
        OffsetCheckpointFile(path).read()


def test_generic_checkpoint(tmp_path):
    write_checkpoint(tmp_path / "x", [(1, 2), (3, 4)])
    assert read_checkpoint(tmp_path / "x", 2) == [["1", "2"], ["3", "4"]]


def test_leader_epoch_cache(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path)
    cache.assign(1, 0)
    cache.assign(1, 5)   # same epoch: nothing new
    cache.assign(0, 7)   # older epoch: ignored
    cache.assign(3, 10)
    cache.assign(4, 20)
    assert cache.entries == [(1, 0), (3, 10), (4, 20)] and cache.latest_epoch == 4
    assert LeaderEpochCache(path).entries == cache.entries  # persisted
    assert cache.end_offset_for(4, 25) == EpochEntry(4, 25)
    assert cache.end_offset_for(3, 25) == EpochEntry(3, 20)
    assert cache.end_offset_for(2, 25) == EpochEntry(1, 10)
    assert cache.end_offset_for(0, 25) == EpochEntry(0, 0)
    assert cache.end_offset_for(9, 25) == EpochEntry(-1, -1)
    cache.truncate_from_end(15)
    assert cache.entries == [(1, 0), (3, 10)]
    cache.truncate_from_start(12)
    assert cache.entries == [(3, 12)]
    assert LeaderEpochCache(path).entries == [(3, 12)]
    path.write_text("garbage")
    assert LeaderEpochCache(path).entries == []


def test_grouped_writes_land_together_at_the_end_of_the_block(tmp_path):
    paths = [tmp_path / f"p{i}" / "leader-epoch-checkpoint" for i in range(3)]
    for path in paths:
        path.parent.mkdir()
        write_checkpoint(path, [(0, 0)])
    with grouped_writes():
        for i, path in enumerate(paths):
            write_checkpoint(path, [(0, 0), (1, i)])
        with grouped_writes():  # a nested block joins the outer one
            write_checkpoint(paths[0], [(0, 0), (2, 9)])
        assert all(read_checkpoint(path, 2) == [["0", "0"]] for path in paths)  # not yet renamed
    assert read_checkpoint(paths[0], 2) == [["0", "0"], ["2", "9"]]
    assert [read_checkpoint(path, 2) for path in paths[1:]] == [[["0", "0"], ["1", "1"]], [["0", "0"], ["1", "2"]]]
    assert not list(tmp_path.glob("*/*.tmp"))
