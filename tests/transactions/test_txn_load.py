"""The transaction coordinator loading a ``__transaction_state`` partition from a real log
that holds records it cannot parse (a client could once produce garbage there, issue 30):
they are counted (the metric), logged once for the load and skipped; every other
transactional id of the partition is served."""

import asyncio
from types import SimpleNamespace

from prometheus_client.core import Metric

from odradek.broker.storage import LogManager
from odradek.broker.txn.config import TXN_TOPIC, TxnConfig
from odradek.broker.txn.coordinator import TransactionCoordinator
from odradek.broker.txn.metadata import TxnState
from odradek.broker.txn.metrics import TxnCollector
from odradek.broker.txn.records import TxnLogValue, txn_key, txn_value
from odradek.cluster.model import PartitionState, TopicMetadata
from odradek.records import Record, build_batch
from tests.transactions.test_coordinator import FakeMarkers


class Replicas:
    """``topic`` and ``leader`` of a one-partition ``__transaction_state`` led here, on a real log."""

    def __init__(self, data_dir) -> None:
        self.logs = LogManager(data_dir)
        self.meta = TopicMetadata(TXN_TOPIC, "id", (PartitionState(0, (1,), 1, 3, (1,)),), {})

    def topic(self, name):
        return self.meta if name == TXN_TOPIC else None

    def leader(self, topic, p):
        return SimpleNamespace(state=self.meta.partitions[p], log=self.logs.get_or_create(topic, p))

    def write(self, *records: Record) -> None:
        log = self.logs.get_or_create(TXN_TOPIC, 0)
        log.append(memoryview(build_batch(records)), leader_epoch=3)


def _value(pid: int) -> bytes:
    return txn_value(TxnLogValue(pid, 0, 60_000, TxnState.ONGOING.value, (("out", 0),), 1000, 900))


def test_unparseable_records_are_skipped_and_the_other_ids_load(tmp_path, caplog):
    replicas = Replicas(tmp_path)
    replicas.write(Record(_value(1001), txn_key("app-1")))
    replicas.write(Record(b"\x00\x00\x00", txn_key("app-bad")),          # a value cut short
                   Record(b"\x00\x09" + bytes(20), txn_key("app-bad-2")),  # a value of no known version
                   Record(b"x", b"\x00\x00\x7f\xff"))                     # a key that runs past the record
    replicas.write(Record(_value(1002), txn_key("app-2")))

    async def load() -> TransactionCoordinator:
        markers = FakeMarkers()
        markers.unknown_destination = set()
        coordinator = TransactionCoordinator(1, TxnConfig(partitions=1), None, None, markers)
        coordinator.on_metadata(replicas)
        await coordinator.owned[0].task
        return coordinator
    with caplog.at_level("WARNING", logger="odradek.broker.internal_topic"):
        coordinator = asyncio.run(load())
    owned = coordinator.owned[0]
    assert owned.loaded and set(owned.txns) == {"app-1", "app-2"}
    assert owned.txns["app-2"].producer_id == 1002 and owned.txns["app-2"].state == TxnState.ONGOING
    assert coordinator.unparseable_records == 3
    logged = [r.getMessage() for r in caplog.records if "cannot be parsed" in r.getMessage()]
    assert len(logged) == 1 and "skipped 3 records" in logged[0]
    series = {s.name: s.value for family in TxnCollector(coordinator).collect() if isinstance(family, Metric)
              for s in family.samples}
    assert series["odradek_transaction_coordinator_unparseable_records_total"] == 3
