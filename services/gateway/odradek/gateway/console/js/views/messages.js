// A topic's messages: the browser (a partition from an offset, or from the first record at or
// after a timestamp, through the gateway's range read; registry-framed keys and values come
// decoded from the gateway, shown as JSON with their schema's badge) and the produce form (bytes,
// or JSON written with a subject's latest schema).

import * as api from "../api.js";
import { h, replace, table, field, fmt, link, busy, notice } from "../dom.js";
import { decode, toBase64, parseHeaders, hex, fromBase64, schemaBadge } from "../records.js";

const MAX_BYTES = 1 << 20;

function shown(b64) {
  const d = decode(b64);
  return h("div", {}, h("pre", { class: "value" }, d.text), d.kind === "text" ? null : h("span", { class: "tag" }, d.kind));
}

/** A key or value: decoded by the gateway when registry-framed (badge, raw bytes one click away). */
function recordPart(b64, schema) {
  if (!schema) return shown(b64);
  const badge = h("span", { class: schema.error ? "tag bad" : "tag schema" }, schemaBadge(schema));
  const body = schema.error ? h("p", { class: "error" }, schema.error) : h("pre", { class: "value" }, JSON.stringify(schema.data, null, 2));
  return h("div", {}, body, badge,
    h("details", { class: "raw" }, h("summary", {}, "Raw bytes"), h("pre", { class: "value" }, hex(fromBase64(b64)))));
}

function headerCell(headers) {
  if (!headers || !headers.length) return h("span", { class: "muted" }, "—");
  return h("ul", {}, headers.map((x) => h("li", {}, `${x.key}: `, shown(x.value))));
}

/** ms since the epoch from "1764036000000" or an ISO 8601 date and time (no zone: UTC). */
export function parseTime(text) {
  const t = text.trim();
  if (/^\d+$/.test(t)) return Number(t);
  const ms = Date.parse(/[zZ]|[+-]\d\d:?\d\d$/.test(t) ? t : `${t}Z`);
  if (Number.isNaN(ms)) throw new Error(`"${text}" is not a timestamp: give ms since the epoch or 2026-11-25T02:00:00Z`);
  return ms;
}

function browser(topic, partitions) {
  const partition = h("select", { name: "partition" }, partitions.map((p) => h("option", { value: String(p.partition) }, String(p.partition))));
  const from = h("select", { name: "from" }, h("option", { value: "offset" }, "an offset"), h("option", { value: "timestamp" }, "a timestamp"),
    h("option", { value: "latest" }, "the newest records"));
  const offset = h("input", { name: "offset", type: "number", min: "0", value: "0" });
  const when = h("input", { name: "timestamp", autocomplete: "off", placeholder: "2026-11-25T02:00:00Z or ms" });
  const limit = h("input", { name: "limit", type: "number", min: "1", max: "500", value: "20" });
  const read = h("button", { type: "submit", class: "primary" }, "Read");
  const status = h("p", { class: "muted", role: "status", id: "browse-status" });
  const results = h("div", { id: "records" });
  const sync = () => {
    offset.closest(".field").hidden = from.value !== "offset";
    when.closest(".field").hidden = from.value !== "timestamp";
  };
  from.addEventListener("change", sync);

  const start = async (p, count) => {
    const path = `/topics/${api.enc(topic)}/partitions/${p}/offsets`;
    if (from.value === "offset") return Number(offset.value || 0);
    if (from.value === "timestamp") return (await api.get(path, { timestamp: parseTime(when.value) })).offset;
    const o = await api.get(path);
    return Math.max(o.beginning_offset, o.end_offset - count);
  };
  const form = h("form", { class: "inline", "aria-label": "Browse messages" },
    field("Partition", partition), field("Start from", from), field("Offset", offset), field("Timestamp", when, "UTC"),
    field("Max records", limit), read);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    busy(read, async () => {
      const p = Number(partition.value);
      const count = Number(limit.value || 20);
      const first = await start(p, count);
      if (first === null || first === undefined) {
        replace(results);
        status.textContent = `No record in partition ${p} at or after that time.`;
        return;
      }
      const res = await api.request("GET", `/topics/${api.enc(topic)}/partitions/${p}/records`,
        { query: { offset: first, end: first + count, max_bytes: MAX_BYTES, schemas: "true" } });
      const records = await res.json();
      status.textContent = `${records.length} record(s) of partition ${p} from offset ${first}; next offset ${res.headers.get("Odradek-Next-Offset")}.`;
      replace(results, table(null,
        [{ label: "Offset", num: true }, { label: "Timestamp" }, { label: "Key" }, { label: "Value" }, { label: "Headers" }],
        records.map((r) => [String(r.offset), fmt.time(r.timestamp), recordPart(r.key, r.key_schema), recordPart(r.value, r.value_schema),
          headerCell(r.headers)])));
    });
  });
  sync();
  return { form, status, results, select(p, o) { partition.value = String(p); from.value = "offset"; offset.value = String(o); sync(); } };
}

