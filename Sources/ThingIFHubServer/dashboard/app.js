// SPDX-License-Identifier: Apache-2.0

// thingif dashboard: plain JavaScript, no framework, no build step. Served by
// thingif-hub under /dashboard/ with Content-Security-Policy default-src 'self'
// (so no inline script or style anywhere). Data is put on the page with
// textContent only, never as HTML. The token lives in sessionStorage (this
// tab only) and goes out only in Authorization headers; the event stream,
// which a browser cannot give headers, is opened with a short-lived,
// single-use ticket instead (POST …/events/tickets).
"use strict";

const S = {
  appID: null,
  token: null,
  userID: null,
  revokeOnSignOut: false,
  installationID: null,
  events: null,
  eventsRetryMs: 1000,
  things: [],
  thing: null, // the selected thing's record
  traits: null, // its trait registry entry, when it has one (traits.js draws from it)
  commands: new Map(), // commandID -> command JSON (the selected thing's)
  history: [], // [{at, state}]
  pollTimer: null,
};

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text != null) e.textContent = text;
  return e;
}

function showError(message) {
  const p = $("error");
  p.textContent = message || "";
  p.classList.toggle("hidden", !message);
}

class HTTPError extends Error {
  constructor(status, body) {
    super((body && (body.message || body.errorCode)) || "HTTP " + status);
    this.status = status;
    this.body = body;
  }
}

