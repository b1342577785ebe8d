// One topic: its partitions (leader, replicas, ISR, offsets, the leader's local size and, with
// tiered storage, its remote size and local start offset; under-replicated and offline rows in
// red) and its configs, each editable where Kafka allows (not read-only).

import * as api from "../api.js";
import { h, replace, table, field, fmt, link, busy, notice } from "../dom.js";
import { deleteTopic } from "./topics.js";

/** Offsets and sizes per partition: the v3 offsets list, or the v2 offsets of each partition. */
export async function partitionOffsets(topic, partitions) {
  try {
    const list = await api.v3List(`/topics/${api.enc(topic)}/offsets`);
    return new Map(list.map((o) => [o.partition_id, o]));
  } catch (e) {
    if (e.status !== 404 || e.code === 40401) throw e;
  }
  const each = await Promise.all(partitions.map((p) => api.get(`/topics/${api.enc(topic)}/partitions/${p.partition}/offsets`)));
  return new Map(partitions.map((p, i) => [p.partition, { earliest_offset: each[i].beginning_offset, latest_offset: each[i].end_offset, size_bytes: null }]));
}

/** The bytes in the object store and their segments; "—" without tiered storage. */
function remoteSize(o) {
  if (o.remote_size_bytes === null || o.remote_size_bytes === undefined) return "—";
  const n = o.remote_segments ?? 0;
  return `${fmt.bytes(o.remote_size_bytes)} (${fmt.int(n)} segment${n === 1 ? "" : "s"})`;
}

function partitionTable(partitions, offsets) {
  const rows = partitions.map((p) => {
    const isr = p.replicas.filter((r) => r.in_sync).map((r) => r.broker);
    const o = offsets.get(p.partition) || {};
    return [String(p.partition), p.leader === null || p.leader < 0 ? h("span", { class: "tag bad" }, "offline") : String(p.leader),
      p.replicas.map((r) => r.broker).join(", "), isr.join(", "),
      fmt.int(o.earliest_offset), fmt.int(o.latest_offset), fmt.bytes(o.size_bytes), remoteSize(o),
      fmt.int(o.local_log_start_offset)];
  });
  const bad = (i) => partitions[i].leader === null || partitions[i].leader < 0 || partitions[i].replicas.some((r) => !r.in_sync);
  return table("Partitions (red: under-replicated or offline)",
    [{ label: "Partition", num: true }, { label: "Leader" }, { label: "Replicas" }, { label: "In-sync replicas" },
      { label: "Start offset", num: true }, { label: "End offset", num: true }, { label: "Local size", num: true },
      { label: "Remote size", num: true }, { label: "Local start offset", num: true }],
    rows, (i) => (bad(i) ? { class: "bad" } : {}));
}

async function alter(topic, name, value, operation) {
  await api.json("POST", await api.v3(`/topics/${api.enc(topic)}/configs:alter`),
    { body: { data: [{ name, value, operation }] } });
}

function configCells(topic, c, redraw) {
  const source = c.is_default ? h("span", { class: "muted" }, "default") : h("span", { class: "tag ok" }, c.source);
  if (c.is_read_only) return [c.name, c.value ?? "—", source, h("span", { class: "muted" }, "read-only")];
  const edit = h("button", { type: "button", "aria-label": `Edit ${c.name}` }, "Edit");
  const cell = h("span", {}, c.value ?? "—");
  edit.addEventListener("click", () => {
    const input = h("input", { name: c.name, value: c.value ?? "" });
    const save = h("button", { type: "submit", class: "primary" }, "Save");
    const reset = c.is_default ? null : h("button", { type: "button" }, "Reset to default");
    const form = h("form", { class: "inline" }, field(`New value of ${c.name}`, input), save, reset,
      h("button", { type: "button", onclick: redraw }, "Cancel"));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      busy(save, async () => { await alter(topic, c.name, input.value, "SET"); notice(`${c.name} set to ${input.value}`); redraw(); });
    });
    if (reset) reset.addEventListener("click", () => busy(reset, async () => { await alter(topic, c.name, null, "DELETE"); notice(`${c.name} reset`); redraw(); }));
    replace(cell, form);
    edit.hidden = true;
    input.focus();
  });
  return [c.name, cell, source, edit];
}

async function configSection(topic, container) {
  const redraw = () => configSection(topic, container).catch((e) => notice(e.message, true));
  const configs = (await api.get(await api.v3(`/topics/${api.enc(topic)}/configs`))).data;
  replace(container, table("Topic configs (overrides marked with their source)",
    [{ label: "Name" }, { label: "Value" }, { label: "Source" }, { label: "Edit" }],
    configs.map((c) => configCells(topic, c, redraw))));
}

export async function topicDetail(main, topic) {
  const partitions = await api.get(`/topics/${api.enc(topic)}/partitions`);
  // offsets and sizes are extras: without them the partitions still show, with the reason
  const offsets = await partitionOffsets(topic, partitions).catch((e) => {
    notice(`Offsets and sizes unavailable: ${e.message}`, true);
    return new Map();
  });
  const configs = h("div");
  const del = h("button", { type: "button", class: "danger" }, "Delete topic");
  del.addEventListener("click", () => busy(del, async () => { if (await deleteTopic(topic)) location.hash = "#/topics"; }));
  replace(main, h("p", {}, link("#/topics", "← Topics")), h("h1", {}, `Topic ${topic}`),
    h("div", { class: "toolbar" }, link(`#/topics/${api.enc(topic)}/messages`, "Browse and produce messages"), del),
    h("h2", {}, "Partitions"), partitionTable(partitions, offsets),
    h("h2", {}, "Configs"), configs);
  await configSection(topic, configs).catch((e) => replace(configs, h("p", { class: "error", role: "alert" }, `Configs unavailable: ${e.message}`)));
}
