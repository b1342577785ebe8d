// The gateway's HTTP API as the console calls it: every request carries the bearer token the
// user signed in with (kept in sessionStorage: this tab only), a 401 asks for a token and
// retries with it, and a failure throws the gateway's own message ({error_code, message}).

const TOKEN_KEY = "odradek.console.token";
// the console is served at <gateway>/console/: the API is the directory above it
const BASE = new URL("..", document.baseURI);

let askToken = async () => { throw new Error("Authentication required"); };
let clusterId = null;

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function onTokenNeeded(ask) { askToken = ask; }
export function token() { return sessionStorage.getItem(TOKEN_KEY); }
export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value); else sessionStorage.removeItem(TOKEN_KEY);
}

export function url(path, query = {}) {
  const u = new URL(path.replace(/^\//, ""), BASE);
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== "") u.searchParams.set(k, v);
  return u;
}

async function once(method, path, { query, body, type = "application/json", accept = "application/json" }) {
  const headers = { Accept: accept };
  if (token()) headers.Authorization = `Bearer ${token()}`;
  if (body !== undefined) headers["Content-Type"] = type;
  const payload = body === undefined || typeof body === "string" ? body : JSON.stringify(body);
  return fetch(url(path, query), { method, headers, body: payload, cache: "no-store" });
}

export async function request(method, path, options = {}) {
  let res = await once(method, path, options);
  while (res.status === 401) { // until the user gives a token the gateway takes
    await askToken(await errorOf(res));
    res = await once(method, path, options);
  }
  if (!res.ok) throw await errorOf(res);
  return res;
}

async function errorOf(res) {
  let body = {};
  try { body = await res.json(); } catch { /* not JSON: the status says enough */ }
  return new ApiError(res.status, body.error_code ?? res.status, body.message || `${res.status} ${res.statusText}`);
}

export async function json(method, path, options = {}) {
  const res = await request(method, path, options);
  return res.status === 204 ? null : res.json();
}

export const get = (path, query) => json("GET", path, { query });

/** The cluster's id (v3 paths need it), asked once. */
export async function cluster() {
  if (clusterId === null) clusterId = (await get("/v3/clusters")).data[0].cluster_id;
  return clusterId;
}

/** A v3 path under this cluster: v3("/topics") is /v3/clusters/<id>/topics. */
export async function v3(path) {
  return `/v3/clusters/${encodeURIComponent(await cluster())}${path}`;
}

/** Every element of a v3 list, following Confluent's metadata.next pages. */
export async function v3List(path, query) {
  let page = await get(await v3(path), query);
  const out = [...page.data];
  while (page.metadata && page.metadata.next) {
    const next = new URL(page.metadata.next);
    page = await get(next.pathname, Object.fromEntries(next.searchParams));
    out.push(...page.data);
  }
  return out;
}

export const enc = encodeURIComponent;
