// Topics: the list with a search box, creating a topic and deleting one (after a confirmation).

import * as api from "../api.js";
import { h, replace, table, field, fmt, link, busy, notice, confirmAction } from "../dom.js";

export async function deleteTopic(name) {
  if (!(await confirmAction(`Delete topic "${name}" and every record in it? This cannot be undone.`, "Delete topic"))) return false;
  await api.json("DELETE", await api.v3(`/topics/${api.enc(name)}`));
  notice(`Topic ${name} deleted`);
  return true;
}

function createForm(onCreated) {
  const name = h("input", { name: "topic_name", required: true, pattern: "[a-zA-Z0-9._-]+", maxlength: "249", autocomplete: "off" });
  const partitions = h("input", { name: "partitions_count", type: "number", min: "1", value: "1", required: true });
  const rf = h("input", { name: "replication_factor", type: "number", min: "1", placeholder: "cluster default" });
  const submit = h("button", { type: "submit", class: "primary" }, "Create topic");
  const form = h("form", { class: "inline", "aria-label": "Create a topic" },
    field("New topic name", name), field("Partitions", partitions), field("Replication factor", rf), submit);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    busy(submit, async () => {
      const body = { topic_name: name.value.trim(), partitions_count: Number(partitions.value) };
      if (rf.value) body.replication_factor = Number(rf.value);
      await api.json("POST", await api.v3("/topics"), { body });
      notice(`Topic ${body.topic_name} created`);
      onCreated(body.topic_name);
    });
  });
  return form;
}

export async function topicList(main) {
  const search = h("input", { type: "search", name: "q", autocomplete: "off", placeholder: "part of a name" });
  const internal = h("input", { type: "checkbox", name: "internal" });
  const list = h("div", { "aria-live": "polite" });
  let topics = [];

  const draw = () => {
    const q = search.value.trim().toLowerCase();
    const shown = topics.filter((t) => (internal.checked || !t.is_internal) && t.topic_name.toLowerCase().includes(q));
    replace(list, table(`${shown.length} of ${topics.length} topics`,
      [{ label: "Topic" }, { label: "Partitions", num: true }, { label: "Replication factor", num: true }, { label: "Actions" }],
      shown.map((t) => [
        link(`#/topics/${api.enc(t.topic_name)}`, t.topic_name),
        fmt.int(t.partitions_count), fmt.int(t.replication_factor),
        h("span", {},
          link(`#/topics/${api.enc(t.topic_name)}/messages`, "Messages"), " ",
          t.is_internal ? null : h("button", { type: "button", "aria-label": `Delete topic ${t.topic_name}`,
            onclick: (e) => busy(e.currentTarget, async () => { if (await deleteTopic(t.topic_name)) await reload(); }) }, "Delete")),
      ])));
  };
  const reload = async () => {
    topics = await api.v3List("/topics");
    draw();
  };
  search.addEventListener("input", draw);
  internal.addEventListener("change", draw);
  replace(main, h("h1", {}, "Topics"),
    createForm((topic) => { location.hash = `#/topics/${api.enc(topic)}`; }),
    h("div", { class: "toolbar", role: "search" }, field("Search topics", search),
      h("div", { class: "field" }, h("label", {}, internal, " Show internal topics"))),
    list);
  // Focus before the list loads, not after: a user (or a test) already typing into the create
  // form while the list loads would otherwise see the rest of the name land in the search box.
  search.focus();
  await reload();
}
