// The state console: plain modules, no build step. Everything the server sends is shown as
// text (DOM nodes built by `h`, never HTML strings), every call goes through the REST API with
// the same authorization as any client, and the token lives in this tab's sessionStorage and
// travels as a bearer header, never as a cookie.

const main = document.getElementById("main");
const live = document.getElementById("live");
const TOKEN_KEY = "state-console-token";
const PAGE = 100;

// ---- DOM --------------------------------------------------------------------------------

// Bidi controls in stored text would reorder what is shown around them ("invoice\u202Egnp.exe"
// reads "invoiceexe.png"), and zero-width ones hide inside look-alike names ("adm\u200Bin"):
// both are shown as their code points instead.
const BIDI = /[\u061C\u200B-\u200F\u202A-\u202E\u2060\u2066-\u2069\uFEFF]/g;
const visible = (text) => text.replace(BIDI, (c) => `⟨U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}⟩`);

function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "class") node.className = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(visible(String(child))));
  }
  return node;
}

const link = (view, params, ...children) => h("a", { href: route(view, params) }, ...children);
const json = (value) => h("pre", {}, JSON.stringify(value, null, 2));
const chip = (text, cls) => h("span", { class: `chip ${cls || ""}` }, text);
// One formatter for every timestamp: `toLocaleString` builds a new one per call, which costs
// more than the rest of a 500-row table together.
const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: "short", timeStyle: "medium" });
const timeOfDay = new Intl.DateTimeFormat(undefined, { timeStyle: "medium" });
const when = (iso) => (iso ? dateTime.format(new Date(iso)) : "");

function left(iso) {
  if (!iso) return "";
  const ms = new Date(iso).getTime() - Date.now();
  if (ms <= 0) return "expired";
  const s = Math.round(ms / 1000);
  return s < 120 ? `${s} s` : s < 7200 ? `${Math.round(s / 60)} min` : `${Math.round(s / 3600)} h`;
}

// Countdowns update in place each second, without a reload.
function countdown(iso) {
  return h("span", { "data-expires": iso || "" }, left(iso));
}
setInterval(() => {
  for (const node of document.querySelectorAll("[data-expires]")) node.textContent = left(node.dataset.expires);
}, 1000);

function table(columns, rows) {
  return h("table", {},
    h("thead", {}, h("tr", {}, columns.map(([title, , cls]) => h("th", { class: cls }, title)))),
    h("tbody", {}, rows.map((row) => h("tr", {}, columns.map(([, cell, cls]) => h("td", { class: cls }, cell(row)))))));
}

// ---- the API ----------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: `Bearer ${token}` } : {};
}

async function api(method, path, { query, body } = {}) {
  const url = new URL(path, location.origin);
  for (const [name, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
  }
  const headers = { ...authHeaders(), Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  const parsed = text ? JSON.parse(text) : {};
  if (response.status === 401) {
    showLogin(sessionStorage.getItem(TOKEN_KEY) ? "That token is not one this server knows." : "This server needs a token.");
    throw new ApiError(401, parsed);
  }
  if (!response.ok) throw new ApiError(response.status, parsed);
  return parsed;
}

// An operation by name through the seam (`/v1/call/native/...`), its arguments in the body.
// Keys go this way, never in a path: URL parsing collapses `.` and `..` segments (even
// percent-encoded), and a request for `team-a/../team-b/secret` would reach `team-b/secret`.
const OUTCOME_STATUS = { not_found: 404, conflict: 412, fenced: 409, forbidden: 403, invalid: 400, unavailable: 503 };
async function callOp(name, args) {
  const reply = await api("POST", `/v1/call/native/${name}`, { body: args });
  if (reply.outcome === "ok") return reply.result;
  const status = OUTCOME_STATUS[reply.outcome] || 500;
  throw new ApiError(status, { code: reply.outcome, detail: reply.error?.message || reply.outcome, result: reply.result });
}

// ---- routing ----------------------------------------------------------------------------

function route(view, params) {
  const query = new URLSearchParams(Object.entries(params || {}).filter(([, v]) => v !== undefined && v !== ""));
  const tail = query.toString();
  return `#/${view}${tail ? `?${tail}` : ""}`;
}

function current() {
  const [path, tail] = location.hash.replace(/^#\/?/, "").split("?");
  return { view: path || "overview", params: Object.fromEntries(new URLSearchParams(tail || "")) };
}

const views = {};
let rendering = 0;

async function render() {
  const { view, params } = current();
  for (const a of document.querySelectorAll("#nav a")) {
    const target = a.getAttribute("href").replace(/^#\/?/, "") || "overview";
    a.classList.toggle("active", target === view);
  }
  const draw = views[view] || views.overview;
  const ticket = ++rendering;
  try {
    const content = await draw(params);
    if (ticket === rendering) {
      main.replaceChildren(content);
      // Which view is drawn, for tests and scripts that wait for one.
      main.dataset.view = location.hash || "#/";
      markFirstDraw();
    }
  } catch (error) {
    if (ticket !== rendering || error.status === 401) return;
    main.replaceChildren(h("p", { class: "error" }, `Could not load this view: ${error.message}`));
    main.dataset.view = location.hash || "#/";
  }
}

// When the page's first view was drawn, and when the frame showing it was painted: on the
// page's Performance timeline, where the console benchmark reads them.
let marked = false;
function markFirstDraw() {
  if (marked) return;
  marked = true;
  performance.mark("state-view-drawn");
  requestAnimationFrame(() => setTimeout(() => performance.mark("state-view-painted"), 0));
}

// A change anywhere redraws the view shown, at most every 200 ms, unless a form in it is
// being filled in.
let redraw = null;
let stale = false;
function refreshSoon() {
  if (redraw) return;
  // Not under a dialog or a field being filled in: noted, and done when they close.
  if (document.querySelector("dialog[open]") || (main.contains(document.activeElement) && document.activeElement.tagName === "INPUT")) {
    stale = true;
    return;
  }
  stale = false;
  redraw = setTimeout(() => { redraw = null; render(); }, 200);
}
main.addEventListener("focusout", () => { if (stale) setTimeout(refreshSoon, 0); });

// ---- actions ----------------------------------------------------------------------------

const dialog = document.getElementById("confirm");

// Asks before every change, with the fields it needs; resolves with their values or null.
function confirmAction(text, fields = []) {
  document.getElementById("confirm-text").textContent = visible(text);
  const inputs = fields.map(([name, label, value]) => h("input", { name, value: value || "", "aria-label": label, placeholder: label }));
  document.getElementById("confirm-fields").replaceChildren(...inputs.map((input, i) => h("label", {}, fields[i][1], input)));
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "ok" ? Object.fromEntries(inputs.map((i) => [i.name, i.value])) : null);
      if (stale) setTimeout(refreshSoon, 0);
    }, { once: true });
  });
}

