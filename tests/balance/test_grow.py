"""``odradek dev start N`` for a new N: the new broker's command is an existing one's with its
own id, data directory, free ports and rack, and is recorded with the ports it bound."""

from __future__ import annotations

from odradek.dev import grow


def _state() -> dict:
    return {"data_dir": "/d", "brokers": {"1": "127.0.0.1:4001"}, "commands": {
        "controller-0": ["python", "-m", "odradek.controller", "--id", "controller-0"],
        "broker-1": ["python", "-m", "odradek.broker", "--id", "1", "--data-dir", "/d/broker-1", "--zookeeper", "z",
                     "--listen", "127.0.0.1:4001", "--config", "metrics.port=5001", "--rack", "a",
                     "--config", "min.insync.replicas=2"]}}


def test_new_broker_command():
    cmd = grow.new_broker_command(_state(), 4, rack="b")
    assert cmd == ["python", "-m", "odradek.broker", "--id", "4", "--data-dir", "/d/broker-4", "--zookeeper", "z",
                   "--listen", "127.0.0.1:0", "--config", "metrics.port=0", "--config", "min.insync.replicas=2",
                   "--rack", "b"]


def test_secured_listener_port_rewritten_and_recorded():
    state = _state()
    state["commands"]["broker-1"] = ["python", "-m", "odradek.broker", "--id", "1", "--config",
                                     "listeners=SASL_SSL://127.0.0.1:4001", "--config", "metrics.port=5001"]
    assert "listeners=SASL_SSL://127.0.0.1:0" in grow.new_broker_command(state, 7)
    grow.record(state, 7, None, {"kafka": 4007, "metrics": 5007})
    assert state["brokers"]["7"] == "127.0.0.1:4007"
    assert "listeners=SASL_SSL://127.0.0.1:4007" in state["commands"]["broker-7"]
    assert "metrics.port=5007" in state["commands"]["broker-7"]
    assert state["metrics"]["broker-7"].startswith("http://127.0.0.1:5007")
