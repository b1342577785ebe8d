"""What a process imports at start (``odradek.startup``): the entry points leave out hypothesis
(kio's strategies for it, ~0.7 s of CPU at each start where the test extra is installed), a
broker that stores nothing remotely leaves out boto3 (~0.8 s), and an ``odradek dev`` command,
a blocking caller of the control plane, leaves out aiohttp (~0.4 s). Every broker, controller
and ``odradek dev`` command the suite starts paid them."""

from __future__ import annotations

import subprocess
import sys

import pytest

ENTRY = """
import sys
from odradek.startup import skip_dev_only_imports
skip_dev_only_imports()
import {module}
print(sorted(m for m in ("hypothesis", "boto3", "aiohttp") if sys.modules.get(m) is not None))
"""


@pytest.mark.parametrize(("module", "imported"), [("odradek.broker.server", ["aiohttp"]),
                                                  ("odradek.controller.cli", ["aiohttp"]),
                                                  ("odradek.dev.cluster", [])])
def test_a_process_starts_without_what_it_does_not_use(module, imported):
    out = subprocess.run([sys.executable, "-c", ENTRY.format(module=module)], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert out.strip() == str(imported), out


def test_the_entry_points_skip_hypothesis_first():
    """Each ``python -m`` entry point and the ``odradek`` command call ``skip_dev_only_imports``
    before importing their parts (kio is imported with them)."""
    code = ("import sys, runpy; sys.argv = ['odradek', '--help']\n"
            "try:\n    runpy.run_module('{module}', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print(sys.modules.get('hypothesis', 'absent'))")
    for module in ("odradek.broker", "odradek.controller", "odradek.gateway", "odradek.cli"):
        out = subprocess.run([sys.executable, "-c", code.format(module=module)], capture_output=True, text=True,
                             check=True, timeout=120).stdout
        assert out.strip().splitlines()[-1] == "None", (module, out)
