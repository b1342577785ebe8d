"""The overview in the console (Debian's chromium, the package's dev cluster): throughput after a
produce, and the under-replicated count turning red when a broker is killed (SIGKILL) and
clearing after it restarts. It kills a broker, so it runs last (pytest takes the modules in
name order). Waits are Playwright's ``expect`` with deadlines, never sleeps."""

from __future__ import annotations

import re
import uuid

from tests.console.test_groups import produce

try:
    from playwright.sync_api import expect
except ImportError:      # the browser fixture then skips, or fails under ODRADEK_REQUIRE_TOOLS=1, saying why
    expect = None

ISR_CHANGE_MS = 60_000      # a killed broker leaves the ISRs once its ZooKeeper session expires (conftest: 6 s)


def test_overview_shows_throughput_and_urp_red_after_a_broker_kill_then_clear(page, shot, console_cluster):
    topic = f"console-urp-{uuid.uuid4().hex[:8]}"
    console_cluster.create_topic(topic, partitions=3, replication_factor=3)
    page.goto("/console/#/overview")
    urp = page.locator("#urp")
    expect(urp).to_have_class(re.compile(r"\bgood\b"))
    expect(page.get_by_role("table", name="Live brokers").locator("tbody tr")).to_have_count(3)
    legend = page.locator("#throughput-legend")
    expect(legend).to_contain_text("In 0 B/s")        # two samples taken: the next rate is the produce's
    produce(console_cluster.bootstrap, topic, 200)
    expect(legend).to_contain_text(re.compile(r"In [1-9][\d.]* (B|KiB|MiB)/s"))
    shot("overview")

    console_cluster.run("kill", "3")
    try:
        expect(urp).to_have_class(re.compile(r"\bbad\b"), timeout=ISR_CHANGE_MS)
        expect(page.get_by_role("table", name="Under-replicated partitions")).to_contain_text(topic)
        shot("overview-urp-red")
    finally:
        console_cluster.run("start", "3")
    expect(urp).to_have_class(re.compile(r"\bgood\b"), timeout=ISR_CHANGE_MS)
    expect(page.get_by_role("table", name="Live brokers").locator("tbody tr")).to_have_count(3)
    shot("overview-urp-clear")