async function act(text, fields, call) {
  const values = await confirmAction(text, fields);
  if (!values) return;
  try {
    await call(values);
  } catch (error) {
    const now = error.problem?.result?.version;
    const why = error.status === 412 || error.problem?.code === "conflict"
      ? `it changed since this page showed it${now ? ` (it is at version ${now} now)` : ""}: look again and retry`
      : error.message;
    alert(visible(`Refused: ${why}`));
  }
  render();
}

// What the token may do and see (`/v1/whoami`): without the write right the console shows no
// action (the server refuses a forged one anyway); a token scoped to prefixes starts there.
let me = { name: null, prefixes: [""], right: "admin" };
const canWrite = () => me.right === "write" || me.right === "admin";
const wholeStore = () => me.prefixes.includes("");
const action = (label, onclick, cls) => (canWrite() ? h("button", { class: cls || "quiet", onclick }, label) : null);

// ---- views ------------------------------------------------------------------------------

views.overview = async () => {
  // A token scoped to prefixes lists what lies under its first one; runs are listed for tokens
  // that read the whole store. Every request at once, and the feed's first changes with them.
  const prefix = wholeStore() ? undefined : me.prefixes[0];
  const [health, leases, runs, queues, http] = await Promise.all([
    api("GET", "/v1/health"),
    api("GET", "/v1/leases", { query: { limit: 1000, prefix } }).catch(() => null),
    wholeStore() ? api("GET", "/v1/workflows", { query: { limit: 500 } }).catch(() => null) : null,
    api("GET", "/v1/queues:list", { query: { limit: 1000, prefix } }).catch(() => null),
    wholeStore() ? httpFigures() : null,
    recentLoaded,
  ]);
  const byStatus = {};
  for (const run of runs?.runs || []) byStatus[run.state || run.run_status] = (byStatus[run.state || run.run_status] || 0) + 1;
  const more = runs?.next_cursor ? "+" : "";
  const dead = (queues?.queues || []).filter((q) => q.queue.endsWith(".dead") && q.visible > 0);
  const card = (label, value) => h("div", { class: "card" }, h("div", { class: "value" }, value), h("div", { class: "label" }, label));
  const rate = writeRate.perSecond();
  return h("section", {},
    h("h1", {}, "Overview"),
    h("div", { class: "cards" },
      card("revision", health.revision),
      card("keys", health.keys ?? "—"),
      card("writes per second (live)", rate === null ? "—" : rate.toFixed(1)),
      card("database", health.database_bytes ? `${(health.database_bytes / 1e6).toFixed(1)} MB` : "—"),
      card(serving(health), health.backend),
      card("watchers (open change streams)", health.watchers ?? "—"),
      card("HTTP reads per second", http?.readsPerSecond ?? "—"),
      card("failed requests (unavailable, internal) since the last look", http?.newFailures ?? "—"),
      card("leases held", leases ? leases.leases.length : "—"),
      card("dead letters", dead.reduce((n, q) => n + q.visible, 0))),
    h("h2", {}, "Runs"),
    !wholeStore() ? h("p", { class: "muted" }, "Runs are listed for tokens that read the whole store.")
      : Object.keys(byStatus).length
        ? h("p", {}, Object.entries(byStatus).map(([status, n]) =>
          link("runs", { status: status === "claimable" ? "pending" : status }, chip(`${status} ${n}${more}`, `s-${status}`))))
        : h("p", { class: "muted" }, "No runs."),
    h("h2", {}, "Recent changes"),
    feedList(activity.slice(0, 10)),
    h("p", { class: "muted" }, `Server ${health.server_version}, up ${Math.round(health.uptime_seconds)} s; ${health.writes?.commits ?? 0} commits.`));
};

