// Consumer groups: the list (state, total lag) and one group (members and their assignments,
// lag per partition, refreshed while shown) with offset reset and delete, each behind a
// confirmation (Kafka allows both only for a group without members).

import * as api from "../api.js";
import { h, replace, table, field, fmt, link, busy, notice, confirmAction } from "../dom.js";
import { parseTime } from "./messages.js";

const REFRESH_MS = 2000;

function stateTag(state) {
  return h("span", { class: `tag ${state === "STABLE" ? "ok" : state === "DEAD" ? "bad" : ""}` }, state);
}

export async function groupList(main) {
  const groups = await api.v3List("/consumer-groups");
  const lagCells = groups.map(() => [h("span", {}, "…"), h("span", {}, "…")]);
  replace(main, h("h1", {}, "Consumer groups"), table(`${groups.length} groups`,
    [{ label: "Group" }, { label: "State" }, { label: "Assignor" }, { label: "Total lag", num: true }, { label: "Max lag", num: true }],
    groups.map((g, i) => [link(`#/groups/${api.enc(g.consumer_group_id)}`, g.consumer_group_id), stateTag(g.state),
      g.partition_assignor || "—", lagCells[i][0], lagCells[i][1]])));
  // the list first, each group's lag as it comes: one slow group does not hold the others back
  groups.forEach((g, i) => api.get(new URL(g.lag_summary.related).pathname).then(
    (s) => { replace(lagCells[i][0], fmt.int(s.total_lag)); replace(lagCells[i][1], fmt.int(s.max_lag)); },
    (e) => { replace(lagCells[i][0], h("span", { class: "error" }, e.message)); replace(lagCells[i][1], "—"); }));
}

async function memberRows(group) {
  const members = await api.v3List(`/consumer-groups/${api.enc(group)}/consumers`);
  const assignments = await Promise.all(members.map((m) => api.get(new URL(m.assignments.related).pathname)));
  return members.map((m, i) => [m.consumer_id, m.client_id, m.host || "—",
    assignments[i].data.map((a) => `${a.topic_name}-${a.partition_id}`).join(", ") || "—"]);
}

function resetForm(group, topics, refresh) {
  const topic = h("select", { name: "topic_name" }, topics.map((t) => h("option", { value: t }, t)));
  const partition = h("input", { name: "partition_id", type: "number", min: "0", placeholder: "every partition" });
  const to = h("select", { name: "to" }, ["earliest", "latest", "offset", "timestamp"].map((v) => h("option", { value: v }, v)));
  const offset = h("input", { name: "offset", type: "number", min: "0" });
  const when = h("input", { name: "timestamp", autocomplete: "off", placeholder: "2026-11-25T02:00:00Z or ms" });
  const submit = h("button", { type: "submit", class: "danger" }, "Reset offsets…");
  const form = h("form", { class: "inline", "aria-label": "Reset offsets" },
    field("Topic", topic), field("Partition", partition), field("Reset to", to), field("Offset", offset), field("Timestamp", when, "UTC"), submit);
  const sync = () => {
    offset.closest(".field").hidden = to.value !== "offset";
    when.closest(".field").hidden = to.value !== "timestamp";
  };
  to.addEventListener("change", sync);
  sync();
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    busy(submit, async () => {
      const body = { topic_name: topic.value, partition_id: partition.value === "" ? null : Number(partition.value), to: to.value,
        offset: to.value === "offset" ? Number(offset.value) : null, timestamp: to.value === "timestamp" ? parseTime(when.value) : null };
      const where = body.partition_id === null ? `every partition of ${body.topic_name}` : `${body.topic_name} partition ${body.partition_id}`;
      if (!(await confirmAction(`Reset the committed offsets of group "${group}" on ${where} to ${to.value}? Its consumers will re-read or skip records.`, "Reset offsets"))) return;
      const answer = await api.json("POST", await api.v3(`/consumer-groups/${api.enc(group)}/offsets:reset`), { body });
      notice(`Offsets reset: ${answer.data.map((o) => `${o.topic_name}-${o.partition_id} → ${o.offset}`).join(", ")}`);
      await refresh();
    });
  });
  return form;
}

export async function groupDetail(main, group) {
  const head = h("div", { class: "cards" });
  const members = h("div");
  const lags = h("div", { id: "lags" });
  const del = h("button", { type: "button", class: "danger" }, "Delete group…");
  let stopped = false;
  let timer = null;

  const refresh = async () => {
    const [g, summary, lagList, rows] = await Promise.all([
      api.get(await api.v3(`/consumer-groups/${api.enc(group)}`)),
      api.get(await api.v3(`/consumer-groups/${api.enc(group)}/lag-summary`)),
      api.v3List(`/consumer-groups/${api.enc(group)}/lags`), memberRows(group)]);
    if (stopped) return lagList;
    replace(head, h("div", { class: "card" }, h("div", { class: "label" }, "State"), h("div", { class: "value" }, stateTag(g.state))),
      h("div", { class: "card" }, h("div", { class: "label" }, "Members"), h("div", { class: "value" }, fmt.int(rows.length))),
      h("div", { class: "card", id: "total-lag" }, h("div", { class: "label" }, "Total lag"), h("div", { class: "value" }, fmt.int(summary.total_lag))));
    replace(members, table("Members", [{ label: "Consumer id" }, { label: "Client id" }, { label: "Host" }, { label: "Assigned partitions" }], rows));
    replace(lags, table("Lag per partition", [{ label: "Topic" }, { label: "Partition", num: true }, { label: "Committed offset", num: true },
      { label: "End offset", num: true }, { label: "Lag", num: true }, { label: "Consumer" }],
    lagList.map((l) => [l.topic_name, String(l.partition_id), fmt.int(l.current_offset), fmt.int(l.log_end_offset), fmt.int(l.lag), l.consumer_id || "—"])));
    return lagList;
  };
  const lagList = await refresh();
  del.addEventListener("click", () => busy(del, async () => {
    if (!(await confirmAction(`Delete consumer group "${group}" and its committed offsets?`, "Delete group"))) return;
    await api.json("DELETE", await api.v3(`/consumer-groups/${api.enc(group)}`));
    notice(`Group ${group} deleted`);
    location.hash = "#/groups";
  }));
  const topics = [...new Set(lagList.map((l) => l.topic_name))].sort();
  replace(main, h("p", {}, link("#/groups", "← Consumer groups")), h("h1", {}, `Group ${group}`), head,
    h("h2", {}, "Members"), members, h("h2", {}, "Lag"), lags,
    h("h2", {}, "Reset offsets"), topics.length ? resetForm(group, topics, refresh) : h("p", { class: "muted" }, "The group has no committed offsets."),
    h("div", { class: "toolbar" }, del));
  const tick = async () => {
    try { await refresh(); } catch (e) { if (!stopped) notice(`Refresh failed: ${e.message}`, true); }
    if (!stopped) timer = setTimeout(tick, REFRESH_MS);
  };
  timer = setTimeout(tick, REFRESH_MS);
  return () => { stopped = true; clearTimeout(timer); };
}
