"""``odradek rebalance``'s flow over a fake cluster (no processes): the proposal printed, a dry
run moving nothing, a plan refused while reassignments run, a replication-factor change,
``--stop`` cancelling and clearing throttles."""

from __future__ import annotations

import pytest

from odradek.balance import Broker, ClusterModel, Partition
from odradek.rebalance import cli
from tests.balance.test_executor import FakeCluster


class FakePort(FakeCluster):
    def __init__(self, model: ClusterModel, **kw) -> None:
        super().__init__(model, **kw)
        self.brokers = model.brokers

    def model(self, sizes=None, topics=None) -> ClusterModel:
        return ClusterModel(self.brokers, tuple(Partition(t, p, rs, rs[0], (sizes or {}).get((t, p), 0))
                                                for (t, p), rs in sorted(self.replicas.items())))

    def sizes(self):
        return {k: 1000 for k in self.replicas}

    def close(self) -> None:
        pass


def _port() -> FakePort:
    return FakePort(ClusterModel(tuple(Broker(i) for i in range(1, 5)),
                                 tuple(Partition("t", p, tuple((p + i) % 3 + 1 for i in range(3)), p % 3 + 1)
                                       for p in range(12))), polls=1)


def _run(port: FakePort, monkeypatch, *argv: str) -> int:
    cli.executor.POLL_S = 0
    monkeypatch.setattr(cli, "KafkaPort", lambda access: port)
    return cli.main(["--bootstrap-server", "127.0.0.1:1", *argv])


def test_dry_run_prints_the_proposal_and_moves_nothing(monkeypatch, capsys):
    port = _port()
    assert _run(port, monkeypatch, "--add-brokers", "4", "--dry-run") == 0
    out = capsys.readouterr().out
    assert "9 replicas to move, 9000 bytes to copy" in out
    assert not [c for c in port.calls if c[0] == "reassign"]


def test_add_brokers_executes_then_elects(monkeypatch, capsys):
    port = _port()
    assert _run(port, monkeypatch, "--add-brokers", "4", "--throttle", "100") == 0
    assert sum(4 in rs for rs in port.replicas.values()) == 9
    assert "done: 9/9 partitions moved" in capsys.readouterr().out
    assert port.calls[-1][0] == "elect"


def test_refused_while_reassignments_run(monkeypatch, capsys):
    port = _port()
    port.running[("t", 0)] = [(1, 2, 4), 10 ** 6]
    assert _run(port, monkeypatch, "--add-brokers", "4") == 1
    assert "reassignments are running" in capsys.readouterr().err


def test_replication_factor_change(monkeypatch):
    port = _port()
    assert _run(port, monkeypatch, "--topic", "t", "--replication-factor", "2") == 0
    assert all(len(rs) == 2 for rs in port.replicas.values())


def test_replication_factor_needs_a_topic(monkeypatch, capsys):
    assert _run(_port(), monkeypatch, "--replication-factor", "2") == 2
    assert "--topic" in capsys.readouterr().err


def test_stop_cancels_and_clears_throttles(monkeypatch, capsys):
    port = _port()
    port.running[("t", 0)] = [(1, 2, 4), 10 ** 6]
    port.topic_configs["t"] = {"leader.replication.throttled.replicas": "0:1"}
    assert _run(port, monkeypatch, "--stop") == 0
    assert not port.running and port.topic_configs["t"] == {}
    assert "1 reassignments cancelled" in capsys.readouterr().out


@pytest.mark.parametrize("bad", ["4,x", "a"])
def test_bad_ids(bad, capsys):
    with pytest.raises(SystemExit):
        cli.main(["--add-brokers", bad])