// Who serves the store: the owner process and how many processes joined it, or the replicas
// sharing a PostgreSQL store.
function serving(health) {
  if (health.replicas !== undefined) return `${health.replicas} ${health.replicas === 1 ? "replica" : "replicas"} on this store`;
  if (health.owner) return `owner pid ${health.owner.pid}, ${health.owner.clients} ${health.owner.clients === 1 ? "client" : "clients"}`;
  return "store";
}

// Figures from /metrics (for tokens that read the whole store): GET requests per second and
// requests that failed on the server's side, each since the previous look.
let lastMetrics = null;
async function httpFigures() {
  const response = await fetch("/metrics", { headers: authHeaders() }).catch(() => null);
  if (!response || !response.ok) return null;
  let reads = 0, failures = 0;
  for (const line of (await response.text()).split("\n")) {
    const match = line.match(/^state_http_requests_total\{([^}]*)\} (\d+(?:\.\d+)?)$/);
    if (!match) continue;
    const count = Number(match[2]);
    if (/method="GET"/.test(match[1])) reads += count;
    if (/outcome="(unavailable|internal)"/.test(match[1])) failures += count;
  }
  const now = { at: Date.now(), reads, failures };
  const before = lastMetrics;
  lastMetrics = now;
  if (!before) return { readsPerSecond: "…", newFailures: failures };
  const seconds = Math.max((now.at - before.at) / 1000, 0.001);
  return { readsPerSecond: ((reads - before.reads) / seconds).toFixed(1), newFailures: failures - before.failures };
}

views.keys = async ({ prefix = wholeStore() ? "" : me.prefixes[0], key, cursor, version }) => {
  // One level of the tree, a page at a time: the server groups what lies deeper into folders
  // (the delimiter), so a folder of a million keys is one line and one seek.
  const page = await api("GET", "/v1/kv", { query: { prefix, limit: PAGE, cursor, delimiter: "/" } });
  const lines = [
    ...(page.prefixes || []).map((folder) => ({ name: folder, folder: true })),
    ...page.entries.map((entry) => ({ name: entry.key, folder: false })),
  ].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const root = wholeStore() ? "" : me.prefixes[0];
  const up = prefix && prefix !== root ? prefix.slice(0, prefix.slice(0, -1).lastIndexOf("/") + 1) : null;
  const list = h("div", { class: "list" },
    up !== null ? link("keys", { prefix: up }, "↑ ..") : null,
    cursor ? link("keys", { prefix }, "↑ first page") : null,
    lines.map((line) => line.folder
      ? link("keys", { prefix: line.name }, line.name.slice(prefix.length), h("span", { class: "muted" }, " …"))
      : h("a", { href: route("keys", { prefix, cursor, key: line.name }), class: line.name === key ? "active" : "" }, line.name.slice(prefix.length) || line.name)),
    lines.length ? null : h("p", { class: "muted" }, `No key starts with “${prefix}”.`),
    page.next_cursor ? link("keys", { prefix, cursor: page.next_cursor }, "next page…") : null);
  const search = h("form", { class: "bar", onsubmit: (event) => { event.preventDefault(); location.hash = route("keys", { prefix: event.target.prefix.value }); } },
    h("input", { name: "prefix", value: prefix, placeholder: "prefix, e.g. team-a/", "aria-label": "prefix" }), h("button", {}, "Go"));
  return h("section", {}, h("h1", {}, "Keys"), search,
    h("div", { class: "split" }, list, key ? await keyDetail(key, prefix, version) : h("p", { class: "muted" }, "Pick a key.")));
};

