"""The console in Debian's chromium, on one dev cluster: create a topic from the form, produce a
record from the produce form, find it by offset and by timestamp in the message browser (JSON
pretty-printed, binary as hex), every control labelled and reachable with the keyboard, and
the sign-in dialog of a gateway with an auth file. Waits are Playwright's ``expect`` (a
condition with a deadline), never sleeps."""

from __future__ import annotations

import re
import time
import uuid

import pytest
from confluent_kafka import Producer

from tests.console.conftest import SCREENSHOTS
from tests.support.gateway import GatewayProcess, write_tokens

try:
    from playwright.sync_api import expect
except ImportError:      # the browser fixture then skips, or fails under ODRADEK_REQUIRE_TOOLS=1, saying why
    expect = None


@pytest.fixture(scope="module")
def topic() -> str:
    return f"console-{uuid.uuid4().hex[:8]}"


def open_console(page, view: str = "overview") -> None:
    page.goto(f"/console/#/{view}")


def test_create_topic_from_the_form(page, shot, topic):
    open_console(page, "topics")
    page.get_by_label("New topic name").fill(topic)
    page.get_by_label("Partitions").fill("2")
    page.get_by_label("Replication factor").fill("3")
    page.get_by_role("button", name="Create topic").click()
    expect(page).to_have_url(re.compile(f"#/topics/{topic}$"))
    expect(page.get_by_role("heading", name=f"Topic {topic}")).to_be_visible()
    partitions = page.get_by_role("table", name=re.compile("Partitions"))
    expect(partitions.locator("tbody tr")).to_have_count(2)
    configs = page.get_by_role("table", name=re.compile("Topic configs"))
    expect(configs).to_contain_text("cleanup.policy")
    configs.get_by_role("button", name="Edit retention.ms").click()
    configs.get_by_label("New value of retention.ms").fill("3600000")
    configs.get_by_role("button", name="Save").click()
    row = configs.get_by_role("row", name=re.compile(r"^retention\.ms "))
    expect(row).to_contain_text("3600000")
    expect(row).to_contain_text("DYNAMIC_TOPIC_CONFIG")
    shot("topic-detail")
    open_console(page, "topics")
    page.get_by_label("Search topics").fill(topic[-8:])
    expect(page.get_by_role("link", name=topic, exact=True)).to_be_visible()


def test_the_topic_list_loading_leaves_the_focus_where_the_user_put_it(page):
    """The list's load finishing must not move the focus: it did (to the search box), and a name
    being typed into the create form meanwhile went on in the search box (a failed CI run)."""
    held = []
    listing = re.compile(r"/v3/clusters/[^/]+/topics$")
    def hold(route):                          # the list answers only when the test says
        held.append(route)
    page.route(listing, hold)
    open_console(page, "topics")
    name = page.get_by_label("New topic name")
    name.click()
    expect(page.locator("main[aria-busy]")).to_be_visible()       # still loading
    assert held, "the console did not ask for the topic list"
    for route in held:
        route.continue_()
    page.unroute(listing, hold)
    expect(page.locator("main:not([aria-busy])")).to_be_visible()
    expect(page.get_by_role("table", name=re.compile("topics"))).to_be_visible()
    expect(name).to_be_focused()


def test_produce_from_the_form_then_find_the_record_by_offset_and_by_timestamp(page, shot, topic, console_cluster):
    before_ms = int(time.time() * 1000) - 1000
    open_console(page, f"topics/{topic}/messages")
    produce = page.get_by_role("form", name="Produce a record")
    produce.get_by_label("Partition").select_option("1")
    produce.get_by_label("Key").fill("order-42")
    produce.get_by_label("Value").fill('{"order": 42, "items": ["tea"]}')
    produce.get_by_label("Headers").fill("trace: abc-123")
    produce.get_by_role("button", name="Produce").click()
    expect(page.locator("#produce-result")).to_have_text("Produced to partition 1 at offset 0.")

    browse = page.get_by_role("form", name="Browse messages")
    browse.get_by_label("Partition").select_option("1")
    browse.get_by_label("Start from").select_option("offset")
    browse.get_by_label("Offset").fill("0")
    browse.get_by_role("button", name="Read").click()
    records = page.locator("#records")
    expect(records.locator("tbody tr")).to_have_count(1)
    expect(records).to_contain_text('"order": 42')            # pretty-printed JSON
    expect(records).to_contain_text("order-42")
    expect(records).to_contain_text("trace: abc-123")
    shot("browse-by-offset")

    # a binary record written by a Kafka client, stamped at a known time, on partition 0
    stamp = before_ms + 5000
    producer = Producer({"bootstrap.servers": console_cluster.bootstrap})
    producer.produce(topic, b"\x00\xff\x10", partition=0, timestamp=stamp - 3000)
    producer.produce(topic, b"\x00\xff\x11", partition=0, timestamp=stamp)
    assert producer.flush(30) == 0

    browse.get_by_label("Partition").select_option("0")
    browse.get_by_label("Start from").select_option("timestamp")
    browse.get_by_label("Timestamp").fill(str(stamp))
    browse.get_by_role("button", name="Read").click()
    expect(page.locator("#browse-status")).to_contain_text("from offset 1")
    expect(records.locator("tbody tr")).to_have_count(1)
    expect(records).to_contain_text("00 ff 11")                # binary as hex
    expect(records.get_by_text("hex", exact=True)).to_be_visible()

    browse.get_by_label("Partition").select_option("1")
    browse.get_by_label("Timestamp").fill(time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(before_ms / 1000)))
    browse.get_by_role("button", name="Read").click()
    expect(page.locator("#browse-status")).to_contain_text("partition 1 from offset 0")
    expect(records).to_contain_text('"order": 42')
    shot("browse-by-timestamp")

    browse.get_by_label("Partition").select_option("0")
    browse.get_by_label("Start from").select_option("latest")
    browse.get_by_label("Max records").fill("1")
    browse.get_by_role("button", name="Read").click()
    expect(page.locator("#browse-status")).to_contain_text("partition 0 from offset 1")
    expect(records).to_contain_text("00 ff 11")


