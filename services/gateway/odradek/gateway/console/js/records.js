// Record bytes as people read them: JSON pretty-printed, UTF-8 text as text, anything else as
// hex (registry-framed ones the gateway decodes: schemaBadge names their schema); and the other
// way for the produce form (text to base64 of its UTF-8 bytes).

const utf8 = new TextDecoder("utf-8", { fatal: true });

export function fromBase64(b64) {
  const raw = atob(b64);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

export function toBase64(text) {
  let raw = "";
  for (const b of new TextEncoder().encode(text)) raw += String.fromCharCode(b);
  return btoa(raw);
}

export function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(" ");
}

/** {kind: "null"|"json"|"text"|"hex", text} for a base64 field of the range read. */
export function decode(b64) {
  if (b64 === null || b64 === undefined) return { kind: "null", text: "null" };
  const bytes = fromBase64(b64);
  let text;
  try {
    text = utf8.decode(bytes);
  } catch {
    return { kind: "hex", text: hex(bytes) };
  }
  // control characters other than tab, newline and carriage return: not text
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(text)) return { kind: "hex", text: hex(bytes) };
  const t = text.trim();
  if (t && "{[\"".includes(t[0]) || /^-?\d/.test(t) || ["true", "false", "null"].includes(t)) {
    try {
      return { kind: "json", text: JSON.stringify(JSON.parse(t), null, 2) };
    } catch { /* text that only looks like JSON */ }
  }
  return { kind: "text", text };
}

/** "name: value" lines as the streaming produce's headers ([{key, value (base64)}]). */
export function parseHeaders(lines) {
  return lines.split("\n").map((l) => l.trim()).filter(Boolean).map((l) => {
    const at = l.indexOf(":");
    if (at <= 0) throw new Error(`Header "${l}": write it as name: value`);
    return { key: l.slice(0, at).trim(), value: toBase64(l.slice(at + 1).trim()) };
  });
}

/** "schema id 7 (orders-value v2)" for a key_schema/value_schema of the range read. */
export function schemaBadge(schema) {
  const where = schema.subject ? ` (${schema.subject} v${schema.version})` : "";
  return `${schema.type || "schema"} · schema id ${schema.id}${where}`;
}
