"""The data source's pure planning logic, without Spark or a cluster: topic selection, offsets
and timestamps per partition, Spark's batch restrictions, and streaming admission control."""

from __future__ import annotations

import json

import pytest

from odradek.spark import options as opts
from odradek.spark.source import _admit


def test_exactly_one_of_subscribe_subscribe_pattern_assign():
    assert opts.select_topics({"subscribe": "a, b"}, []) == {"a": None, "b": None}
    assert opts.select_topics({"subscribePattern": "or.*"}, ["orders", "xorders", "ore"]) == {"orders": None, "ore": None}
    assert opts.select_topics({"assign": '{"a": [0, 2]}'}, []) == {"a": [0, 2]}
    for bad in ({}, {"subscribe": "a", "assign": '{"a": [0]}'}):
        with pytest.raises(opts.OptionError, match="exactly one"):
            opts.select_topics(bad, [])
    with pytest.raises(opts.OptionError, match="'assign' must be JSON"):
        opts.select_topics({"assign": "a:0"}, [])


def test_offsets_per_partition_with_earliest_and_latest_markers():
    spec = opts.offset_spec({"startingOffsets": json.dumps({"t": {"0": 23, "1": -2, "2": -1}})}, "starting", "earliest")
    assert [opts.resolve(spec, "t", p, 5, 50, None) for p in range(3)] == [23, 5, 50]
    with pytest.raises(opts.OptionError, match="no offset given for t-3"):
        opts.resolve(spec, "t", 3, 5, 50, None)
    assert opts.resolve(opts.offset_spec({}, "ending", "latest"), "t", 0, 5, 50, None) == 50
    with pytest.raises(opts.OptionError, match="must be JSON"):
        opts.offset_spec({"startingOffsets": "{bad"}, "starting", "earliest")


def test_timestamps_resolve_through_the_gateway_lookup():
    index = {("t", 0): 7, ("t", 1): None}
    by_time = lambda t, p, ts: index[(t, p)]  # noqa: E731
    everywhere = opts.offset_spec({"startingTimestamp": "1000"}, "starting", "earliest")
    assert everywhere == ("timestamps", 1000)
    assert opts.resolve(everywhere, "t", 0, 0, 90, by_time) == 7
    assert opts.resolve(everywhere, "t", 1, 0, 90, by_time) == 90, "no record that late: the end"
    with pytest.raises(opts.OptionError, match="No offset matched .* t-1 and timestamp 1000"):
        opts.resolve(everywhere, "t", 1, 0, 90, by_time, no_match="error")
    per_partition = opts.offset_spec({"endingOffsetsByTimestamp": '{"t": {"0": 5}}'}, "ending", "latest")
    assert opts.resolve(per_partition, "t", 0, 0, 90, by_time) == 7
    with pytest.raises(opts.OptionError, match="no timestamp given for t-1"):
        opts.resolve(per_partition, "t", 1, 0, 90, by_time)


def test_batch_queries_cannot_start_at_latest_or_end_at_earliest():
    opts.check_batch_ends(("offsets", "earliest"), ("offsets", "latest"))
    for start, end in ((("offsets", "latest"), ("offsets", "latest")), (("offsets", {"t": {0: -1}}), ("offsets", "latest"))):
        with pytest.raises(opts.OptionError, match="starting offset can't be latest"):
            opts.check_batch_ends(start, end)
    with pytest.raises(opts.OptionError, match="ending offset can't be earliest"):
        opts.check_batch_ends(("offsets", "earliest"), ("offsets", {"t": {0: -2}}))


def test_min_partitions_splits_in_proportion_and_drops_empty_ranges():
    ranges = [opts.Range("t", 0, 0, 900), opts.Range("t", 1, 0, 100), opts.Range("t", 2, 10, 10)]
    pieces = opts.split(ranges, 10)
    assert len([r for r in pieces if r.partition == 0]) == 9 and len([r for r in pieces if r.partition == 1]) == 1
    assert sum(r.size for r in pieces) == 1000
    assert opts.split(ranges, 2) == ranges[:2], "already enough: unchanged but for the empty range"


def test_admission_spreads_the_budget_by_backlog_and_always_progresses():
    start = {"t/0": 0, "t/1": 100}
    assert _admit(start, {"t/0": 300, "t/1": 200}, 1000) == {"t/0": 300, "t/1": 200}, "under budget: all"
    assert _admit(start, {"t/0": 300, "t/1": 200}, 100) == {"t/0": 75, "t/1": 125}
    tiny = _admit(start, {"t/0": 300, "t/1": 200}, 1)
    assert sum(tiny[k] - start[k] for k in start) == 1


def test_kafka_options_that_mean_something_pass_and_the_others_fail_clearly():
    opts.check_kafka_options({"kafka.bootstrap.servers": "b:9092", "kafka.client.id": "job-7",
                              "kafka.isolation.level": "read_uncommitted", "subscribe": "t"})
    opts.check_kafka_options({"kafka.isolation.level": "read_committed"})
    assert opts.isolation_level({"kafka.isolation.level": "READ_COMMITTED"}) == "read_committed"
    assert opts.isolation_level({}) == "read_uncommitted"
    with pytest.raises(opts.OptionError, match="not an isolation level"):
        opts.check_kafka_options({"kafka.isolation.level": "serializable"})
    with pytest.raises(opts.OptionError, match="'kafka.group.id' is not supported.*kafka.client.id"):
        opts.check_kafka_options({"kafka.group.id": "g"})
    assert opts.client_id({"kafka.client.id": "job-7"}) == "job-7"


def test_min_offsets_per_trigger_waits_for_enough_offsets_or_the_max_trigger_delay():
    assert [opts.time_ms(t) for t in ("250", "500ms", "30s", "15m", "2h")] == [250, 500, 30_000, 900_000, 7_200_000]
    with pytest.raises(opts.OptionError, match="duration"):
        opts.time_ms("soon")
    assert opts.trigger_delay({}) is None
    delay = opts.trigger_delay({"minOffsetsPerTrigger": "100", "maxTriggerDelay": "10s"})
    assert not delay.delays(5, now_ms=1_000_000)        # the first batch never waits (as Spark's source)
    assert delay.delays(99, now_ms=1_001_000)           # too few, delay not over
    assert not delay.delays(100, now_ms=1_002_000)      # enough
    assert delay.delays(1, now_ms=1_011_000)
    assert not delay.delays(1, now_ms=1_012_000)        # 10 s since the last batch: go with what there is