def test_delete_a_topic_after_confirming(page, console_cluster):
    doomed = f"console-doomed-{uuid.uuid4().hex[:8]}"
    console_cluster.create_topic(doomed, partitions=1, replication_factor=3)
    open_console(page, "topics")
    page.get_by_label("Search topics").fill(doomed)
    page.get_by_role("button", name=f"Delete topic {doomed}").click()
    dialog = page.get_by_role("dialog", name="Are you sure?")
    expect(dialog).to_contain_text(doomed)
    dialog.get_by_role("button", name="Delete topic").click()
    expect(page.get_by_role("link", name=doomed, exact=True)).to_have_count(0)
    expect(page.get_by_role("table", name=re.compile("topics"))).to_contain_text("0 of")


LABELLED = """() => [...document.querySelectorAll('main input, main select, main textarea, dialog input')]
  .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label'))
  .map((el) => el.outerHTML)"""


@pytest.mark.parametrize("view", ["overview", "topics", "topic", "messages", "groups", "schemas"])
def test_every_control_is_labelled_and_reachable_with_the_keyboard(page, topic, view):
    path = {"topic": f"topics/{topic}", "messages": f"topics/{topic}/messages"}.get(view, view)
    open_console(page, path)
    expect(page.locator("main:not([aria-busy])")).to_be_visible()    # the view has drawn all it loads
    expect(page.locator("main")).not_to_contain_text("Something went wrong")
    assert page.evaluate(LABELLED) == [], "inputs without a label"
    controls = page.evaluate("""() => [...document.querySelectorAll('a[href], button, input, select, textarea')]
        .filter((el) => !el.disabled && el.offsetParent !== null && !el.closest('dialog')).length""")
    reached, outlines = set(), set()
    for _ in range(controls + 5):
        page.keyboard.press("Tab")
        focused = page.evaluate("""() => { const el = document.activeElement;
            if (!el || el === document.body) return null;
            el.dataset.tabbed = '1';
            return [el.tagName + ':' + (el.id || el.name || el.textContent.trim().slice(0, 30)),
                    getComputedStyle(el).outlineStyle] }""")
        if focused:
            reached.add(focused[0])
            outlines.add(focused[1])
    missed = page.evaluate("""() => [...document.querySelectorAll('a[href], button, input, select, textarea')]
        .filter((el) => !el.disabled && el.offsetParent !== null && !el.closest('dialog') && !el.dataset.tabbed)
        .map((el) => el.outerHTML.slice(0, 120))""")
    assert missed == [], f"controls Tab never reached: {missed}"
    assert outlines == {"solid"}, f"a focused control without a visible outline: {outlines}"


def test_a_gateway_with_an_auth_file_asks_for_a_token_and_uses_it(browser, console_cluster, tmp_path):
    """Under --require-auth (as on Kubernetes and dev up --security): the console's files load
    without a token, and every call it makes asks for one."""
    topic = f"console-auth-{uuid.uuid4().hex[:8]}"
    console_cluster.create_topic(topic, partitions=1, replication_factor=3)
    tokens = write_tokens(tmp_path / "tokens.json", [{"token": "console-s3cret", "name": "ops", "admin": True,
                                                      "topics": {"*": "rw"}}])
    gw = GatewayProcess(console_cluster.bootstrap, tmp_path / "gateway.log", "--auth-file", str(tokens),
                        "--require-auth")
    context = browser.new_context(base_url=gw.url)
    try:
        page = context.new_page()
        page.goto(f"/console/#/topics/{topic}")
        dialog = page.get_by_role("dialog", name="Sign in to the gateway")
        expect(dialog).to_be_visible()
        dialog.get_by_label("Token").fill("wrong")
        dialog.get_by_role("button", name="Sign in").click()
        expect(dialog).to_contain_text("Authentication required")    # the gateway's 401, asked again
        dialog.get_by_label("Token").fill("console-s3cret")
        dialog.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name=f"Topic {topic}")).to_be_visible()
        expect(dialog).to_be_hidden()
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "signed-in.png"))
        page.goto("/console/#/schemas")          # the registry's routes take the same token
        expect(page.get_by_role("table", name=re.compile("subjects"))).to_be_visible()
        expect(dialog).to_be_hidden()
    finally:
        context.close()
        gw.stop()
