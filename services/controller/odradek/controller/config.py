"""The controller's settings: its registry keys typed (``ControllerConfig``) and an instance's
identity and transport (``Settings``), what the CLI builds and the service reads.

``ControllerConfig``'s fields take their defaults, parsers and validation from
``odradek.config.controller``: a default is stated there only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from odradek.cluster import versions
from odradek.cluster.control_plane_tls import ControlPlaneTls
from odradek.config import bound_values, setting
from odradek.config.controller import (AUTO_LEADER_REBALANCE, CONTROLLER_CONFIGS, DEFAULT_REPLICATION_FACTOR,
                                       DELETION_PUSH_TIMEOUT, LEADER_IMBALANCE_CHECK_INTERVAL,
                                       LEADER_IMBALANCE_PER_BROKER_PERCENTAGE, NUM_PARTITIONS, RESYNC_INTERVAL)


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    num_partitions: int = setting(NUM_PARTITIONS, keys=CONTROLLER_CONFIGS)
    default_replication_factor: int = setting(DEFAULT_REPLICATION_FACTOR, keys=CONTROLLER_CONFIGS)
    auto_leader_rebalance: bool = setting(AUTO_LEADER_REBALANCE, keys=CONTROLLER_CONFIGS)
    leader_imbalance_check_interval_s: float = setting(LEADER_IMBALANCE_CHECK_INTERVAL, keys=CONTROLLER_CONFIGS)
    leader_imbalance_per_broker_percentage: float = setting(LEADER_IMBALANCE_PER_BROKER_PERCENTAGE,
                                                            keys=CONTROLLER_CONFIGS)
    resync_interval_ms: int = setting(RESYNC_INTERVAL, keys=CONTROLLER_CONFIGS)
    deletion_push_timeout_ms: int = setting(DELETION_PUSH_TIMEOUT, keys=CONTROLLER_CONFIGS)

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> "ControllerConfig":
        """From ``{key: string}`` of ``CONTROLLER_CONFIGS`` keys; INVALID_CONFIG (``KafkaError``)
        for another key or a bad value."""
        return cls(**bound_values(cls, settings))

    @property
    def resync_interval_s(self) -> float:
        return self.resync_interval_ms / 1000

    @property
    def deletion_push_timeout_s(self) -> float:
        return self.deletion_push_timeout_ms / 1000


@dataclass(frozen=True, slots=True)
class Settings:
    id: str
    url: str
    config: ControllerConfig = ControllerConfig()
    tls: ControlPlaneTls | None = None  # the control plane's mutual TLS (None: plaintext HTTP)
    # the brokers' inter.broker.protocol.version (odradek.cluster.versions), given to the controller too
    protocol_version: int = versions.CURRENT