async function call(method, path, body, extraHeaders) {
  const headers = Object.assign({ Accept: "application/json" }, extraHeaders || {});
  if (S.token) headers.Authorization = "Bearer " + S.token;
  const init = { method, headers, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  const text = await r.text();
  let json = null;
  if (text) {
    try { json = JSON.parse(text); } catch (_) { json = null; }
  }
  if (!r.ok) {
    const wrongToken = r.status === 401 || (r.status === 403 && json && json.errorCode === "WRONG_TOKEN");
    if (wrongToken && S.token) signOut("Your session ended (the token is no longer valid): sign in again.");
    throw new HTTPError(r.status, json);
  }
  return json;
}

const api = (p) => "/api/apps/" + encodeURIComponent(S.appID) + p;
const target = (tid) => "/thing-if/apps/" + encodeURIComponent(S.appID) + "/targets/thing:" + encodeURIComponent(tid);

// ---- sign in / out ----------------------------------------------------------

async function loadConfig() {
  const r = await fetch("/dashboard/config.json", { cache: "no-store" });
  S.appID = (await r.json()).appID;
}

async function signIn(token, revokeOnSignOut) {
  S.token = token;
  const me = await call("GET", api("/users/me"));
  S.userID = me.userID;
  S.revokeOnSignOut = revokeOnSignOut;
  sessionStorage.setItem("thingif.token", token);
  sessionStorage.setItem("thingif.revoke", revokeOnSignOut ? "1" : "");
  $("who").textContent = me.loginName ? me.loginName + " (" + me.userID + ")" : me.userID;
  $("signin").classList.add("hidden");
  $("app").classList.remove("hidden");
  $("signout").classList.remove("hidden");
  showError("");
  await loadThings();
  S.pollTimer = setInterval(() => loadThings().catch(() => {}), 5000);
  openEvents();
}

async function signOut(message) {
  const token = S.token;
  const installation = S.installationID;
  const revoke = S.revokeOnSignOut;
  closeEvents();
  clearInterval(S.pollTimer);
  S.pollTimer = null;
  if (token && installation) {
    // Best effort: the SSE installation and a token this page made go away with the session.
    fetch(api("/installations/" + encodeURIComponent(installation)), {
      method: "DELETE", headers: { Authorization: "Bearer " + token }, credentials: "omit",
    }).catch(() => {});
  }
  if (token && revoke && !message) {
    fetch(api("/oauth2/revoke"), {
      method: "POST", credentials: "omit",
      headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
      body: "{}",
    }).catch(() => {});
  }
  S.token = S.userID = S.installationID = null;
  S.thing = null;
  sessionStorage.clear();
  $("app").classList.add("hidden");
  $("thing").classList.add("hidden");
  $("signout").classList.add("hidden");
  $("signin").classList.remove("hidden");
  $("who").textContent = "";
  setLive(false, "not connected");
  showError(message || "");
}

// ---- live results: server-sent events ----------------------------------------

function setLive(on, text) {
  const b = $("live");
  b.textContent = text;
  b.classList.toggle("on", on);
  b.classList.toggle("off", !on);
}

function closeEvents() {
  if (S.events) {
    S.events.close();
    S.events = null;
  }
}

async function ensureInstallation() {
  if (S.installationID) return S.installationID;
  const saved = sessionStorage.getItem("thingif.installation");
  if (saved) {
    S.installationID = saved;
    return saved;
  }
  const r = await call("POST", api("/installations"), { deviceType: "SSE" });
  S.installationID = r.installationID;
  sessionStorage.setItem("thingif.installation", r.installationID);
  return r.installationID;
}

async function openEvents() {
  closeEvents();
  if (!S.token) return;
  const token = S.token;
  let ticket;
  try {
    const id = await ensureInstallation();
    try {
      ticket = (await call("POST", api("/installations/" + encodeURIComponent(id) + "/events/tickets"))).ticket;
    } catch (e) {
      if (e.status !== 404) throw e;
      // The installation is gone (removed elsewhere): make a new one.
      sessionStorage.removeItem("thingif.installation");
      S.installationID = null;
      return openEvents();
    }
  } catch (e) {
    if (S.token === token) retryEvents();
    return;
  }
  if (S.token !== token) return;
  const url = api("/installations/" + encodeURIComponent(S.installationID) + "/events?ticket=" + encodeURIComponent(ticket));
  const es = new EventSource(url);
  S.events = es;
  es.onopen = () => {
    S.eventsRetryMs = 1000;
    setLive(true, "live");
    // What finished while the stream was down was not told: read it.
    if (S.thing) loadCommands().catch(() => {});
  };
  es.addEventListener("command", (ev) => {
    let n;
    try { n = JSON.parse(ev.data); } catch (_) { return; }
    commandFinished(n).catch((e) => showError(e.message));
  });
  es.onerror = () => {
    // A ticket is single-use: the browser's own reconnect would be refused,
    // so close and come back with a new ticket.
    if (S.events !== es) return;
    closeEvents();
    setLive(false, "reconnecting");
    retryEvents();
  };
}

function retryEvents() {
  const wait = S.eventsRetryMs;
  S.eventsRetryMs = Math.min(S.eventsRetryMs * 2, 30000);
  setTimeout(() => { if (S.token && !S.events) openEvents(); }, wait);
}

async function commandFinished(n) {
  if (!S.thing || n.thingID !== S.thing.thingID) return;
  const c = await call("GET", target(n.thingID) + "/commands/" + encodeURIComponent(n.commandID));
  c._via = "event";
  S.commands.set(c.commandID, c);
  renderCommands();
  loadState().catch(() => {});
}

// ---- things ------------------------------------------------------------------

async function loadThings() {
  const r = await call("GET", api("/users/me/things"));
  S.things = r.things || [];
  const body = $("things").tBodies[0];
  body.replaceChildren();
  // A gateway's end nodes right under it (their gateway named by
  // gatewayThingID); an end node whose gateway is not the caller's stands alone.
  const owned = new Set(S.things.map((t) => t.thingID));
  const nested = new Map();
  for (const t of S.things) {
    if (!t.gatewayThingID || !owned.has(t.gatewayThingID)) continue;
    if (!nested.has(t.gatewayThingID)) nested.set(t.gatewayThingID, []);
    nested.get(t.gatewayThingID).push(t);
  }
  for (const t of S.things) {
    if (t.gatewayThingID && owned.has(t.gatewayThingID)) continue;
    const endNodes = nested.get(t.thingID) || [];
    body.append(thingRow(t, null, endNodes.length));
    for (const e of endNodes) body.append(thingRow(e, t, 0));
  }
  $("no-things").classList.toggle("hidden", S.things.length > 0);
  if (S.thing) {
    const fresh = S.things.find((t) => t.thingID === S.thing.thingID);
    if (fresh) { S.thing = fresh; renderThingTitle(); }
  }
}

// One row of the Things table: a thing, or (`gateway` given) an end node under its gateway.
function thingRow(t, gateway, endNodeCount) {
  const on = !!t.online;
  const name = el("td", {}, el("div", {}, t.vendorThingID || t.thingID), el("div", { class: "note mono" }, t.thingID));
  if (t.layoutPosition === "GATEWAY") {
    name.append(el("div", { class: "note layout" },
      "gateway · " + endNodeCount + " end node" + (endNodeCount === 1 ? "" : "s")));
  }
  const tr = el("tr", { "data-thing": t.thingID },
    name,
    el("td", {}, el("span", { class: "badge " + (on ? "on" : "off") }, on ? "online" : "offline")),
    el("td", {}, t.thingType || "—"),
    el("td", {}, t.firmwareVersion || "—"));
  if (gateway) {
    tr.classList.add("end-node");
    tr.setAttribute("data-gateway", gateway.thingID);
    tr.title = "end node of " + (gateway.vendorThingID || gateway.thingID);
  }
  if (S.thing && S.thing.thingID === t.thingID) tr.classList.add("selected");
  tr.addEventListener("click", () => selectThing(t.thingID).catch((e) => showError(e.message)));
  return tr;
}

function renderThingTitle() {
  const t = S.thing;
  const gateway = t.gatewayThingID && S.things.find((g) => g.thingID === t.gatewayThingID);
  $("thing-title").textContent = (t.vendorThingID || t.thingID) + " — " + (t.online ? "online" : "offline") +
    (t.thingType ? " · " + t.thingType : "") + (t.firmwareVersion ? " · firmware " + t.firmwareVersion : "") +
    (t.layoutPosition === "GATEWAY" ? " · gateway" : "") +
    (t.gatewayThingID ? " · end node of " + ((gateway && gateway.vendorThingID) || t.gatewayThingID) : "");
}

async function selectThing(thingID) {
  S.thing = S.things.find((t) => t.thingID === thingID) || { thingID };
  for (const tr of $("things").tBodies[0].rows) tr.classList.toggle("selected", tr.dataset.thing === thingID);
  S.commands = new Map();
  renderThingTitle();
  $("thing").classList.remove("hidden");
  showError("");
  await loadTraits();
  await Promise.all([loadCommands(), loadState(), loadAutomation()]);
}

// ---- controls from the thing's traits ----------------------------------------

// Where the thing's type and firmware version have a trait registry entry,
// its actions get controls (traits.js) in place of the raw form; without
// one (or when the entry cannot be read), the raw form as before.
async function loadTraits() {
  const tid = S.thing.thingID;
  let entry = null;
  try {
    const r = await call("GET", target(tid) + "/traits");
    if (r && r.registered === true) entry = r;
  } catch (_) {
    entry = null;
  }
  if (!S.thing || S.thing.thingID !== tid) return;
  S.traits = entry;
  const send = (alias, action, value) => postCommand({ issuer: "user:" + S.userID, actions: [{ [alias]: [{ [action]: value }] }] });
  send.refuse = (message) => showError("The command was not sent: " + message);
  let controls = [];
  try {
    controls = entry ? Traits.controls(entry, send) : [];
  } catch (e) {
    controls = [];
  }
  $("trait-controls").replaceChildren(...controls);
  $("trait-card").classList.toggle("hidden", controls.length === 0);
  $("send-card").classList.toggle("hidden", controls.length > 0);
}

// ---- commands ----------------------------------------------------------------

async function loadCommands() {
  const tid = S.thing.thingID;
  // Oldest first, 100 a page: read up to 10 pages and show the newest.
  let key = null;
  const all = [];
  for (let page = 0; page < 10; page++) {
    const q = "?bestEffortLimit=100" + (key ? "&paginationKey=" + encodeURIComponent(key) : "");
    const r = await call("GET", target(tid) + "/commands" + q);
    all.push(...(r.commands || []));
    key = r.nextPaginationKey;
    if (!key) break;
  }
  if (!S.thing || S.thing.thingID !== tid) return;
  for (const c of all.slice(-30)) {
    const old = S.commands.get(c.commandID);
    // A notification may have brought a newer copy while this list was read.
    if (old && ((old.modifiedAt || 0) > (c.modifiedAt || 0) || (old.actionResults && !c.actionResults))) continue;
    if (old && old._via) c._via = old._via;
    S.commands.set(c.commandID, c);
  }
  renderCommands();
}

// One {name, result} per action result, for both shapes: schema v0
// [{"turnPower":{"succeeded":true}}] and trait v1 [{"Alias":[{"turnPower":{…}}]}].
function flatResults(list) {
  const out = [];
  for (const item of list || []) {
    for (const [k, v] of Object.entries(item || {})) {
      if (Array.isArray(v)) {
        for (const inner of v) for (const [a, r] of Object.entries(inner || {})) out.push({ name: k + "." + a, r });
      } else {
        out.push({ name: k, r: v });
      }
    }
  }
  return out;
}

function actionsSummary(actions) {
  const names = [];
  for (const item of actions || []) {
    for (const [k, v] of Object.entries(item || {})) {
      if (Array.isArray(v)) for (const inner of v) names.push(...Object.keys(inner || {}).map((a) => k + "." + a));
      else names.push(k);
    }
  }
  return names.join(", ");
}

function renderCommands() {
  const body = $("commands").tBodies[0];
  body.replaceChildren();
  const list = [...S.commands.values()].sort((a, b) => (b.createdAt || 0) - (a.createdAt || 0));
  for (const c of list) {
    const state = c.commandState || "SENDING";
    const when = c.createdAt ? new Date(c.createdAt).toLocaleString() : "";
    const expires = c.expiresAt ? " · expires " + new Date(c.expiresAt).toLocaleString() : "";
    const cell = el("td", { colspan: "4" },
      el("span", { class: "state-" + state }, state), " · ", when, " · ",
      el("span", { class: "mono" }, c.commandID), " · ", actionsSummary(c.actions), expires);
    // A command without results yet can be cancelled (docs/PROTOCOL.md 9.1).
    if (state === "SENDING" || state === "DELIVERED") {
      const b = el("button", { type: "button", class: "small cancel", "data-cancel": c.commandID }, "Cancel");
      b.addEventListener("click", () => cancelCommand(c.commandID, b));
      cell.append(" ", b);
    }
    const head = el("tr", { class: "command", "data-command": c.commandID, "data-state": state, "data-via": c._via || "list" },
      cell);
    body.append(head);
    for (const { name, r } of flatResults(c.actionResults)) {
      const ok = !!(r && r.succeeded);
      const data = r && r.data !== undefined ? JSON.stringify(r.data) : "";
      body.append(el("tr", { class: "result " + (ok ? "ok" : "failed"), "data-command": c.commandID },
        el("td", { class: "mark" }, ok ? "✓" : "✗"),
        el("td", {}, name),
        el("td", {}, (r && r.errorMessage) || ""),
        el("td", { class: "mono" }, data)));
    }
  }
}

function addActionRow(name, params) {
  const row = el("div", { class: "action-row" },
    el("label", {}, "Action", el("input", { class: "action-name", value: name || "", required: "" })),
    el("label", { class: "params" }, "Parameters (JSON)", el("input", { class: "action-params mono", value: params || "{}" })),
    el("button", { type: "button", class: "remove", title: "remove this action" }, "−"));
  row.querySelector("button").addEventListener("click", () => {
    if ($("actions").children.length > 1) row.remove();
  });
  $("actions").append(row);
}

// POST …/cancel: 200 CANCELLED, 202 while the thing has not answered yet
// (it still refuses the command if the cancel reaches it first), 409 when
// the command had results or ended already (its state is shown).
async function cancelCommand(commandID, button) {
  showError("");
  button.disabled = true;
  try {
    const c = await call("POST", target(S.thing.thingID) + "/commands/" + encodeURIComponent(commandID) + "/cancel");
    if (c && c.commandID) S.commands.set(c.commandID, Object.assign({}, S.commands.get(c.commandID), c));
    renderCommands();
  } catch (e) {
    const state = e.body && e.body.commandState;
    showError("The command was not cancelled: " + e.message + (state ? " (it is " + state + ")" : ""));
    button.disabled = false;
    loadCommands().catch(() => {});
  }
}

async function sendCommand(ev) {
  ev.preventDefault();
  showError("");
  const actions = [];
  for (const row of $("actions").children) {
    const name = row.querySelector(".action-name").value.trim();
    const raw = row.querySelector(".action-params").value.trim() || "{}";
    let params;
    try {
      params = JSON.parse(raw);
    } catch (e) {
      showError("The parameters of " + (name || "an action") + " are not JSON: " + e.message);
      return;
    }
    if (!name) { showError("Every action needs a name."); return; }
    actions.push({ [name]: params });
  }
  const form = {
    schema: $("schema").value.trim(),
    schemaVersion: Number($("schema-version").value),
    issuer: "user:" + S.userID,
    actions,
  };
  const ttl = Number($("ttl").value);
  if (ttl > 0) form.timeToLive = ttl;
  await postCommand(form);
}

// POST …/commands, then the command as stored in the list.
async function postCommand(form) {
  showError("");
  const tid = S.thing.thingID;
  const headers = S.installationID ? { "X-Thingif-Installation-ID": S.installationID } : {};
  $("send").disabled = true;
  try {
    const r = await call("POST", target(tid) + "/commands", form, headers);
    const c = await call("GET", target(tid) + "/commands/" + encodeURIComponent(r.commandID));
    const known = S.commands.get(c.commandID);
    if (!known || !known.actionResults) S.commands.set(c.commandID, c);
    renderCommands();
    // Without a live stream, look once more a little later.
    if (!S.events) setTimeout(() => loadCommands().catch(() => {}), 5000);
  } catch (e) {
    showError("The command was not sent: " + e.message);
  } finally {
    $("send").disabled = false;
  }
}

// ---- state and its history ---------------------------------------------------

// Each state the thing's traits define, as its definition reads it.
function renderTraitStates(state) {
  let rows = [];
  try {
    rows = S.traits ? Traits.states(S.traits, state) : [];
  } catch (_) {
    rows = [];
  }
  $("trait-states").tBodies[0].replaceChildren(...rows);
  $("trait-states").classList.toggle("hidden", rows.length === 0);
}

async function loadState() {
  const tid = S.thing.thingID;
  try {
    const s = await call("GET", target(tid) + "/states");
    $("state").textContent = JSON.stringify(s, null, 2);
    renderTraitStates(s);
  } catch (e) {
    if (e.status !== 404) throw e;
    $("state").textContent = "no state uploaded yet";
    renderTraitStates({});
  }
  await loadHistory();
}

async function loadHistory() {
  const tid = S.thing.thingID;
  const to = Date.now() + 1;
  const from = Math.max(0, to - Number($("range").value));
  const samples = [];
  let key = null;
  let groups = 0;
  for (let page = 0; page < 20; page++) {
    const q = "?from=" + from + "&to=" + to + (key ? "&paginationKey=" + encodeURIComponent(key) : "");
    const r = await call("GET", target(tid) + "/states/history" + q);
    for (const g of r.groupedResults || []) {
      groups++;
      for (const o of g.objects || []) samples.push({ at: o._created, state: o });
    }
    key = r.nextPaginationKey;
    if (!key) break;
  }
  if (!S.thing || S.thing.thingID !== tid) return;
  samples.sort((a, b) => a.at - b.at);
  S.history = samples;
  S.historyRange = { from, to, groups };
  fillFields();
  drawChart();
}

// Numeric fields of the samples (booleans count as 0/1), as "a" or "alias.a".
function numericFields(state, prefix, out) {
  for (const [k, v] of Object.entries(state || {})) {
    if (k === "_created") continue;
    const name = prefix ? prefix + "." + k : k;
    if (typeof v === "number" || typeof v === "boolean") out.add(name);
    else if (v && typeof v === "object" && !Array.isArray(v) && !prefix) numericFields(v, name, out);
  }
  return out;
}

function valueOf(state, field) {
  let v = state;
  for (const part of field.split(".")) v = v == null ? undefined : v[part];
  if (typeof v === "boolean") return v ? 1 : 0;
  return typeof v === "number" && isFinite(v) ? v : undefined;
}

function fillFields() {
  const sel = $("field");
  const was = sel.value;
  const fields = new Set();
  for (const s of S.history) numericFields(s.state, "", fields);
  sel.replaceChildren(...[...fields].sort().map((f) => el("option", { value: f }, f)));
  if (fields.has(was)) sel.value = was;
}

const INTERVALS = { "1_MINUTE": 60000, "15_MINUTES": 900000, "30_MINUTES": 1800000, "1_HOUR": 3600000, "12_HOURS": 43200000 };

function chartPoints(field) {
  const raw = [];
  for (const s of S.history) {
    const v = valueOf(s.state, field);
    if (v !== undefined) raw.push({ t: s.at, v });
  }
  const step = INTERVALS[$("interval").value];
  if (!step) return raw;
  // The mean of each interval, at the interval's start (the hub's groups are aligned the same way).
  const buckets = new Map();
  for (const p of raw) {
    const start = p.t - (p.t % step);
    const b = buckets.get(start) || { sum: 0, n: 0 };
    b.sum += p.v;
    b.n++;
    buckets.set(start, b);
  }
  return [...buckets.entries()].sort((a, b) => a[0] - b[0]).map(([t, b]) => ({ t, v: b.sum / b.n }));
}

function drawChart() {
  const chart = $("chart");
  chart.replaceChildren();
  const W = 640, H = 260, L = 48, R = 12, T = 12, B = 30;
  const field = $("field").value;
  const pts = field ? chartPoints(field) : [];
  const range = S.historyRange || { groups: 0 };
  const interval = (S.thing && S.thing.dataGroupingInterval) || "none";
  $("chart-note").textContent = pts.length
    ? pts.length + " point(s) of " + field + " from " + S.history.length + " sample(s) in " + range.groups +
      " group(s) (the thing's grouping interval: " + interval + ")"
    : "no numeric state in this range";
  chart.append(svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  chart.append(svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  if (!pts.length) return;
  let t0 = pts[0].t, t1 = pts[pts.length - 1].t;
  if (t1 === t0) { t0 -= 1000; t1 += 1000; }
  let v0 = Math.min(...pts.map((p) => p.v)), v1 = Math.max(...pts.map((p) => p.v));
  if (v1 === v0) { v0 -= 1; v1 += 1; }
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => H - B - ((v - v0) / (v1 - v0)) * (H - T - B);
  for (let i = 0; i <= 4; i++) {
    const v = v0 + ((v1 - v0) * i) / 4;
    chart.append(svg("line", { class: "grid", x1: L, y1: y(v), x2: W - R, y2: y(v) }));
    chart.append(svg("text", { x: L - 4, y: y(v) + 4, "text-anchor": "end" }, Number(v.toPrecision(4)).toString()));
  }
  const fmt = (t) => new Date(t).toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
  chart.append(svg("text", { x: L, y: H - 10, "text-anchor": "start" }, fmt(t0)));
  chart.append(svg("text", { x: W - R, y: H - 10, "text-anchor": "end" }, fmt(t1)));
  const d = pts.map((p, i) => (i ? "L" : "M") + x(p.t).toFixed(1) + " " + y(p.v).toFixed(1)).join(" ");
  chart.append(svg("path", { class: "line", d, "data-points": pts.length }));
  if (pts.length <= 200) for (const p of pts) chart.append(svg("circle", { class: "dot", cx: x(p.t).toFixed(1), cy: y(p.v).toFixed(1), r: 2.5 }));
}

// ---- automation (read-only) --------------------------------------------------

function listItems(ul, items, label) {
  ul.replaceChildren();
  if (!items.length) { ul.append(el("li", { class: "note" }, "none")); return; }
  for (const it of items) {
    const copy = Object.assign({}, it);
    const name = label(copy);
    ul.append(el("li", {}, el("strong", {}, name), el("pre", { class: "json" }, JSON.stringify(copy))));
  }
}

async function loadAutomation() {
  const t = target(S.thing.thingID);
  const get = (p, key) => call("GET", t + p).then((r) => (r && r[key]) || []).catch(() => []);
  const [sets, timers, triggers] = await Promise.all([
    get("/action-sets", "actionSets"), get("/timer-triggers", "timerTriggers"), get("/triggers", "triggers")]);
  listItems($("action-sets"), sets, (o) => o.name || "");
  listItems($("timer-triggers"), timers, (o) => (o.name || "") + (o.enabled === false ? " (disabled)" : ""));
  listItems($("server-triggers"), triggers, (o) => (o.triggerID || "") + (o.disabled ? " (disabled)" : ""));
}

// ---- start ------------------------------------------------------------------

function start() {
  $("login-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    showError("");
    try {
      const r = await call("POST", api("/oauth2/token"), { username: $("login").value, password: $("password").value });
      $("password").value = "";
      await signIn(r.access_token, true);
    } catch (e) {
      S.token = null;
      showError("Sign-in failed: " + e.message);
    }
  });
  $("token-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    showError("");
    try {
      await signIn($("token").value.trim(), false);
      $("token").value = "";
    } catch (e) {
      S.token = null;
      showError("That token was refused: " + e.message);
    }
  });
  $("signout").addEventListener("click", () => signOut());
  $("send-form").addEventListener("submit", sendCommand);
  $("add-action").addEventListener("click", () => addActionRow("", "{}"));
  $("reload-commands").addEventListener("click", () => loadCommands().catch((e) => showError(e.message)));
  $("reload-chart").addEventListener("click", () => loadHistory().catch((e) => showError(e.message)));
  $("range").addEventListener("change", () => loadHistory().catch((e) => showError(e.message)));
  $("field").addEventListener("change", drawChart);
  $("interval").addEventListener("change", drawChart);
  addActionRow("turnPower", '{"power":true}');

  loadConfig().then(() => {
    const saved = sessionStorage.getItem("thingif.token");
    if (saved) signIn(saved, sessionStorage.getItem("thingif.revoke") === "1").catch(() => signOut(""));
  }).catch((e) => showError("The hub did not answer: " + e.message));
}

document.addEventListener("DOMContentLoaded", start);