async function keyDetail(key, prefix, version) {
  let entry;
  try {
    entry = await callOp("state_get", { key, version: version === undefined ? undefined : Number(version) });
  } catch (error) {
    if (error.status === 404) return h("p", { class: "muted" }, `${key} does not exist (any more).`);
    throw error;
  }
  // Versions without their values (a large value would come once per version and redraw); a
  // diff fetches its two versions when it is opened.
  const history = await api("GET", "/v1/history", { query: { key, n: 50, include_values: false } });
  const puts = history.events.filter((e) => e.op === "put");
  const previous = (event) => puts[puts.indexOf(event) - 1];
  const lazyDiff = (before, after) => {
    const box = h("div", {}, h("p", { class: "muted" }, "Loading…"));
    const details = h("details", { ontoggle: async () => {
      if (!details.open || box.dataset.loaded) return;
      box.dataset.loaded = "1";
      try {
        const [a, b] = await Promise.all([before, after].map((v) => callOp("state_get", { key, version: v })));
        box.replaceChildren(diff(a.value, b.value));
      } catch (error) {
        box.replaceChildren(h("p", { class: "error" }, error.message));
      }
    } }, h("summary", {}, "diff"), box);
    return details;
  };
  return h("div", {},
    h("h2", {}, key),
    h("p", {}, chip(`version ${entry.version}`), chip(`revision ${entry.mod_revision}`),
      entry.expires_at ? chip(h("span", {}, "expires in ", countdown(entry.expires_at))) : null,
      entry.agent_id ? chip(`by ${entry.agent_id}`) : null, h("span", { class: "muted" }, when(entry.updated_at))),
    version ? h("p", {}, `Shown at version ${version}. `, link("keys", { prefix, key }, "current")) : null,
    json(entry.value),
    version ? null : action("Delete", () => act(`Delete ${key} (version ${entry.version})? Refused if it changed since.`, [], () =>
      callOp("state_delete", { key, expected_version: entry.version })), "danger"),
    h("h2", {}, "History"),
    table([
      ["revision", (e) => e.revision, "num"],
      ["version", (e) => e.version, "num"],
      ["change", (e) => e.op],
      ["when", (e) => when(e.time)],
      ["", (e) => e.op === "put" ? [link("keys", { prefix, key, version: e.version }, "view"), " ",
        previous(e) ? lazyDiff(previous(e).version, e.version) : null] : null],
    ], [...history.events].reverse()));
}

// A line diff of two values' pretty JSON (longest common subsequence; values are small).
function diff(before, after) {
  const a = JSON.stringify(before, null, 2).split("\n");
  const b = JSON.stringify(after, null, 2).split("\n");
  if (a.length * b.length > 250000) return h("p", { class: "muted" }, "Too large to compare here.");
  const lcs = Array.from({ length: a.length + 1 }, () => new Uint32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--) for (let j = b.length - 1; j >= 0; j--)
    lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const lines = [];
  let i = 0, j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) { lines.push(`  ${a[i]}\n`); i++; j++; }
    else if (j < b.length && (i === a.length || lcs[i][j + 1] >= lcs[i + 1][j])) { lines.push(h("ins", {}, `+ ${b[j]}\n`)); j++; }
    else { lines.push(h("del", {}, `- ${a[i]}\n`)); i++; }
  }
  return h("pre", { class: "diff" }, lines);
}

const STATUSES = ["", "pending", "running", "completed", "failed", "cancelled", "waiting", "delayed", "blocked", "parked"];

views.runs = async ({ status = "", name = "", tag = "", run, cursor }) => {
  if (!wholeStore()) {
    return h("section", {}, h("h1", {}, "Runs"),
      run ? await runDetail(run) : h("p", { class: "muted" }, "Runs are listed for tokens that read the whole store; open one by its link."));
  }
  const tags = tag.includes("=") ? JSON.stringify({ [tag.split("=")[0]]: tag.split("=").slice(1).join("=") }) : undefined;
  const page = wholeStore() ? await api("GET", "/v1/workflows", { query: { status, name, tags, limit: 500, cursor } }) : { runs: [] };
  const filters = h("form", { class: "bar", onsubmit: (event) => {
    event.preventDefault();
    const f = event.target;
    location.hash = route("runs", { status: f.status.value, name: f.name.value, tag: f.tag.value });
  } },
  h("select", { name: "status", "aria-label": "status" }, STATUSES.map((s) => h("option", { value: s, selected: s === status }, s || "any status"))),
  h("input", { name: "name", value: name, placeholder: "name", "aria-label": "name" }),
  h("input", { name: "tag", value: tag, placeholder: "tag: key=value", "aria-label": "tag" }),
  h("button", {}, "Filter"));
  const state = (r) => r.state && r.state !== "claimable" ? r.state : r.run_status;
  const columns = [
    ["run", (r) => link("runs", { status, name, tag, run: r.run_id }, r.run_id)],
    ["name", (r) => r.name],
    ["status", (r) => h("span", { class: `s-${state(r)}` }, state(r))],
    ["holder", (r) => r.holder || ""],
    ["attempt", (r) => `${r.attempt}/${r.max_attempts}`, "num"],
    ["tags", (r) => Object.entries(r.tags || {}).map(([k, v]) => chip(`${k}=${v}`))],
    ["updated", (r) => when(r.updated_at)],
  ];
  // A page of 500 runs feeds the graph; the table shows 100 of them, the rest on request
  // (drawn from the same answer).
  const runs = table(columns, page.runs.slice(0, PAGE));
  const rest = page.runs.length > PAGE
    ? h("button", { class: "quiet", onclick: (event) => {
      runs.querySelector("tbody").append(...table(columns, page.runs.slice(PAGE)).querySelector("tbody").children);
      event.target.remove();
    } }, `show ${page.runs.length - PAGE} more`)
    : null;
  return h("section", {}, h("h1", {}, "Runs"), filters,
    run ? await runDetail(run) : null,
    runs, rest, " ",
    page.next_cursor ? link("runs", { status, name, tag, cursor: page.next_cursor }, "next page…") : null,
    h("h2", {}, "Dependencies"),
    // Laid out and painted only once scrolled to (content-visibility): a graph of 500 runs
    // costs the first view nothing.
    h("div", { class: "deferred" }, graph(page.runs, (r) => route("runs", { status, name, tag, run: r.run_id }))));
};

