"""The tests' Kubernetes control plane never starts on a port picked free and then lost: etcd and
kube-apiserver, handed a port another process holds, are started again on another."""

from __future__ import annotations

import socket

import pytest

from tests.support.k8s import control_plane_module, need

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(600)]


def test_a_taken_port_is_retried_on_another(k8s_bins, tmp_path, monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        held = taken.getsockname()[1]
        fresh = iter(range(20000, 20100))
        handed = []

        # calls: etcd's client and peer ports (twice: the client port is taken), then the API
        # server's port (twice: taken the first time)
        def candidate_port() -> int:
            port = held if len(handed) in (0, 4) else next(fresh)
            handed.append(port)
            return port
        monkeypatch.setattr(control_plane_module, "candidate_port", candidate_port)
        cp = control_plane_module.ControlPlane(tmp_path, need(k8s_bins, "kube-apiserver"))
        try:
            cp.start()
            assert cp.port != held and f":{held}" not in cp.etcd_url
            assert handed.count(held) == 2 and len(handed) == 6
            assert cp._get("/readyz") == 200
        finally:
            cp.stop()
