"""Bound ports, reported by the server that bound them (``odradek.ports``), and how the dev tooling
starts a process on them (``odradek.dev.launch``): no port is picked free and handed over.

The servers here are small Python processes (no cluster): many asked for port 0 at once never
collide, each reports the port it really listens on, and a restart on a port another process
took meanwhile fails at once, saying so, instead of hanging.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from odradek import ports
from odradek.dev import launch, processes

# A server as the brokers, controllers and the gateway are: bind what it is given, report, serve.
SERVER = """
import socket, sys, time
from odradek import ports
sock = socket.create_server(("127.0.0.1", int(sys.argv[1])))
ports.report(http=sock.getsockname()[1], metrics=None)
time.sleep(120)
"""
DEADLINE_S = 60   # a Python start on a loaded 2-core machine


def _server(port: int, report: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SERVER, str(port)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, ports.ENV: str(report)})


def _stop(*procs: subprocess.Popen) -> None:
    for proc in procs:
        proc.kill()
        proc.wait(10)


def test_report_writes_the_bound_ports_atomically_and_leaves_out_none(tmp_path, monkeypatch):
    path = tmp_path / "a" / "ports.json"
    monkeypatch.setenv(ports.ENV, str(path))
    ports.report(kafka=40000, internal=40001, metrics=None)
    assert json.loads(path.read_text()) == {"pid": os.getpid(), "ports": {"kafka": 40000, "internal": 40001}}
    assert ports.read(path) == {"kafka": 40000, "internal": 40001}
    assert [p.name for p in path.parent.iterdir()] == ["ports.json"]   # no temporary file left


def test_without_the_variable_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv(ports.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    ports.report(kafka=1)
    assert list(tmp_path.iterdir()) == []


def test_the_reader_fails_at_once_when_the_server_is_gone_and_at_its_deadline_otherwise(tmp_path):
    looks = []
    with pytest.raises(ports.PortsNotReported, match="broker-1 exited before reporting"):
        ports.wait_for(tmp_path / "none.json", 60, alive=lambda: looks.append(1), what="broker-1")
    assert len(looks) == 1   # the exit was seen on the first look, not at the deadline
    with pytest.raises(ports.PortsNotReported, match="did not report its ports within"):
        ports.wait_for(tmp_path / "none.json", 0.2)


def test_servers_asked_for_port_0_at_once_never_collide_and_report_what_they_listen_on(tmp_path):
    reports = [tmp_path / f"server-{i}.json" for i in range(8)]
    procs = [_server(0, report) for report in reports]
    try:
        bound = [ports.wait_for(report, DEADLINE_S, lambda p=p: p.poll() is None)["http"]
                 for report, p in zip(reports, procs)]
        assert len(set(bound)) == len(procs), bound
        for port, proc in zip(bound, procs):
            assert port in processes.listening_ports(proc.pid)   # its own socket, not someone else's
    finally:
        _stop(*procs)


def _state(tmp_path: Path, name: str, port: int) -> dict:
    return {"data_dir": str(tmp_path), "processes": {}, "commands": {name: [sys.executable, "-c", SERVER, str(port)]}}


def test_a_restart_on_its_recorded_port_binds_it_again(tmp_path):
    state = _state(tmp_path, "gateway", 0)
    first = launch.start(state, "gateway")
    try:
        port = launch.await_ports(state, first, DEADLINE_S)["http"]
    finally:
        _stop(first.proc)
    state["commands"]["gateway"] = [sys.executable, "-c", SERVER, str(port)]
    again = launch.start(state, "gateway")
    try:
        assert launch.await_ports(state, again, DEADLINE_S) == {"http": port}
        assert state["ports"]["gateway"] == {"http": port}
    finally:
        _stop(again.proc)


def test_a_restart_on_a_port_taken_meanwhile_fails_at_once_saying_so(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        state = _state(tmp_path, "broker-1", taken.getsockname()[1])
        launched = launch.start(state, "broker-1")
        started = time.monotonic()
        with pytest.raises(launch.StartFailed, match="(?i)address already in use") as e:
            launch.await_ports(state, launched, DEADLINE_S * 10)
        assert time.monotonic() - started < DEADLINE_S, "it waited for its deadline instead of the exit"
        assert "broker-1 exited before reporting its ports" in str(e.value)
        assert "exited with code 1" in str(e.value)


def test_a_previous_runs_report_is_not_taken_for_this_ones(tmp_path):
    state = _state(tmp_path, "controller-0", 0)
    launch.ports_path(tmp_path, "controller-0").parent.mkdir(parents=True)
    launch.ports_path(tmp_path, "controller-0").write_text(json.dumps({"pid": 1, "ports": {"http": 1}}))
    launched = launch.start(state, "controller-0")
    try:
        assert launch.await_ports(state, launched, DEADLINE_S)["http"] != 1
    finally:
        _stop(launched.proc)


def test_preferred_ports_and_candidate_ports():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        assert launch.preferred(taken.getsockname()[1]) == 0   # taken: any port instead
    assert launch.preferred(0) == 0
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert all(1024 <= processes.candidate_port() < low for _ in range(100))   # never an ephemeral port