async function runDetail(id) {
  const [status, history] = await Promise.all([
    api("GET", `/v1/workflows/${encodeURIComponent(id)}`),
    api("GET", "/v1/history", { query: { kind: "workflow", key: id, n: 200 } }),
  ]);
  const run = status.run;
  const finished = ["completed", "failed", "cancelled"].includes(run.run_status);
  return h("div", { class: "card" },
    h("h2", {}, `${run.name} `, h("span", { class: "muted" }, run.run_id)),
    h("p", {}, chip(run.state || run.run_status, `s-${run.state || run.run_status}`),
      run.holder ? chip(`held by ${run.holder}`) : null,
      run.lease_expires_at ? chip(h("span", {}, "lease ", countdown(run.lease_expires_at))) : null,
      (run.waiting_on || []).map((d) => link("runs", { run: d }, chip(`waits on ${d}`))),
      run.blocked_by ? chip(`blocked by ${run.blocked_by}`) : null,
      run.awaiting_signal && !finished ? chip(`awaits signal ${run.awaiting_signal}`) : null,
      run.error ? h("span", { class: "error" }, ` ${run.error}`) : null),
    h("p", {}, finished ? null : [
      action("Cancel", () => act(`Cancel run “${run.name}” (${run.run_id})? Its worker's later writes are refused.`, [["reason", "reason", "cancelled from the console"]],
        ({ reason }) => api("POST", `/v1/workflows/${encodeURIComponent(id)}/cancel`, { body: { reason, agent_id: "console" } })), "danger"), " ",
      action("Send a signal", () => act(`Send run ${run.run_id} a signal.`, [["name", "signal name", run.awaiting_signal || ""], ["value", "value (JSON)", "true"]],
        ({ name, value }) => api("POST", `/v1/workflows/${encodeURIComponent(id)}/signal`, { body: { name, value: parseJson(value), sender: "console" } })))]),
    h("h2", {}, "Timeline"),
    table([
      ["revision", (e) => e.revision, "num"],
      ["when", (e) => when(e.time)],
      ["event", (e) => e.op],
      ["by", (e) => e.agent_id || e.value?.holder || ""],
      ["token", (e) => e.value?.token ?? "", "num"],
      ["details", (e) => e.value === undefined ? "" : h("code", {}, JSON.stringify(e.value))],
    ], history.events));
}

// A signal's value is JSON; text that is not is refused here rather than sent as a string.
function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`the value is not JSON (write a string in quotes: "${text}")`);
  }
}

// The runs as a layered graph: a run sits one layer right of the deepest run it waits on.
function graph(runs, href) {
  const byId = new Map(runs.map((r) => [r.run_id, r]));
  // Edges from every dependency, finished or not, so done and failed runs stay in the picture.
  const dependencies = (r) => r.depends_on || r.waiting_on || [];
  const edges = runs.flatMap((r) => dependencies(r).filter((d) => byId.has(d)).map((d) => [d, r.run_id]));
  if (!edges.length) return h("p", { class: "muted" }, "None among these runs.");
  const depth = new Map();
  const depthOf = (id, seen = new Set()) => {
    if (depth.has(id)) return depth.get(id);
    if (seen.has(id)) return 0;
    seen.add(id);
    const d = Math.max(0, ...dependencies(byId.get(id)).filter((x) => byId.has(x)).map((x) => depthOf(x, seen) + 1));
    depth.set(id, d);
    return d;
  };
  const involved = [...new Set(edges.flat())];
  const layers = [];
  for (const id of involved) (layers[depthOf(id)] ||= []).push(id);
  const W = 170, H = 34, GX = 60, GY = 12;
  const at = new Map();
  layers.forEach((layer, x) => layer.forEach((id, y) => at.set(id, [x * (W + GX), y * (H + GY)])));
  const width = layers.length * (W + GX), height = Math.max(...layers.map((l) => l.length)) * (H + GY);
  const ns = "http://www.w3.org/2000/svg";
  const s = (tag, attrs, ...kids) => { const n = document.createElementNS(ns, tag); for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v); n.append(...kids); return n; };
  const colour = { completed: "#1f7a3e", failed: "#b3261e", cancelled: "#b3261e", running: "#2457a6" };
  return s("svg", { class: "graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "dependency graph" },
    ...edges.map(([from, to]) => s("line", { x1: at.get(from)[0] + W, y1: at.get(from)[1] + H / 2, x2: at.get(to)[0], y2: at.get(to)[1] + H / 2 })),
    ...involved.map((id) => {
      const run = byId.get(id);
      const state = run.state && run.state !== "claimable" ? run.state : run.run_status;
      const [x, y] = at.get(id);
      const a = s("a", { href: href(run) },
        s("rect", { x, y, width: W, height: H, fill: "transparent", stroke: colour[state] || "#a15c00" }),
        s("text", { x: x + 6, y: y + 14 }, document.createTextNode(visible(run.name.slice(0, 24)))),
        s("text", { x: x + 6, y: y + 28 }, document.createTextNode(state)));
      return a;
    }));
}

