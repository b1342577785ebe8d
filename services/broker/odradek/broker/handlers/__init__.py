"""Kafka request handlers, one module per area; ``table(ctx)`` is what the broker serves.

Each handler takes ``(ctx, header, request)``, ``ctx`` being the broker's ``BrokerContext``,
and returns a kio response entity of the request's version (or encoded pieces, for Fetch; or
None when no response is due).
"""

from __future__ import annotations

from functools import partial

from odradek.broker.context import BrokerContext
from odradek.broker.handlers import (acls, admin, configs, fetch, groups, leadership, log_admin, metadata,
                                     offset_for_leader_epoch, offsets, produce, producer_ids, transactions, txn_markers)

# api key: (min version, max version, handler). ApiVersions (18) is added by the Dispatcher.
_TABLE = {
    0: (3, 9, produce.produce),
    1: (4, 12, fetch.fetch),
    2: (1, 7, offsets.list_offsets),
    3: (1, 12, metadata.metadata),
    19: (2, 7, admin.create_topics),
    20: (1, 6, admin.delete_topics),
    22: (0, 5, producer_ids.init_producer_id),
    23: (2, 4, offset_for_leader_epoch.offset_for_leader_epoch),
    27: (0, 1, txn_markers.write_txn_markers),
    32: (1, 4, configs.describe_configs),
    33: (0, 2, configs.alter_configs),
    37: (0, 3, admin.create_partitions),
    43: (0, 2, leadership.elect_leaders),
    44: (0, 1, configs.incremental_alter_configs),
    45: (0, 0, leadership.alter_partition_reassignments),
    46: (0, 0, leadership.list_partition_reassignments),
    60: (0, 1, metadata.describe_cluster),
}
_TABLE.update(groups.TABLE)  # FindCoordinator, group membership, offsets, group admin
_TABLE.update(acls.TABLE)    # CreateAcls, DescribeAcls, DeleteAcls
_TABLE.update(transactions.TABLE)  # AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, Describe/ListTransactions
_TABLE.update(log_admin.TABLE)  # DeleteRecords, DescribeLogDirs, DescribeProducers


def table(ctx: BrokerContext) -> dict:
    return {key: (lo, hi, partial(fn, ctx)) for key, (lo, hi, fn) in _TABLE.items()}
