"""Kafka request handlers, one module per area; ``table(ctx)`` is what the broker serves.

Each handler takes ``(ctx, header, request)``, ``ctx`` being the broker's ``BrokerContext``,
and returns a kio response entity of the request's version (or encoded pieces, for Fetch; or
None when no response is due), or an ``Answer`` of one with the throttle time its quotas decided
(``handlers.answer``).
"""

from __future__ import annotations

from functools import partial

from odradek.broker.context import BrokerContext
from odradek.broker.handlers import (acls, admin, client_quotas, configs, consumer_groups, fetch, groups,
                                     leadership, log_admin, metadata, offset_for_leader_epoch, offsets, produce,
                                     producer_ids, scram, transactions, txn_markers)
from odradek.protocol.api_keys import ApiKey

# api key: (min version, max version, handler). ApiVersions is the Dispatcher's; SaslHandshake and
# SaslAuthenticate are the connection gate's (odradek.broker.security.gate), before any of these.
_TABLE = {
    ApiKey.PRODUCE: (3, 11, produce.produce),
    ApiKey.FETCH: (4, 16, fetch.fetch),
    ApiKey.LIST_OFFSETS: (1, 9, offsets.list_offsets),
    ApiKey.METADATA: (1, 12, metadata.metadata),
    ApiKey.CREATE_TOPICS: (2, 7, admin.create_topics),
    ApiKey.DELETE_TOPICS: (1, 6, admin.delete_topics),
    ApiKey.INIT_PRODUCER_ID: (0, 5, producer_ids.init_producer_id),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4, offset_for_leader_epoch.offset_for_leader_epoch),
    ApiKey.WRITE_TXN_MARKERS: (0, 1, txn_markers.write_txn_markers),
    ApiKey.DESCRIBE_CONFIGS: (1, 4, configs.describe_configs),
    ApiKey.ALTER_CONFIGS: (0, 2, configs.alter_configs),
    ApiKey.CREATE_PARTITIONS: (0, 3, admin.create_partitions),
    ApiKey.ELECT_LEADERS: (0, 2, leadership.elect_leaders),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1, configs.incremental_alter_configs),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0, leadership.alter_partition_reassignments),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0, leadership.list_partition_reassignments),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1, client_quotas.describe_client_quotas),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1, client_quotas.alter_client_quotas),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0, scram.describe_user_scram_credentials),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0, scram.alter_user_scram_credentials),
    ApiKey.DESCRIBE_CLUSTER: (0, 1, metadata.describe_cluster),
}
_TABLE.update(groups.TABLE)  # FindCoordinator, group membership, offsets, group admin
_TABLE.update(consumer_groups.TABLE)  # KIP-848: ConsumerGroupHeartbeat, ConsumerGroupDescribe
_TABLE.update(acls.TABLE)    # CreateAcls, DescribeAcls, DeleteAcls
_TABLE.update(transactions.TABLE)  # AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, Describe/ListTransactions
_TABLE.update(log_admin.TABLE)  # DeleteRecords, DescribeLogDirs, DescribeProducers


def table(ctx: BrokerContext) -> dict:
    return {key: (lo, hi, partial(fn, ctx)) for key, (lo, hi, fn) in _TABLE.items()}