views.leases = async () => {
  const prefix = wholeStore() ? undefined : me.prefixes[0];
  const [leases, semaphores] = await Promise.all([
    api("GET", "/v1/leases", { query: { limit: 1000, prefix } }),
    api("GET", "/v1/semaphores", { query: { limit: 1000, prefix } })]);
  return h("section", {}, h("h1", {}, "Leases"),
    leases.leases.length ? table([
      ["resource", (l) => l.resource_id],
      ["holder", (l) => l.holder],
      ["since", (l) => when(l.acquired_at)],
      ["time left", (l) => countdown(l.expires_at)],
      ["", (l) => action("Release", () => act(`Release ${l.resource_id}, held by ${l.holder}? Its holder's fenced writes are refused from then on.`, [], () => releaseLease(l)), "danger")],
    ], leases.leases) : h("p", { class: "muted" }, "No lease is held."),
    h("h2", {}, "Semaphores"),
    semaphores.semaphores.length ? table([
      ["name", (s) => s.name],
      ["permits taken", (s) => `${s.capacity - s.available} / ${s.capacity}`, "num"],
      ["holders", (s) => s.holders.map((x) => h("div", {}, `${x.holder} `, h("span", { class: "muted" }, "for "), countdown(x.expires_at)))],
    ], semaphores.semaphores) : h("p", { class: "muted" }, "No semaphore is in use."));
};

// A release needs the holder's fencing token: the grant in the lease's history carries it.
async function releaseLease(lease) {
  const history = await api("GET", "/v1/history", { query: { kind: "lease", key: lease.resource_id, n: 50 } });
  const grant = [...history.events].reverse().find((e) => e.value?.token !== undefined && e.value?.holder === lease.holder);
  if (!grant) throw new Error("the grant of this lease is no longer in history");
  return api("POST", "/v1/leases:release", { body: { resource_id: lease.resource_id, holder_id: lease.holder, token: grant.value.token } });
}

views.queues = async ({ queue }) => {
  const list = await api("GET", "/v1/queues:list", { query: { limit: 1000, prefix: wholeStore() ? undefined : me.prefixes[0] } });
  const detail = queue ? await api("GET", "/v1/queues", { query: { queue, limit: 50 } }) : null;
  return h("section", {}, h("h1", {}, "Queues"),
    list.queues.length ? table([
      ["queue", (q) => link("queues", { queue: q.queue }, q.queue)],
      ["waiting", (q) => q.visible, "num"],
      ["in flight", (q) => q.in_flight, "num"],
      ["delayed", (q) => q.delayed, "num"],
      ["", (q) => q.queue.endsWith(".dead") && q.visible > 0
        ? action("Requeue all", () => act(`Move ${q.visible > 1000 ? "1,000 of the" : "the"} ${q.visible} dead letters of ${q.queue} back to ${q.queue.slice(0, -5)}, their attempts starting over?`, [],
          () => api("POST", "/v1/queues:redrive", { body: { queue: q.queue.slice(0, -5), limit: 1000, agent_id: "console" } })))
        : null],
    ], list.queues) : h("p", { class: "muted" }, "No queue holds messages."),
    detail ? [h("h2", {}, `Messages of ${queue}`), table([
      ["id", (m) => m.message_id],
      ["attempts", (m) => `${m.attempts}/${m.max_attempts}`, "num"],
      ["sent", (m) => when(m.sent_at)],
      ["body", (m) => h("code", {}, JSON.stringify(m.body))],
    ], detail.messages)] : null);
};

views.paths = async () => {
  const scopes = await api("GET", "/v1/paths/scopes", { query: { limit: 1000, prefix: wholeStore() ? undefined : me.prefixes[0] } });
  return h("section", {}, h("h1", {}, "Path reservations"),
    scopes.scopes.length ? scopes.scopes.map((scope) => [h("h2", {}, scope.scope), table([
      ["holder", (r) => r.holder],
      ["patterns", (r) => r.patterns.map((p) => h("code", {}, p, " "))],
      ["kind", (r) => (r.exclusive ? "exclusive" : "shared")],
      ["time left", (r) => countdown(r.expires_at)],
      ["", (r) => action("Release", () => act(`Release ${r.holder}'s reservation of ${r.patterns.join(", ")} in ${scope.scope}?`, [],
        () => api("POST", "/v1/paths:release", { body: { scope: scope.scope, holder_id: r.holder, reservation_id: r.reservation_id } })), "danger")],
    ], scope.reservations)]) : h("p", { class: "muted" }, "No paths are reserved."));
};

