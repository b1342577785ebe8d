// The console's entry point: hash routes to views (#/overview, #/topics, #/topics/<name>,
// #/topics/<name>/messages, #/groups, #/groups/<id>, #/schemas, #/schemas/<subject>), the
// sign-in dialog, the nav's current page. A view is a function (main, ...params) that may
// return a function stopping its timers.

import * as api from "./api.js";
import { h, replace } from "./dom.js";
import { overview } from "./views/overview.js";
import { topicList } from "./views/topics.js";
import { topicDetail } from "./views/topic.js";
import { messages } from "./views/messages.js";
import { groupList, groupDetail } from "./views/groups.js";
import { schemaList, schemaDetail } from "./views/schemas.js";

const ROUTES = [
  [/^\/overview$/, overview, "overview"],
  [/^\/topics$/, topicList, "topics"],
  [/^\/topics\/([^/]+)$/, topicDetail, "topics"],
  [/^\/topics\/([^/]+)\/messages$/, messages, "topics"],
  [/^\/groups$/, groupList, "groups"],
  [/^\/groups\/([^/]+)$/, groupDetail, "groups"],
  [/^\/schemas$/, schemaList, "schemas"],
  [/^\/schemas\/([^/]+)$/, schemaDetail, "schemas"],
];

let stop = null;
let shown = 0;   // which navigation is current: a slower, older view must not take over

async function route() {
  const path = location.hash.replace(/^#/, "") || "/overview";
  const main = document.getElementById("main");
  if (stop) stop();
  stop = null;
  const found = ROUTES.map(([re, view, section]) => [path.match(re), view, section]).find(([m]) => m);
  if (!found) {
    location.hash = "#/overview";
    return;
  }
  const [match, view, section] = found;
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.section === section) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  replace(main, h("p", { class: "muted" }, "Loading…"));
  main.setAttribute("aria-busy", "true");   // until the view has drawn all it loads
  const mine = ++shown;
  try {
    const stopper = (await view(main, ...match.slice(1).map(decodeURIComponent))) || null;
    if (mine === shown) stop = stopper; else if (stopper) stopper();   // the user went elsewhere meanwhile
  } catch (e) {
    if (mine === shown) replace(main, h("h1", {}, "Something went wrong"), h("p", { class: "error", role: "alert" }, e.message));
  } finally {
    if (mine === shown) main.removeAttribute("aria-busy");
  }
}

/** Asks for a token in the sign-in dialog; resolves once one is given. */
function signIn(why) {
  const dialog = document.getElementById("sign-in");
  const form = document.getElementById("sign-in-form");
  const input = document.getElementById("token");
  document.getElementById("sign-in-error").textContent = api.token() ? why.message : "";
  input.value = "";
  if (!dialog.open) dialog.showModal();
  return new Promise((resolve) => {
    form.addEventListener("submit", () => {
      api.setToken(input.value.trim());
      showSignedIn();
      resolve();
    }, { once: true });
  });
}

function showSignedIn() {
  document.getElementById("sign-out").hidden = !api.token();
  document.getElementById("who").textContent = api.token() ? "signed in with a token" : "";
}

function start() {
  api.onTokenNeeded(signIn);
  document.getElementById("sign-in").addEventListener("cancel", (e) => e.preventDefault()); // a token is needed
  document.getElementById("sign-out").addEventListener("click", () => {
    api.setToken(null);
    showSignedIn();
    route();
  });
  showSignedIn();
  window.addEventListener("hashchange", route);
  route();
}

start();
