"""bench.rebalance's pure helpers: the plan as Kafka's reassignment JSON, the throttle's ideal
time, the latency window."""

from bench.rebalance import ideal_seconds, kafka_reassignment, latency_figures

MOVES = [{"topic": "t", "partition": 0, "before": [1, 2], "after": [4, 2], "bytes": 100},
         {"topic": "t", "partition": 1, "before": [2, 3], "after": [2, 4], "bytes": 100},
         {"topic": "t", "partition": 2, "before": [3, 1], "after": [3, 1], "bytes": 0}]


def test_kafka_reassignment_lists_every_move_with_its_target_replicas_in_order():
    assert kafka_reassignment(MOVES[:2]) == {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [4, 2]},
        {"topic": "t", "partition": 1, "replicas": [2, 4]}]}


def test_ideal_time_is_the_busiest_broker_in_either_direction_over_the_throttle():
    sizes = {("t", 0): 30, ("t", 1): 50, ("t", 2): 70}
    # broker 4 receives 30 + 50; leaders 1 and 2 send 30 and 50: broker 4 decides
    assert ideal_seconds(MOVES, {("t", 0): 1, ("t", 1): 2, ("t", 2): 3}, sizes, 10) == 8.0
    # one leader sending both: in and out equal
    assert ideal_seconds(MOVES, {("t", 0): 2, ("t", 1): 2, ("t", 2): 3}, sizes, 10) == 8.0
    # two new replicas of one partition: its leader sends twice, each receiver once
    two = [{"topic": "t", "partition": 0, "before": [1], "after": [1, 4, 5]}]
    assert ideal_seconds(two, {("t", 0): 1}, {("t", 0): 40}, 10) == 8.0
    assert ideal_seconds([], {}, {}, 10) == 0.0


def test_latency_figures_keep_only_the_records_sent_in_the_window():
    samples = [(float(t), float(t)) for t in range(1, 201)]
    got = latency_figures(samples, 101, 200)
    assert got["records"] == 100 and got["p50_ms"] == 150.5 and got["p99_ms"] == 199.0 and got["max_ms"] == 200.0
    assert latency_figures(samples, 300, 400) == {"records": 0, "p50_ms": None, "p99_ms": None}
