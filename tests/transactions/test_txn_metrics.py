"""The transaction coordinator's Prometheus series (``odradek.broker.txn.metrics``) over a
coordinator on fakes: Kafka's names as Strimzi's rules give them, partition-load-time avg/max
over the last 30-60 s (NaN without a load, as Kafka's sensors), the marker queues' sizes; and
WriteTxnMarkers batched per destination broker across transactions (``marker_channel``)."""

from __future__ import annotations

import asyncio
import math

from odradek.broker.txn.metrics import TxnCollector, WindowedTimes
from tests.observability.test_collectors import samples
from tests.transactions.test_coordinator import Harness

LOAD = "kafka_server_transaction_coordinator_metrics_partition_load_time_"
QUEUES = "kafka_coordinator_transaction_transactionmarkerchannelmanager_"


def test_partition_load_time_avg_and_max_over_kafkas_window():
    now = [100.0]
    times = WindowedTimes(clock=lambda: now[0])
    assert math.isnan(times.avg()) and math.isnan(times.max())
    times.record(10.0)
    now[0] += 30
    times.record(30.0)
    assert (times.avg(), times.max()) == (20.0, 30.0)
    now[0] += 31       # the first load is out of the 60 s window
    assert (times.avg(), times.max()) == (30.0, 30.0)
    now[0] += 30
    assert math.isnan(times.max())


def test_series_in_kafkas_names_with_the_queues():
    harness = Harness()
    coord = harness.coord
    coord.load_times.record(12.5)
    coord.markers.unknown_destination = {object(), object()}
    coord.append_retries.add("tx")
    got = samples(TxnCollector(coord))
    assert got[(LOAD + "avg", ())] == 12.5 and got[(LOAD + "max", ())] == 12.5
    assert got[(QUEUES + "unknowndestinationqueuesize", ())] == 2
    assert got[(QUEUES + "logappendretryqueuesize", ())] == 1


def test_markers_waiting_for_a_leader_count_as_unknown_destination():
    from types import SimpleNamespace

    from odradek.broker.txn.markers import MarkerSender
    meta = SimpleNamespace(partitions=[SimpleNamespace(leader=-1)])
    sender = MarkerSender(1, SimpleNamespace(topic=lambda t: meta, is_live=lambda b: True))
    seen = []

    def still_valid():   # the first round finds no leader; the second sees the queue, then stops
        seen.append(len(sender.unknown_destination))
        return len(seen) < 2
    assert asyncio.run(sender.send(7, 0, True, 3, {("out", 0)}, still_valid)) is False
    assert seen == [0, 1] and sender.unknown_destination == set()


# -- WriteTxnMarkers batched per destination broker (marker_channel) -----------------------------
def test_markers_for_one_broker_share_requests_across_transactions():
    from types import SimpleNamespace

    from odradek.broker.txn.marker_channel import MarkerChannel
    from odradek.broker.txn_markers import TxnMarker
    from odradek.errors import ErrorCode as E
    sent = []

    class Client:
        async def request(self, api_key, version, req, timeout):
            sent.append(sorted(m.producer_id for m in req.markers))
            await asyncio.sleep(0)
            return SimpleNamespace(markers=[SimpleNamespace(producer_id=m.producer_id, topics=[SimpleNamespace(
                name=t.name, partitions=[SimpleNamespace(partition_index=p, error_code=E.none if m.producer_id < 3
                                                         else E.not_leader_or_follower) for p in t.partition_indexes])
                for t in m.topics]) for m in req.markers])

    async def run():
        channel = MarkerChannel(2, Client, 5.0)
        markers = [TxnMarker(1, 0, 4, True, (("a", 0), ("b", 1))), TxnMarker(2, 0, 4, False, (("a", 0),)),
                   TxnMarker(3, 0, 4, True, (("b", 0),)), TxnMarker(1, 1, 4, True, (("a", 1),))]
        return await asyncio.gather(*(channel.write(m) for m in markers))
    results = asyncio.run(run())
    # the first three transactions in one request; producer 1's next marker in the following one
    assert sent == [[1, 2, 3], [1]]
    assert results == [{("a", 0): E.none, ("b", 1): E.none}, {("a", 0): E.none},
                       {("b", 0): E.not_leader_or_follower}, {("a", 1): E.none}]
