// The schema registry (Confluent's REST API at the gateway's root, docs/schema-registry.md):
// its subjects with their latest version and compatibility level, and one subject's versions
// with each schema's text. Read only: registering and configuring are the registry clients' job.

import * as api from "../api.js";
import { h, replace, table, field, link } from "../dom.js";

/** A subject's compatibility level: its own, else the registry's global one. */
async function level(subject) {
  return (await api.get(`/config/${api.enc(subject)}`, { defaultToGlobal: "true" })).compatibilityLevel;
}

/** The schema text as people read it: Avro and JSON Schema pretty-printed, Protobuf as written. */
function schemaText(v) {
  if ((v.schemaType || "AVRO") === "PROTOBUF") return v.schema;
  try {
    return JSON.stringify(JSON.parse(v.schema), null, 2);
  } catch {
    return v.schema;
  }
}

export async function schemaList(main) {
  const search = h("input", { type: "search", name: "q", autocomplete: "off", placeholder: "part of a subject" });
  const list = h("div", { "aria-live": "polite" });
  const [subjects, global] = await Promise.all([api.get("/subjects"), api.get("/config")]);
  const rows = await Promise.all(subjects.map(async (s) => {
    const [versions, lvl] = await Promise.all([api.get(`/subjects/${api.enc(s)}/versions`), level(s)]);
    return { subject: s, versions, level: lvl };
  }));
  const draw = () => {
    const q = search.value.trim().toLowerCase();
    const shown = rows.filter((r) => r.subject.toLowerCase().includes(q));
    replace(list, table(`${shown.length} of ${rows.length} subjects`,
      [{ label: "Subject" }, { label: "Versions", num: true }, { label: "Latest version", num: true }, { label: "Compatibility" }],
      shown.map((r) => [link(`#/schemas/${api.enc(r.subject)}`, r.subject), String(r.versions.length),
        `v${Math.max(...r.versions)}`, r.level])));
  };
  search.addEventListener("input", draw);
  replace(main, h("h1", {}, "Schemas"),
    h("p", {}, "Global compatibility level: ", h("strong", { id: "global-level" }, global.compatibilityLevel)),
    h("div", { class: "toolbar", role: "search" }, field("Search subjects", search)), list);
  draw();
}

export async function schemaDetail(main, subject) {
  const [numbers, lvl] = await Promise.all([api.get(`/subjects/${api.enc(subject)}/versions`), level(subject)]);
  const versions = await Promise.all(numbers.map((n) => api.get(`/subjects/${api.enc(subject)}/versions/${n}`)));
  versions.reverse();     // the newest first
  replace(main, h("p", {}, link("#/schemas", "← Schemas")), h("h1", {}, `Subject ${subject}`),
    h("p", {}, "Compatibility level: ", h("strong", { id: "subject-level" }, lvl)),
    table("Versions", [{ label: "Version", num: true }, { label: "Schema id", num: true }, { label: "Type" }, { label: "Schema" }],
      versions.map((v) => [`v${v.version}`, String(v.id), v.schemaType || "AVRO",
        h("div", {}, h("pre", { class: "value" }, schemaText(v)),
          v.references && v.references.length
            ? h("p", { class: "muted" }, `References: ${v.references.map((r) => `${r.name} → ${r.subject} v${r.version}`).join(", ")}`)
            : null)])));
}