const SCHEMA_FORMATS = ["AVRO", "JSONSCHEMA", "PROTOBUF"];

/** The produce form: plain bytes through the streaming produce, or a value written with the
 * subject's latest schema through the v3 records route (the gateway encodes and frames it). */
function produceForm(topic, partitions, onProduced) {
  const partition = h("select", { name: "partition" }, h("option", { value: "" }, "any (by key)"),
    partitions.map((p) => h("option", { value: String(p.partition) }, String(p.partition))));
  const format = h("select", { name: "format" }, h("option", { value: "" }, "bytes (text as typed)"),
    SCHEMA_FORMATS.map((f) => h("option", { value: f }, `${f} (subject's latest schema)`)));
  const subject = h("input", { name: "subject", autocomplete: "off", value: `${topic}-value` });
  const key = h("input", { name: "key", autocomplete: "off" });
  const value = h("textarea", { name: "value" });
  const headers = h("textarea", { name: "headers", placeholder: "name: value, one a line" });
  const send = h("button", { type: "submit", class: "primary" }, "Produce");
  const result = h("p", { role: "status", id: "produce-result" });
  const sync = () => { subject.closest(".field").hidden = !format.value; };
  format.addEventListener("change", sync);
  const form = h("form", { class: "inline", "aria-label": "Produce a record" },
    field("Partition", partition), field("Format", format), field("Subject", subject, "the value's schema: its latest version"),
    field("Key", key, "empty: no key"), field("Value", value), field("Headers", headers), send);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    busy(send, async () => {
      const at = format.value ? await produceWithSchema(topic, form) : await produceBytes(topic, form);
      result.textContent = `Produced to partition ${at.partition} at offset ${at.offset}.${at.schema ? ` Value: ${at.schema}.` : ""}`;
      notice(result.textContent);
      onProduced(at.partition, at.offset);
    });
  });
  sync();
  return h("div", {}, form, result);
}

async function produceBytes(topic, form) {
  const f = form.elements;
  const record = { value: toBase64(f.value.value) };
  if (f.key.value) record.key = toBase64(f.key.value);
  if (f.partition.value !== "") record.partition = Number(f.partition.value);
  const hs = parseHeaders(f.headers.value);
  if (hs.length) record.headers = hs;
  const res = await api.request("POST", `/topics/${api.enc(topic)}/records`,
    { body: `${JSON.stringify(record)}\n`, type: "application/x-ndjson", accept: "application/x-ndjson" });
  const answer = JSON.parse((await res.text()).split("\n")[0]);
  if (answer.offset === undefined) throw new Error(answer.message || "The record was not written");
  return { partition: answer.partition, offset: answer.offset };
}

async function produceWithSchema(topic, form) {
  const f = form.elements;
  let data;
  try {
    data = JSON.parse(f.value.value);
  } catch (e) {
    throw new Error(`The value is not JSON (${e.message}): write it as the schema's JSON form`);
  }
  const record = { value: { type: f.format.value, subject: f.subject.value.trim() || undefined, data } };
  if (f.key.value) record.key = { type: "STRING", data: f.key.value };
  if (f.partition.value !== "") record.partition_id = Number(f.partition.value);
  const hs = parseHeaders(f.headers.value);
  if (hs.length) record.headers = hs.map((x) => ({ name: x.key, value: x.value }));
  const answer = await api.json("POST", await api.v3(`/topics/${api.enc(topic)}/records`), { body: record });
  const v = answer.value;
  return { partition: answer.partition_id, offset: answer.offset, schema: `${v.type} with schema id ${v.schema_id} (${v.subject} v${v.schema_version})` };
}

export async function messages(main, topic) {
  const partitions = await api.get(`/topics/${api.enc(topic)}/partitions`);
  const b = browser(topic, partitions);
  replace(main, h("p", {}, link(`#/topics/${api.enc(topic)}`, `← Topic ${topic}`)), h("h1", {}, `Messages of ${topic}`),
    h("h2", {}, "Browse"), b.form, b.status, b.results,
    h("h2", {}, "Produce"), produceForm(topic, partitions, (p, o) => b.select(p, o)));
}
