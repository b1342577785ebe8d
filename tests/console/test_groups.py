"""A consumer group in the console (Debian's chromium, the package's dev cluster): its lag
falling while a real consumer (confluent-kafka) consumes and commits, then an offset reset
behind its confirmation (cancel first, then confirm). Waits are Playwright's ``expect`` with
deadlines, never sleeps."""

from __future__ import annotations

import re
import uuid

from confluent_kafka import Consumer, Producer

from odradek.dev.waiting import wait_until

try:
    from playwright.sync_api import expect
except ImportError:      # the browser fixture then skips, or fails under ODRADEK_REQUIRE_TOOLS=1, saying why
    expect = None

RECORDS = 20


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, f'{{"n": {i}}}'.encode(), key=str(i).encode())
    assert producer.flush(30) == 0


def consume(consumer: Consumer, count: int) -> None:
    """Polls until ``count`` records came, then commits them synchronously."""
    got = []

    def more():
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m)
        return len(got) >= count
    wait_until(more, 60, f"{count} records for the consumer", interval=0)
    consumer.commit(asynchronous=False)


def total_lag(page, n: int):
    expect(page.locator("#total-lag")).to_contain_text(re.compile(rf"Total lag\s*{n}$"))


def test_group_lag_falls_as_a_consumer_consumes_and_an_offset_reset_asks_first(page, shot, console_cluster):
    topic, group = f"console-lag-{uuid.uuid4().hex[:8]}", f"console-group-{uuid.uuid4().hex[:8]}"
    console_cluster.create_topic(topic, partitions=1, replication_factor=3)
    produce(console_cluster.bootstrap, topic, RECORDS)
    consumer = Consumer({"bootstrap.servers": console_cluster.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        consume(consumer, 5)
        page.goto("/console/#/groups")
        expect(page.get_by_role("link", name=group)).to_be_visible()
        page.get_by_role("link", name=group).click()
        expect(page.get_by_role("heading", name=f"Group {group}")).to_be_visible()
        total_lag(page, RECORDS - 5)
        lags = page.get_by_role("table", name="Lag per partition")
        expect(lags.locator("tbody tr")).to_have_count(1)
        expect(lags).to_contain_text(topic)
        expect(page.get_by_role("table", name="Members").locator("tbody tr")).to_have_count(1)
        shot("group-lagging")
        consume(consumer, RECORDS - 5)
        total_lag(page, 0)                              # the page refreshes itself
        shot("group-caught-up")
    finally:
        consumer.close()
    expect(page.locator("main .cards")).to_contain_text("EMPTY", timeout=60_000)

    reset = page.get_by_role("form", name="Reset offsets")
    reset.get_by_label("Reset to").select_option("earliest")
    reset.get_by_role("button", name="Reset offsets…").click()
    dialog = page.get_by_role("dialog", name="Are you sure?")
    expect(dialog).to_contain_text(group)
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    total_lag(page, 0)                                  # cancelled: nothing reset
    reset.get_by_role("button", name="Reset offsets…").click()
    dialog.get_by_role("button", name="Reset offsets").click()
    total_lag(page, RECORDS)
    shot("group-reset")
