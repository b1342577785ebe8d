// Building the page without a framework: h() makes elements, field() a labelled input,
// table() an accessible table, notice() a polite status message, confirmAction() the one
// confirmation dialog. Text is always set as text (never parsed as HTML).

let uid = 0;

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k in el && typeof v !== "string") el[k] = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** A label and its control, tied by id (so screen readers and get-by-label find it). */
export function field(label, control, hint) {
  control.id = control.id || `f${++uid}`;
  return h("div", { class: "field" }, h("label", { for: control.id }, label), control,
    hint ? h("span", { class: "muted" }, hint) : null);
}

/** columns: [{label, num?}], rows: arrays of cells (text or nodes); rowAttrs(i) optional. */
export function table(caption, columns, rows, rowAttrs = () => ({})) {
  return h("table", {},
    caption ? h("caption", {}, caption) : null,
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.num ? "num" : null }, c.label)))),
    h("tbody", {}, rows.length ? rows.map((r, i) => h("tr", rowAttrs(i),
      r.map((cell, j) => h("td", { class: columns[j].num ? "num" : null }, cell))))
      : h("tr", {}, h("td", { colspan: String(columns.length), class: "muted" }, "None"))));
}

export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

export function notice(message, isError = false) {
  const box = document.getElementById("notice");
  const p = h("p", { class: isError ? "error" : null, role: isError ? "alert" : null }, message);
  box.append(p);
  setTimeout(() => p.remove(), isError ? 12000 : 6000);
}

/** Shows the confirmation dialog; resolves true only when the user confirms. */
export function confirmAction(text, action = "Confirm") {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = action;
  dialog.returnValue = "cancel";
  dialog.showModal();
  return new Promise((resolve) => dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true }));
}

export const fmt = {
  int: (n) => (n === null || n === undefined || n === "" ? "—" : Number(n).toLocaleString("en")),
  bytes(n) {
    if (n === null || n === undefined) return "—";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    for (n = Number(n); n >= 1024 && i < units.length - 1; i++) n /= 1024;
    return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
  },
  time: (ms) => (ms === null || ms === undefined ? "—" : new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC")),
};

/** Runs an async action from a button, disabling it meanwhile and reporting failures. */
export async function busy(button, action) {
  if (button) button.disabled = true;
  try {
    return await action();
  } catch (e) {
    notice(e.message, true);
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}

export function link(href, text) { return h("a", { href }, text); }
