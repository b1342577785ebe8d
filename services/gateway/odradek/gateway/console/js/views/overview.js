// The overview: brokers, the controller, under-replicated and offline partitions (red when
// any), and the throughput chart; refreshed every few seconds while shown.

import * as api from "../api.js";
import { h, replace, table, fmt, link } from "../dom.js";
import { ThroughputChart } from "../chart.js";

const REFRESH_MS = 2000;

function card(label, value, state, id) {
  return h("div", { class: `card ${state || ""}`, id },
    h("div", { class: "label" }, label), h("div", { class: "value" }, value));
}

/** One row per topic, its partitions listed: a dead broker makes dozens of partitions of one topic. */
function partitionRows(list) {
  const byTopic = new Map();
  for (const p of list) byTopic.set(p.topic_name, [...(byTopic.get(p.topic_name) || []), p.partition_id]);
  return [...byTopic].map(([topic, ids]) => [link(`#/topics/${api.enc(topic)}`, topic), String(ids.length),
    ids.sort((a, b) => a - b).join(", ")]);
}

async function load() {
  const [ov, brokers] = await Promise.all([api.get(await api.v3("/overview")), api.v3List("/brokers")]);
  return { ov, brokers };
}

function render(parts, { ov, brokers }) {
  const urp = ov.under_replicated_partitions_count;
  const offline = ov.offline_partitions_count;
  replace(parts.cards,
    card("Brokers", fmt.int(ov.brokers_count)),
    card("Controller", ov.controller_id === null ? "none" : `broker ${ov.controller_id}`, ov.controller_id === null ? "bad" : ""),
    card("Topics", fmt.int(ov.topics_count)),
    card("Partitions", fmt.int(ov.partitions_count)),
    card("Under-replicated", fmt.int(urp), urp ? "bad" : "good", "urp"),
    card("Offline", fmt.int(offline), offline ? "bad" : "good", "offline"));
  replace(parts.brokers, table("Live brokers", [{ label: "Broker" }, { label: "Host" }, { label: "Port", num: true }, { label: "Rack" }],
    brokers.map((b) => [h("span", {}, String(b.broker_id), b.broker_id === ov.controller_id ? h("span", { class: "tag" }, "controller") : null),
      b.host, String(b.port), b.rack ?? "—"])));
  const columns = [{ label: "Topic" }, { label: "Count", num: true }, { label: "Partitions" }];
  replace(parts.problems,
    table("Under-replicated partitions", columns, partitionRows(ov.under_replicated_partitions), () => ({ class: "bad" })),
    table("Offline partitions", columns, partitionRows(ov.offline_partitions), () => ({ class: "bad" })));
}

export async function overview(main) {
  const parts = { cards: h("div", { class: "cards" }), brokers: h("div"), problems: h("div"), chart: h("div", { class: "chart" }) };
  replace(main, h("h1", {}, "Cluster overview"), parts.cards, h("h2", {}, "Throughput"), parts.chart,
    h("h2", {}, "Brokers"), parts.brokers, h("h2", {}, "Partitions needing attention"), parts.problems);
  render(parts, await load());
  const chart = new ThroughputChart(parts.chart);
  const sample = async () => {
    const t = await api.get(await api.v3("/throughput"));
    if (t.metrics_configured) chart.add(t);
    else parts.chart.querySelector("#throughput-legend").textContent = "The gateway has no broker metrics URLs (--broker-metrics-urls): no throughput to show.";
  };
  let stopped = false;
  let timer = null;
  const tick = async () => {
    try {
      const [data] = await Promise.all([load(), sample()]);
      if (!stopped) render(parts, data);
    } catch (e) {
      if (!stopped) replace(parts.problems, h("p", { class: "error", role: "alert" }, `Refresh failed: ${e.message}`));
    }
    if (!stopped) timer = setTimeout(tick, REFRESH_MS);
  };
  tick();
  return () => { stopped = true; clearTimeout(timer); };
}
