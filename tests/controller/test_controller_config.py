"""The controller's settings come from the config registry (``odradek.config.controller``): the
typed ``ControllerConfig`` takes its defaults there, the CLI's ``--config`` and flags both
land in it (a flag wins), bad values are refused at start-up, and no key is stated twice."""

from __future__ import annotations

import pytest

from odradek.config import BROKER_CONFIGS, GROUP_CONFIGS, TOPIC_CONFIGS, settings_of
from odradek.config.controller import CONTROLLER_CONFIGS
from odradek.controller.cli import parse_args
from odradek.controller.config import ControllerConfig

ZK = ["--zookeeper", "z:2181"]


def test_the_typed_config_takes_its_defaults_from_the_registry():
    assert settings_of(ControllerConfig()) == {k.name: k.type.format(k.typed_default)
                                               for k in CONTROLLER_CONFIGS.values()}
    for key in CONTROLLER_CONFIGS.values():
        key.parse(key.default)
        assert key.doc and "\n" not in key.doc
    assert not set(CONTROLLER_CONFIGS) & {*TOPIC_CONFIGS, *BROKER_CONFIGS, *GROUP_CONFIGS}


def test_the_cli_builds_it_from_config_and_flags_a_flag_winning():
    config = parse_args([*ZK, "--config", "num.partitions=3", "--config", "auto.leader.rebalance.enable=false",
                         "--config", "leader.imbalance.per.broker.percentage=25",
                         "--config", "zookeeper.session.timeout.ms=6000"]).controller_config
    assert (config.num_partitions, config.auto_leader_rebalance, config.leader_imbalance_per_broker_percentage) \
        == (3, False, 25.0)
    flags = parse_args([*ZK, "--config", "num.partitions=3", "--default-partitions", "2",
                        "--default-replication-factor", "2", "--no-auto-leader-rebalance",
                        "--leader-imbalance-check-interval-seconds", "0.5"])
    config = flags.controller_config
    assert (config.num_partitions, config.default_replication_factor, config.auto_leader_rebalance,
            config.leader_imbalance_check_interval_s) == (2, 2, False, 0.5)
    assert flags.zk_timeouts.session_ms == 18000
    assert parse_args(ZK).controller_config == ControllerConfig()


@pytest.mark.parametrize("setting", ["num.partitions=0", "auto.leader.rebalance.enable=maybe",
                                     "leader.imbalance.per.broker.percentage=101", "controller.nope=1"])
def test_bad_controller_settings_stop_the_start(setting):
    with pytest.raises(SystemExit):
        parse_args([*ZK, "--config", setting])
