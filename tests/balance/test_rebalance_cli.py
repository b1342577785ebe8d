"""``odradek rebalance``'s flow over a fake cluster (no processes), in-process as with
``--bootstrap-server``: the proposal printed, a dry run moving nothing, an execution followed to
the end under its throttle, a replication-factor change, a plan refused while reassignments run,
and Ctrl-C stopping an in-process run; with ``--data-dir`` Ctrl-C leaves the controller's
execution running and says how to stop it."""

from __future__ import annotations

import json

import pytest

from odradek.balance import Broker, ClusterModel, Partition
from odradek.rebalance import cli, targets
from tests.balance.test_executor import FakePort


class FakeKafkaPort(FakePort):
    def __init__(self, model: ClusterModel, **kw) -> None:
        super().__init__({p.key: p.replicas for p in model.partitions}, **kw)
        self.brokers = model.brokers

    def model(self, sizes=None, topics=None) -> ClusterModel:
        return ClusterModel(self.brokers, tuple(Partition(t, p, rs, rs[0], (sizes or {}).get((t, p), 0))
                                                for (t, p), rs in sorted(self.replicas.items())))

    def sizes(self):
        return {k: 1000 for k in self.replicas}

    def ongoing_now(self):
        return set(self.running)

    def close(self) -> None:
        pass


def _port(**kw) -> FakeKafkaPort:
    return FakeKafkaPort(ClusterModel(tuple(Broker(i) for i in range(1, 5)),
                                      tuple(Partition("t", p, tuple((p + i) % 3 + 1 for i in range(3)), p % 3 + 1)
                                            for p in range(12))), polls=1, **kw)


def _run(port: FakeKafkaPort, monkeypatch, *argv: str) -> int:
    monkeypatch.setattr(targets.InProcessTarget, "interval", 0)
    monkeypatch.setattr(cli, "InProcessTarget", lambda _port: targets.InProcessTarget(port))
    import odradek.rebalance.kafka_port as kp
    monkeypatch.setattr(kp, "KafkaPort", lambda access: port)
    return cli.main(["--bootstrap-server", "127.0.0.1:1", *argv])


def test_dry_run_prints_the_proposal_and_moves_nothing(monkeypatch, capsys):
    port = _port()
    assert _run(port, monkeypatch, "--add-brokers", "4", "--dry-run") == 0
    out = capsys.readouterr().out
    assert "add-brokers" in out and "bytes to copy" in out
    assert not [c for c in port.calls if c[0] == "reassign"]


def test_add_brokers_runs_to_the_end_under_the_throttle(monkeypatch, capsys):
    port = _port()
    assert _run(port, monkeypatch, "--add-brokers", "4", "--throttle", "1000", "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"]["state"] == "completed" and out["status"]["moves_done"] == len(out["proposal"]["moves"])
    assert sum(4 in rs for rs in port.replicas.values()) == 9   # 36 replicas over 4 brokers
    assert port.broker_configs[4] == {} and ("broker", 4) in port.calls


def test_replication_factor_change(monkeypatch, capsys):
    port = _port()
    assert _run(port, monkeypatch, "--topic", "t", "--replication-factor", "2") == 0
    assert all(len(rs) == 2 for rs in port.replicas.values())
    assert "completed" in capsys.readouterr().out


def test_refused_while_reassignments_run(monkeypatch, capsys):
    port = _port()
    port.running[("t", 0)] = [(1, 2, 4), 100]
    assert _run(port, monkeypatch, "--add-brokers", "4") == 2
    assert "REASSIGNMENT_IN_PROGRESS" in capsys.readouterr().err


def test_ctrl_c_stops_an_in_process_run(monkeypatch, capsys):
    port = _port()
    port.polls = 1000
    calls = {"n": 0}
    real = targets.InProcessTarget.poll

    def poll(self):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(self)
    monkeypatch.setattr(targets.InProcessTarget, "poll", poll)
    assert _run(port, monkeypatch, "--add-brokers", "4", "--throttle", "10") == 130
    assert "stopped" in capsys.readouterr().err
    assert not port.running and port.broker_configs[4] == {}


def test_ctrl_c_leaves_the_controllers_execution_running(monkeypatch, capsys, tmp_path):
    class Target:
        resumable = True

        def propose(self, req):
            return cli.cpr.ProposalView("p", req.mode, (cli.cpr.MoveView("t", 0, (1,), (2,), 5),), 5, ())

        def execute(self, req):
            raise KeyboardInterrupt

        def close(self):
            pass
    monkeypatch.setattr(cli, "ControllerTarget", lambda data_dir: Target())
    assert cli.main(["--data-dir", str(tmp_path)]) == 130
    err = capsys.readouterr().err
    assert "keeps running in the controller" in err and f"--data-dir {tmp_path} --stop" in err


def test_the_controller_path_needs_a_dev_cluster(tmp_path):
    with pytest.raises(SystemExit, match="no dev cluster"):
        cli.main(["--data-dir", str(tmp_path), "--status"])
