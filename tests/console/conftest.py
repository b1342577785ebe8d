"""Fixtures of the console's browser tests: one dev cluster with its gateway for the package
(``console_cluster``: both test modules share it, a start costs ~20 s of CI), Debian's chromium driven by Playwright for Python (``browser``: the
system browser at /usr/bin/chromium, never a downloaded one; scripts/chromium.sh installs it),
a fresh ``page`` per test that fails the test on a JavaScript error, and ``shot`` saving
screenshots under var/console-screenshots/ (git-ignored).

Without chromium or Playwright the tests skip on a developer's machine and fail under
``ODRADEK_REQUIRE_TOOLS=1`` (``make test``), as every other test tool does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odradek.dev.harness import Cluster, start_cluster, stop_cluster
from tests.support.tools import tool_missing

CHROMIUM = Path(os.environ.get("ODRADEK_CHROMIUM", "/usr/bin/chromium"))
TIMEOUT_MS = 20_000
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "console-screenshots"


@pytest.fixture(scope="package")
def console_cluster(tmp_path_factory) -> Cluster:
    # a killed broker's ZooKeeper session expires in 6 s (not 18): the URP test sees it sooner
    c = start_cluster(tmp_path_factory.mktemp("console"), brokers=3, replication_factor=3, min_insync_replicas=2,
                      gateway=True, extra=("--config", "zookeeper.session.timeout.ms=6000"))
    yield c
    stop_cluster(c)


@pytest.fixture(scope="package")
def browser():
    if not CHROMIUM.exists():
        tool_missing(f"{CHROMIUM} is missing: scripts/chromium.sh installs Debian's chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        tool_missing("Playwright for Python is missing: uv sync --all-extras installs it (test extra)")
    from playwright.sync_api import expect
    expect.set_options(timeout=TIMEOUT_MS)   # every expect: a condition with this deadline
    with sync_playwright() as p:
        # --no-sandbox: CI runs as root, where chromium's sandbox refuses to start
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser, console_cluster):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=console_cluster.gateway)
    context.set_default_timeout(TIMEOUT_MS)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    context.close()
    assert not errors, f"JavaScript errors in the console: {errors}"


@pytest.fixture
def shot(page, request):
    """shot("name"): a full-page screenshot at var/console-screenshots/<test>/<name>.png in the
    checkout (git-ignored; each run overwrites its own), where a reader finds them after a run."""
    folder = SCREENSHOTS / request.node.name.replace("/", "_")
    folder.mkdir(parents=True, exist_ok=True)

    def take(name: str) -> Path:
        path = folder / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path
    return take
