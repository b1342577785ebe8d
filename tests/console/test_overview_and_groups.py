"""The console's live views in Debian's chromium, on the module's dev cluster: a consumer
group's lag falling while a real consumer (confluent-kafka) consumes and commits, then an
offset reset behind its confirmation; the overview's throughput after a produce, and its
under-replicated count turning red when a broker is killed and clearing after the broker
restarts. Waits are Playwright's ``expect`` with deadlines, never sleeps."""

from __future__ import annotations

import re
import uuid

import pytest
from confluent_kafka import Consumer, Producer

from odradek.dev.waiting import wait_until

expect = pytest.importorskip("playwright.sync_api").expect

RECORDS = 20
ISR_CHANGE_MS = 90_000      # a killed broker leaves the ISR once its ZooKeeper session expires


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