views.memory = async ({ workspace = "", query = "" }) => {
  const timeline = await api("GET", "/v1/checkpoints:timeline", { query: { range: "7d", workspace } }).catch((e) => ({ error: e.message }));
  const recalled = query ? await api("GET", "/v1/knowledge:recall", { query: { query } }).catch((e) => ({ error: e.message })) : null;
  const form = h("form", { class: "bar", onsubmit: (event) => { event.preventDefault(); location.hash = route("memory", { workspace: event.target.workspace.value, query: event.target.query.value }); } },
    h("input", { name: "workspace", value: workspace, placeholder: "workspace", "aria-label": "workspace" }),
    h("input", { name: "query", value: query, placeholder: "recall notes about…", "aria-label": "recall" }), h("button", {}, "Show"));
  return h("section", {}, h("h1", {}, "Checkpoints and notes"), form,
    h("h2", {}, "Checkpoints, last 7 days"),
    timeline.error ? h("p", { class: "error" }, timeline.error) : h("pre", {}, timeline.formatted || JSON.stringify(timeline, null, 2)),
    recalled?.error ? h("p", { class: "error" }, recalled.error) : recalled ? [h("h2", {}, `Notes recalled for “${query}”`), recalled.items.length ? table([
      ["note", (i) => i.id], ["tokens", (i) => i.tokens, "num"], ["content", (i) => i.content],
    ], recalled.items) : h("p", { class: "muted" }, "Nothing recalled.")] : null);
};

views.activity = async () => (await recentLoaded, h("section", {}, h("h1", {}, "Activity"),
  h("p", { class: "muted" }, watching ? "Every change, as it commits." : "Live changes are not available to this token; the views refresh every 2 seconds."),
  feedList(activity)));

function feedList(events) {
  if (!events.length) return h("p", { class: "muted" }, "Nothing yet.");
  return h("ul", { class: "feed" }, events.map((e) => h("li", {},
    h("span", { class: "muted" }, `${timeOfDay.format(new Date(e.time))} r${e.revision} `),
    chip(e.kind), `${e.op} `, e.kind === "kv" ? link("keys", { key: e.key, prefix: e.key.slice(0, e.key.lastIndexOf("/") + 1) }, e.key)
      : e.kind === "workflow" ? link("runs", { run: e.key }, e.key) : e.key,
    e.agent_id ? h("span", { class: "muted" }, ` by ${e.agent_id}`) : null)));
}

// ---- live: one watch of the whole store, resumed after a drop -----------------------------

const activity = [];
let watching = false;
const writeRate = {
  stamps: [],
  note(n) { const now = Date.now(); for (let i = 0; i < n; i++) this.stamps.push(now); this.stamps = this.stamps.filter((t) => now - t < 10000); },
  perSecond() { return watching ? this.stamps.filter((t) => Date.now() - t < 10000).length / 10 : null; },
};

// The revision of the last change this tab has seen: where a watch resumes.
let lastSeen = null;

// One watch per token for all the tabs of a browser: browsers allow six HTTP/1.1 connections
// per host, and a watch holds one, so a seventh tab's requests would wait for ever. The tab
// holding a lock (Web Locks) watches and passes each change to the others (BroadcastChannel);
// when it closes, another takes over from the last change it saw. Where the page is not a
// secure context (http to another host) those APIs are absent and each tab watches.
let channel = null;
// The feed's first changes, which the views that show the feed wait for.
let recentLoaded = Promise.resolve();

async function startLive() {
  // The feed starts with the latest changes, and the watch goes on from them: no gap.
  if (wholeStore()) {
    recentLoaded = api("GET", "/v1/history", { query: { n: 50 } }).then((recent) => {
      activity.unshift(...[...recent.events].reverse());
      lastSeen = String(recent.revision);
    }, () => {
      // History compacted or refused: the feed starts from now.
    });
    await recentLoaded;
  }
  if (!navigator.locks || !window.BroadcastChannel || !crypto.subtle) return watch();
  const token = sessionStorage.getItem(TOKEN_KEY) || "";
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token)));
  const id = [...digest.slice(0, 12)].map((b) => b.toString(16).padStart(2, "0")).join("");
  channel = new BroadcastChannel(`state-console:${id}`);
  channel.onmessage = ({ data }) => {
    // A tab that opens asks who watches; the watching one says how its watch is.
    if (data.hello && watching) channel.postMessage({ live: "on", text: "live (through another tab)" });
    if (data.batch) deliver(data.batch);
    if (data.live) setLive(data.live, data.text, false);
    if (data.poll) startPolling();
  };
  setLive("on", "live (through another tab)", false);
  channel.postMessage({ hello: true });
  return navigator.locks.request(`state-console-watch:${id}`, () => watch());
}

let polling = null;
function startPolling() {
  polling ||= setInterval(refreshSoon, 2000);
}

