"""The transaction coordinator's broker keys (Kafka's names, defaults and meanings).

They travel with the group coordinator's keys (``GROUP_CONFIGS``: the coordinators' settings,
given as ``odradek broker --config KEY=VALUE``); ``odradek.broker.txn.config.TxnConfig`` binds them.
"""

from __future__ import annotations

from odradek.config.keys import BOOLEAN, INT_MAX, ConfigKey, integer, registry

TXN_CONFIGS: dict[str, ConfigKey] = registry(
    ConfigKey("transaction.state.log.num.partitions", integer(1, INT_MAX), "50",
              "partitions of __transaction_state (should not change after deployment)"),
    ConfigKey("transaction.state.log.replication.factor", integer(1, 32767), "3",
              "replication factor of __transaction_state (created once this many brokers are live)"),
    ConfigKey("transaction.state.log.min.isr", integer(1, INT_MAX), "2",
              "min.insync.replicas of __transaction_state (capped at its replication factor)"),
    ConfigKey("transaction.state.log.segment.bytes", integer(1, INT_MAX), "104857600",
              "segment.bytes of __transaction_state"),
    ConfigKey("transaction.max.timeout.ms", integer(1, INT_MAX), "900000",
              "largest transaction.timeout.ms a producer may ask (else INVALID_TRANSACTION_TIMEOUT)"),
    ConfigKey("transactional.id.expiration.ms", integer(1, INT_MAX), "604800000",
              "a transactional id with no transaction status update for this long is forgotten"),
    ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", integer(1, INT_MAX), "10000",
              "how often transactions past their timeout are looked for and aborted"),
    ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", integer(1, INT_MAX), "3600000",
              "how often expired transactional ids are looked for"),
    ConfigKey("transaction.partition.verification.enable", BOOLEAN, "true",
              "KIP-890: a partition leader asks the transaction coordinator whether a partition was added "
              "to the producer's transaction before appending its first transactional batch (else "
              "INVALID_TXN_STATE)"),
)
