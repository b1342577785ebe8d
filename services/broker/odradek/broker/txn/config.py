"""Transaction coordinator settings (keys from the config registry) and transactional-id placement.

A transactional id lives on partition ``abs(hashCode(transactional.id)) % partitions`` of
``__transaction_state``: Kafka's ``Utils.abs(String.hashCode)``, the group placement's function.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from odradek.config import bound_values, setting
from odradek.config.transactions import TXN_CONFIGS
from odradek.topics import TRANSACTION_STATE_TOPIC as TXN_TOPIC  # noqa: F401 - re-exported


@dataclass(frozen=True, slots=True)
class TxnConfig:
    """Kafka's transaction coordinator keys, defaults and validation (``odradek.config.transactions``)."""
    partitions: int = setting("transaction.state.log.num.partitions")
    replication_factor: int = setting("transaction.state.log.replication.factor")
    min_isr: int = setting("transaction.state.log.min.isr")
    segment_bytes: int = setting("transaction.state.log.segment.bytes")
    max_timeout_ms: int = setting("transaction.max.timeout.ms")
    id_expiration_ms: int = setting("transactional.id.expiration.ms")
    abort_interval_ms: int = setting("transaction.abort.timed.out.transaction.cleanup.interval.ms")
    expire_interval_ms: int = setting("transaction.remove.expired.transaction.cleanup.interval.ms")
    verify_partitions: bool = setting("transaction.partition.verification.enable")

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> "TxnConfig":
        """The transaction keys among a broker's coordinator settings (others are the group's)."""
        return cls(**bound_values(cls, {k: v for k, v in settings.items() if k in TXN_CONFIGS}))