async function watch() {
  let lastId = lastSeen;
  let failures = 0;
  for (;;) {
    try {
      const headers = { ...authHeaders(), Accept: "text/event-stream" };
      if (lastId !== null) headers["Last-Event-ID"] = lastId;
      // A token that reaches part of the store watches its first prefix (keys there).
      const url = wholeStore() ? "/v1/watch" : `/v1/watch?prefix=${encodeURIComponent(me.prefixes[0])}`;
      const response = await fetch(url, { headers });
      if (response.status === 401 || response.status === 403) {
        watching = false;
        setLive("off", "polling (this token cannot watch the whole store)");
        startPolling();
        channel?.postMessage({ poll: true });
        return;
      }
      if (response.status === 410) {
        // What happened since the last change seen was compacted away: start from now, and
        // redraw from the current state (which holds those changes).
        lastId = null;
        refreshSoon();
        continue;
      }
      if (!response.ok || !response.body) throw new Error(`watch answered ${response.status}`);
      watching = true;
      failures = 0;
      setLive("on", "live");
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      let event = { data: [], id: null, name: "message" };
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let cut;
        while ((cut = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, cut).replace(/\r$/, "");
          buffer = buffer.slice(cut + 1);
          if (line === "") {
            if (event.id !== null) lastId = event.id;
            if (event.name === "problem") {
              const problem = JSON.parse(event.data.join("\n") || "{}");
              // Lagged: resume after where the server says; anything else: from the last seen.
              if (problem.resume_after !== undefined) lastId = String(problem.resume_after);
              refreshSoon();
              throw new Error("the watch ended");
            }
            if (event.name === "message" && event.data.length) {
              const batch = JSON.parse(event.data.join("\n"));
              deliver(batch);
              channel?.postMessage({ batch });
            }
            event = { data: [], id: null, name: "message" };
          } else if (line.startsWith("data:")) event.data.push(line.slice(5).trimStart());
          else if (line.startsWith("id:")) event.id = line.slice(3).trim();
          else if (line.startsWith("event:")) event.name = line.slice(6).trim();
        }
      }
    } catch (error) {
      // Dropped or ended: resumed after the last event received, so nothing is missed.
    }
    watching = false;
    setLive("off", "reconnecting");
    await new Promise((resolve) => setTimeout(resolve, Math.min(5000, 250 * 2 ** failures++)));
  }
}

// The kinds of change each view shows; a change of another kind does not redraw it.
const CONCERNS = {
  keys: ["kv"], runs: ["workflow"], leases: ["lease", "semaphore"], queues: ["queue"],
  paths: ["reservation"], memory: ["checkpoint", "knowledge"],
};
let lastOverview = 0;

function deliver(batch) {
  const events = batch.events || [];
  if (batch.revision !== undefined) lastSeen = String(batch.revision);
  activity.unshift(...[...events].reverse());
  activity.length = Math.min(activity.length, 200);
  writeRate.note(events.length);
  const { view, params } = current();
  const kinds = CONCERNS[view];
  if (view === "keys") {
    const prefix = params.prefix ?? (wholeStore() ? "" : me.prefixes[0]);
    if (!events.some((e) => e.kind === "kv" && (e.key.startsWith(prefix) || e.key === params.key))) return;
  } else if (kinds) {
    if (!events.some((e) => kinds.includes(e.kind))) return;
  } else if (view !== "activity") {
    // The overview counts everything: redrawn at most every 2 s.
    if (Date.now() - lastOverview < 2000) return;
    lastOverview = Date.now();
  }
  refreshSoon();
}

function setLive(state, text, share = true) {
  live.className = `live ${state}`;
  live.textContent = text;
  if (share) channel?.postMessage({ live: state, text: `${text} (through another tab)` });
}

// ---- sign-in ----------------------------------------------------------------------------

function showLogin(reason) {
  const form = h("form", { class: "login", onsubmit: async (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, event.target.token.value.trim());
    await start();
  } },
  h("h1", {}, "Sign in"),
  h("p", {}, reason, " Paste a token from the server's --auth file. It stays in this tab only and is sent as a bearer header."),
  h("input", { name: "token", type: "password", autocomplete: "off", "aria-label": "token", required: true }),
  h("button", {}, "Sign in"));
  sessionStorage.removeItem(TOKEN_KEY);
  main.replaceChildren(form);
}

document.getElementById("signout").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.reload();
});

let started = false;
async function start() {
  try {
    me = await api("GET", "/v1/whoami");
  } catch (error) {
    if (error.status !== 401) main.replaceChildren(h("p", { class: "error" }, `The server does not answer: ${error.message}`));
    return;
  }
  if (me.right === null) {
    showLogin("This server needs a token.");
    return;
  }
  const signout = document.getElementById("signout");
  signout.hidden = !sessionStorage.getItem(TOKEN_KEY);
  signout.textContent = me.name ? `Sign out ${me.name} (${me.right})` : "Sign out";
  if (!started) {
    started = true;
    window.addEventListener("hashchange", render);
    startLive();
    // Runs, leases and queues of a scoped token are not in its watch: those views poll.
    if (!wholeStore()) startPolling();
  }
  render();
}

start();
