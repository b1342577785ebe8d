"""The kind path (e2e/kind.sh) cannot run here (kind's node image lives in a registry): check
what can be checked — the scripts with shellcheck, the cluster config with kind's own loader."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

import local_node
from support import ROOT
from tests.support.tools import tool_missing

pytestmark = pytest.mark.k8s  # shellcheck and kind come with the e2e node

SCRIPTS = ["e2e/kind.sh", "e2e/images/build.sh", "e2e/images/zookeeper/docker-entrypoint.sh", "e2e/images/connect/stage.sh",
           "e2e/images/connect/bin/kafka-run-class.sh", "e2e/images/connect/bin/connect-distributed.sh",
           "e2e/images/connect/bin/connect-mirror-maker.sh", "e2e/images/connect/bin/kafka-server-start.sh",
           "e2e/images/connect/bin/kafka-storage.sh",
           "scripts/e2e_node.sh", "scripts/k8s/build.sh", "scripts/test.sh"]


def test_scripts_pass_shellcheck():
    if not shutil.which("shellcheck"):
        tool_missing("shellcheck is not installed (scripts/e2e_node.sh installs it)")
    result = subprocess.run(["shellcheck", *SCRIPTS], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def kind_create(kind: str, config: str, tmp_path) -> str:
    """kind loads and validates the config before anything else; the node image named here cannot
    exist, so it stops right after (no cluster, no network is made). Podman is kind's provider here
    (a docker CLI without a daemon would stop kind before it reads the config)."""
    if not shutil.which("podman"):
        tool_missing("podman is not installed (scripts/e2e_node.sh installs it)")
    result = subprocess.run([kind, "create", "cluster", "--name", "odradek-config-check", "--config", config,
                             "--image", "localhost/odradek-no-such-node-image:check",
                             "--kubeconfig", str(tmp_path / "kubeconfig")],
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "KIND_EXPERIMENTAL_PROVIDER": "podman"})
    assert result.returncode != 0
    return result.stdout + result.stderr


def test_kind_config_is_valid(tmp_path):
    try:
        kind = str(local_node.control_plane.binaries(("kind",))["kind"])
    except subprocess.CalledProcessError as e:
        tool_missing(f"kind could not be built: {e.stderr[-500:]}")
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n  - role: bogus\n")
    assert "invalid configuration" in kind_create(kind, str(bad), tmp_path)  # the check can fail
    output = kind_create(kind, str(ROOT / "e2e" / "kind.yaml"), tmp_path)
    assert "invalid configuration" not in output and "unable to decode config" not in output, output
    assert "Ensuring node image" in output, output  # past the config: at the node image
