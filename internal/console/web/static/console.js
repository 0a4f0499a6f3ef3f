// Trawler console: plain JavaScript, no build step. Every page is a shell that reads
// the HTTP API with the bearer token kept in this browser (localStorage).
"use strict";

const $ = (sel) => document.querySelector(sel);

// el builds an element: el("a", {href: "/x"}, "text", child…). Text is never parsed as
// HTML, so values read from the API cannot inject markup.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function fill(tbody, rows) { tbody.replaceChildren(...rows); }

// svgEl builds an SVG element: svgEl("circle", {cx: 1}, "title text"). Like el, text
// is never parsed as markup.
function svgEl(tag, attrs, text) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function flash(msg, good) {
  const f = $("#flash");
  f.textContent = msg;
  f.className = good ? "good" : "";
  f.hidden = !msg;
}

const token = {
  get: () => localStorage.getItem("trawler-token") || "",
  set: (t) => localStorage.setItem("trawler-token", t),
};

// api calls the HTTP API and returns {status, data}; a 401 shows the token form.
async function api(method, path, body) {
  const headers = {};
  if (token.get()) headers["Authorization"] = "Bearer " + token.get();
  let payload;
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = typeof body === "string" ? body : JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, { method, headers, body: payload });
  } catch (err) {
    return { status: 0, data: { error: "the console server does not answer: " + err.message } };
  }
  let data = {};
  try { data = await res.json(); } catch (err) { data = { error: res.statusText }; }
  if (res.status === 401) {
    $("#login").hidden = false;
    flash(data.error || "this console needs a token");
  }
  return { status: res.status, data };
}

function when(ts) {
  if (!ts) return "";
  const d = new Date(ts);
  return isNaN(d) ? String(ts) : d.toLocaleString();
}

const maxAuditRows = 25; // audit entries the dashboard shows

function num(n) { return (n || 0).toLocaleString(); }

// byRule is "calendar 10, repeat 2": counts by rule, most first.
function byRule(counts) {
  return Object.entries(counts).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([r, n]) => r + " " + n).join(", ");
}

function state(s) { return el("span", { class: "state " + s }, s); }

function runLink(id) { return el("a", { href: "/runs/" + encodeURIComponent(id) }, id); }

// itemLink opens a record's page; its tenant picks whose history the page shows.
function itemLink(biz, key, tenant) {
  const q = tenant ? "?tenant=" + encodeURIComponent(tenant) : "";
  return el("a", { href: "/items/" + encodeURIComponent(biz) + "/" + encodeURIComponent(key) + q }, key);
}

const titleFields = ["title", "name", "headline", "subject", "text", "body", "description"];

function titleOf(doc) {
  const data = doc.data || {};
  for (const f of titleFields) {
    if (data[f]) return String(data[f]).slice(0, 120);
  }
  return doc.url || "";
}

function every(ms, fn) {
  let stop = false;
  const tick = async () => {
    if (stop) return;
    const again = await fn();
    if (again !== false) setTimeout(tick, ms);
  };
  tick();
  return () => { stop = true; };
}

function queued(steps) { return (steps || []).reduce((n, s) => n + (s.queued || 0) + (s.in_flight || 0), 0); }

function progressBar(pages, failed, waiting, done) {
  const total = pages + failed + waiting;
  const frac = done || total === 0 ? 1 : (pages + failed) / total;
  const bar = el("div", { class: "bar" + (done ? " done" : "") }, el("div"));
  bar.firstChild.style.width = Math.round(frac * 100) + "%";
  return bar;
}

// maxHostRows is how many host budgets the dashboard lists, as `trawler status` does.
const maxHostRows = 20;

// formatRate writes requests a second as a chain file does (crawl.FormatRate): 4/s,
// 30/m, 100/h.
function formatRate(r, none) {
  if (!(r > 0)) return none || "unlimited";
  if (r >= 1) return +r.toPrecision(4) + "/s";
  if (r * 60 >= 1) return +(r * 60).toPrecision(4) + "/m";
  return +(r * 3600).toPrecision(4) + "/h";
}

// ago is how long before now (ms) ts was, in seconds, minutes or hours.
function ago(now, ts) {
  const s = Math.max(0, Math.round((now - new Date(ts).getTime()) / 1000));
  return s < 120 ? s + "s" : s < 7200 ? Math.round(s / 60) + "m" : Math.round(s / 3600) + "h";
}

// hostTrouble is a host budget's pause (until when, why) or its last 429/503.
function hostTrouble(h, now) {
  if (h.paused_until) {
    return "PAUSED until " + new Date(h.paused_until).toLocaleTimeString() + ": " + h.reason +
      (h.busy && h.busy !== h.reason ? " · last 429/503 " + ago(now, h.last_busy) + " ago: " + h.busy : "");
  }
  return h.last_busy ? "last 429/503 " + ago(now, h.last_busy) + " ago: " + h.busy : "";
}

const pages = {};

pages.dashboard = () => {
  const form = $("#filters");
  const params = new URLSearchParams(location.search);
  for (const f of ["chain", "tenant", "state"]) form.elements[f].value = params.get(f) || "";
  form.addEventListener("change", () => {
    const q = new URLSearchParams();
    for (const f of ["chain", "tenant", "state"]) if (form.elements[f].value) q.set(f, form.elements[f].value);
    history.replaceState(null, "", "/?" + q);
  });
  form.addEventListener("submit", (e) => e.preventDefault());
  const live = {};
  every(2000, async () => {
    const q = new URLSearchParams({ limit: "50" });
    for (const f of ["chain", "tenant", "state"]) if (form.elements[f].value) q.set(f, form.elements[f].value);
    const { status, data } = await api("GET", "/api/runs?" + q);
    if (status !== 200) { if (status !== 401) flash(data.error); return; }
    const runs = data.runs || [];
    await Promise.all(runs.filter((r) => r.state === "running" || !live[r.run_id]).slice(0, 12).map(async (r) => {
      const d = await api("GET", "/api/runs/" + encodeURIComponent(r.run_id));
      if (d.status === 200) live[r.run_id] = d.data;
    }));
    $("#runs-empty").hidden = runs.length > 0;
    fill($("#runs tbody"), runs.map((r) => {
      const d = live[r.run_id] || {};
      const steps = d.steps || [];
      const sum = (k) => steps.reduce((n, s) => n + (s[k] || 0), 0);
      return el("tr", { "data-run": r.run_id },
        el("td", {}, runLink(r.run_id)), el("td", {}, r.chain), el("td", {}, r.tenant || ""),
        el("td", {}, state(r.paused ? "paused" : r.state)), el("td", {}, when(r.started)),
        el("td", { class: "n" }, num(sum("pages"))), el("td", { class: "n" }, num(sum("items"))),
        el("td", { class: "n" }, num(sum("failed"))),
        el("td", {}, progressBar(sum("pages"), sum("failed"), queued(steps), r.state !== "running")));
    }));
  });
  every(3000, async () => {
    const { status, data } = await api("GET", "/api/fleet");
    if (status !== 200) { $("#fleet-note").textContent = data.error || ""; return status !== 503 && status !== 401; }
    const ws = data.workers || [];
    const stale = ws.filter((w) => w.stale).length;
    $("#fleet-note").textContent = ws.length ? ws.length + " worker(s)" + (stale ? ", " + stale + " stale (no beat for " + data.stale_after_s + " s)" : "") +
      ": a dot per heartbeat seen in the last 5 minutes; workers beat every 5 s." : "No worker has beaten yet.";
    $("#fleet").replaceChildren(...(ws.length ? [fleetPicture(data)] : []));
  });
  every(5000, async () => {
    const { status, data } = await api("GET", "/api/hosts");
    if (status !== 200) { $("#hosts-note").textContent = data.error || ""; return status !== 503 && status !== 401; }
    const now = new Date(data.now).getTime();
    const recent = (data.hosts || []).filter((h) => now - new Date(h.seen_at).getTime() <= 3600e3);
    const shown = recent.slice(0, maxHostRows);
    $("#hosts").hidden = shown.length === 0;
    $("#hosts-note").textContent = recent.length ? recent.length + " host budget(s) used in the last hour, shared by every worker" +
      (recent.length > shown.length ? "; the " + shown.length + " used most recently shown (trawler status --json lists all)" : "") + "." :
      "No host budget used in the last hour.";
    fill($("#hosts tbody"), shown.map((h) => el("tr", { "data-host": h.host },
      el("td", {}, h.host), el("td", { class: "n" }, h.in_flight + "/" + h.concurrency),
      el("td", { class: "n" }, h.interval_ns ? formatRate(1e9 / h.interval_ns) : "-"), el("td", {}, h.source),
      el("td", { class: "n" }, formatRate(h.rate, "0/s")), el("td", { class: h.paused_until ? "error" : "" }, hostTrouble(h, now)))));
  });
  every(10000, async () => {
    // Only an admin's token reads the trail; for any other the panel stays hidden.
    const { status, data } = await api("GET", "/api/audit?last=" + maxAuditRows);
    $("#audit-box").hidden = status !== 200;
    if (status !== 200) return status === 503;
    const entries = (data.entries || []).reverse();
    fill($("#audit tbody"), entries.map((e) => el("tr", {},
      el("td", {}, new Date(e.time).toLocaleString()), el("td", {}, e.name || e.who), el("td", {}, e.role), el("td", {}, e.tenant || ""),
      el("td", {}, e.action + (e.reveal ? " (reveal)" : "")), el("td", {}, e.target || ""), el("td", {}, e.source),
      el("td", { class: e.status >= 400 ? "n error" : "n" }, String(e.status || "")))));
  });
  api("GET", "/api/chains").then(({ status, data }) => {
    if (status !== 200) return;
    fill($("#chains-ran"), (data.ran || []).map((c) => el("li", {},
      el("a", { href: "/?chain=" + encodeURIComponent(c.chain) }, c.chain), " — ", c.runs + " run(s), last ",
      runLink(c.last_run), " ", state(c.last_state))));
  });
};

pages.run = () => {
  const id = $("#run").dataset.run;
  let running = true;
  let graph = null; // the run's chain steps, read once
  const samples = []; // {t, pages, items, backlog: {step: n}, causes: {cause: n}}, one per poll
  $("#cancel").addEventListener("click", async () => {
    if (!confirm("Cancel run " + id + "?")) return;
    const { status, data } = await api("POST", "/api/runs/" + encodeURIComponent(id) + "/cancel");
    flash(status === 202 ? "cancel requested" : data.error, status === 202);
  });
  // Pause lets the running batches finish and starts none until resume.
  for (const action of ["pause", "resume"]) {
    $("#" + action).addEventListener("click", async () => {
      const { status, data } = await api("POST", "/api/runs/" + encodeURIComponent(id) + "/" + action);
      flash(status === 202 ? action + (data.taken ? "d" : " sent; the run takes it when a worker runs it") : data.error, status === 202);
    });
  }
  every(1000, async () => {
    const { status, data } = await api("GET", "/api/runs/" + encodeURIComponent(id));
    if (status !== 200) {
      if (status !== 401) { $("#state").textContent = "unknown"; flash(data.error); }
      return status !== 404;
    }
    running = data.state === "running";
    // A finished run shows how it went: completed, completed_with_violations, partial,
    // failed or canceled.
    $("#state").replaceWith(Object.assign(state(data.paused ? "paused" : data.outcome || data.state), { id: "state" }));
    $("#chain").textContent = data.chain ? "chain " + data.chain : "";
    $("#times").textContent = "started " + when(data.started) + (data.closed ? " · ended " + when(data.closed) : "") +
      " · " + data.elapsed_s + " s";
    const link = $("#temporal-link");
    if (data.temporal_ui) { link.href = data.temporal_ui; link.hidden = false; }
    $("#cancel").hidden = !running;
    $("#pause").hidden = !running || !!data.paused;
    $("#resume").hidden = !running || !data.paused;
    $("#paused").hidden = !data.paused;
    if (data.paused) {
      $("#paused").textContent = "Paused by " + data.paused.by + " since " + when(data.paused.since) +
        ": running batches finish, none starts until it is resumed.";
    }
    $("#rerun-of").hidden = !data.rerun_of;
    if (data.rerun_of) {
      const a = $("#rerun-of a");
      a.textContent = data.rerun_of;
      a.href = "/runs/" + encodeURIComponent(data.rerun_of);
    }
    const steps = data.steps || [];
    const sum = (k) => steps.reduce((n, s) => n + (s[k] || 0), 0);
    $("#progress").replaceWith(Object.assign(progressBar(sum("pages"), sum("failed"), queued(steps), !running), { id: "progress" }));
    $("#rates").textContent = num(sum("pages")) + " pages, " + num(sum("items")) + " items, " + num(sum("unchanged")) +
      " unchanged, " + num(sum("failed")) + " failed · " + data.pages_per_s + " pages/s, " + data.items_per_s + " items/s";
    $("#error").hidden = !data.error;
    $("#error").textContent = data.error || "";
    fill($("#steps tbody"), steps.map((s) => el("tr", {},
      el("td", {}, s.id), el("td", {}, s.task),
      ...["pages", "items", "unchanged", "skipped", "duplicates_skipped", "out_of_scope", "trap_dropped", "retried", "failed"].map((k) =>
        el("td", k === "trap_dropped" && s.trap_rules ? { class: "n", title: byRule(s.trap_rules) } : { class: "n" }, num(s[k]))),
      el("td", { class: "n" }, num((s.queued || 0) + (s.in_flight || 0))), el("td", { class: "n" }, s.pages_per_s))));
    if (!graph) {
      const g = await api("GET", "/api/runs/" + encodeURIComponent(id) + "/chain");
      if (g.status === 200) graph = g.data.steps || [];
      else $("#graph-note").textContent = g.data.error || "";
    }
    const counts = Object.fromEntries(steps.map((s) => [s.id, s]));
    if (graph) {
      $("#run-graph").replaceChildren(chainGraph(graph, counts));
      $("#graph-note").textContent = "Each box is a step with its counts so far; arrows show where its inputs come from.";
    }
    const sample = { t: data.elapsed_s, pages: sum("pages"), items: sum("items"), backlog: {}, causes: {} };
    for (const s of steps) sample.backlog[s.id] = (s.queued || 0) + (s.in_flight || 0);
    for (const c of data.causes || []) sample.causes[c.class || "other"] = (sample.causes[c.class || "other"] || 0) + c.count;
    if (!samples.length && sample.t > 0) samples.push({ t: 0, pages: 0, items: 0, backlog: {}, causes: {} }); // the run's start
    if (samples.length && samples[samples.length - 1].t >= sample.t) samples.pop();
    samples.push(sample);
    const stepIDs = graph ? graph.map((s) => s.id) : steps.map((s) => s.id);
    $("#charts").replaceChildren(...runCharts(samples, stepIDs));
    $("#charts-note").textContent = samples.length + " samples, one per second while this page is open" +
      (samples[0].t === 0 && samples.length === 2 && !running ? " (the run had ended: its start and its end)" : "") + ".";
    const outages = (data.progress && data.progress.outages) || [];
    $("#outages-box").hidden = !outages.length;
    fill($("#outages tbody"), outages.map((o) => el("tr", {},
      el("td", {}, o.dependency), el("td", {}, when(o.since)), el("td", { class: "n" }, num(o.waiting)),
      el("td", {}, (o.steps || []).join(", ")), el("td", { class: "error" }, o.cause))));
    const violations = (data.progress && data.progress.violations) || [];
    $("#violations-box").hidden = !violations.length;
    fill($("#violations tbody"), violations.map((v) => el("tr", {},
      el("td", {}, v.step), el("td", {}, v.rule), el("td", {}, v.field || ""), el("td", { class: "n" }, String(v.want)),
      el("td", { class: "n" }, String(Math.round(v.got * 1000) / 1000)), el("td", { class: "error" }, v.detail))));
    if (data.progress && data.progress.reason) {
      $("#error").hidden = false;
      $("#error").textContent = data.progress.reason;
    }
    // Batches Temporal retries, inputs the run retries (each with its last error and
    // cause) and batches no live worker serves.
    const retrying = ((data.progress && data.progress.retrying) || []).map((f) =>
      `input of ${f.step}, ${f.class || "other"} after ${f.attempts} attempt(s): ${f.cause}`);
    const failing = [...(data.failing || []), ...retrying, ...(data.waiting || [])];
    $("#failing-box").hidden = !failing.length;
    fill($("#failing"), failing.map((f) => el("li", {}, f)));
    const causes = data.causes || [];
    $("#causes").hidden = !causes.length;
    $("#failures-none").hidden = causes.length > 0;
    const total = data.progress ? data.progress.failures_total : 0;
    if (causes.length) $("#failures-none").textContent = "";
    fill($("#causes tbody"), causes.map((c) => el("tr", {},
      el("td", {}, c.step), el("td", { class: "n" }, c.count), el("td", { class: "error" }, (c.class ? "[" + c.class + "] " : "") + c.cause),
      el("td", {}, (c.samples || []).map((u) => el("div", {}, /^https?:/.test(u) ? el("a", { href: u, target: "_blank", rel: "noopener" }, u) : u))))));
    if (total > causes.reduce((n, c) => n + c.count, 0)) {
      $("#failures-none").hidden = false;
      $("#failures-none").textContent = total + " failures in all; the most frequent causes of the sampled ones:";
    }
    return running;
  });
};

function setsOf(text) {
  return text.split(/[\n,]/).map((s) => s.trim()).filter(Boolean);
}

pages.chains = () => {
  const source = $("#source"), sets = $("#sets"), file = $("#file");
  let timer = 0, seq = 0, valid = false;
  const request = () => ({ source: source.value, file: file.value || "chain.yaml", sets: setsOf(sets.value) });
  const check = async () => {
    const mine = ++seq;
    if (!source.value.trim()) {
      valid = false;
      $("#verdict").textContent = "Type or load a chain; it is checked as you type.";
      $("#verdict").className = "muted";
      fill($("#problems"), []);
      $("#graph").replaceChildren();
      $("#graph-note").textContent = "";
      update();
      return;
    }
    const { status, data } = await api("POST", "/api/chains/validate", request());
    if (mine !== seq) return; // a newer check is on its way
    valid = status === 200;
    $("#verdict").className = valid ? "ok" : "error";
    if (valid) {
      $("#graph").replaceChildren(chainGraph(data.steps || []));
      $("#graph").classList.remove("stale");
      $("#graph-note").textContent = "Each box is a step; arrows show where its inputs come from.";
      $("#graph-note").className = "muted";
    } else if ($("#graph").firstChild) {
      $("#graph").classList.add("stale");
      $("#graph-note").textContent = "Stale: the chain has problems; this is the last version that was valid.";
      $("#graph-note").className = "error";
    }
    if (valid) {
      $("#verdict").textContent = "valid: chain " + data.chain + ", steps " +
        data.steps.map((s) => s.id + " (" + s.task + (s.from ? " ← " + s.from.join(", ") : "") + ")").join(" · ");
    } else {
      $("#verdict").textContent = (data.problems || []).length ? data.problems.length + " problem(s):" : data.error;
    }
    fill($("#problems"), (data.problems || []).map((p) => el("li", {
      "data-line": p.line || "",
      onclick: () => selectLine(source, p.line),
    }, p.line ? "line " + p.line + ": " + p.message : p.message)));
    update();
  };
  const update = () => {
    $("#start").disabled = !valid;
    $("#schedule").disabled = !valid || !$("#schedule-id").value.trim() || !$("#cron").value.trim();
  };
  const soon = () => { clearTimeout(timer); valid = false; update(); timer = setTimeout(check, 250); };
  for (const e of [source, sets, file]) e.addEventListener("input", soon);
  for (const e of [$("#schedule-id"), $("#cron")]) e.addEventListener("input", update);
  const load = async (name) => {
    const { status, data } = await api("GET", "/api/chains/registered/" + encodeURIComponent(name));
    if (status !== 200) { flash(data.error); return; }
    source.value = data.source;
    file.value = data.file;
    check();
  };
  $("#registered").addEventListener("change", (e) => { if (e.target.value) load(e.target.value); });
  $("#start").addEventListener("click", async () => {
    $("#start").disabled = true;
    const { status, data } = await api("POST", "/api/runs", request());
    if (status === 201) { location.href = data.page; return; }
    flash(data.error);
    update();
  });
  $("#schedule").addEventListener("click", async () => {
    const body = Object.assign(request(), { id: $("#schedule-id").value.trim(), cron: $("#cron").value.trim() });
    const { status, data } = await api("POST", "/api/schedules", body);
    if (status === 201) { flash("schedule " + data.id + " created: chain " + data.chain + " on " + data.cron, true); return; }
    flash(data.error);
  });
  api("GET", "/api/chains").then(({ status, data }) => {
    if (status !== 200) return;
    const sel = $("#registered");
    for (const name of data.registered || []) sel.append(el("option", { value: name }, name));
    // A suggestion, not a value: a run sends only the overrides typed here.
    if (data.sets) sets.placeholder = "e.g. " + data.sets.join("\n");
    const want = new URLSearchParams(location.search).get("chain");
    if (want) { sel.value = want; load(want); }
  });
};

function selectLine(ta, line) {
  if (!line) return;
  const lines = ta.value.split("\n");
  let start = 0;
  for (let i = 0; i < line - 1 && i < lines.length; i++) start += lines[i].length + 1;
  ta.focus();
  ta.setSelectionRange(start, start + (lines[line - 1] || "").length);
}

pages.schedules = () => {
  let listed = [];
  // load shows the schedules and returns their ids.
  const load = async () => {
    const { status, data } = await api("GET", "/api/schedules");
    if (status !== 200) { if (status !== 401) flash(data.error); return listed; }
    const rows = data.schedules || [];
    const overlap = $("#s-overlap");
    if (!overlap.options.length) for (const p of data.overlap_policies || []) overlap.append(el("option", { value: p }, p));
    $("#schedules-empty").hidden = rows.length > 0;
    listed = rows.map((s) => s.id);
    fill($("#schedules tbody"), rows.map((s) => {
      const act = (verb, method, path, done) => el("button", {
        type: "button", class: "plain", "data-action": verb.toLowerCase().replace(" ", "-"), onclick: async () => {
          const r = await api(method, path);
          flash(r.status === 200 ? done(r.data) : r.data.error, r.status === 200);
          load();
        },
      }, verb);
      const base = "/api/schedules/" + encodeURIComponent(s.id);
      const said = (d) => "schedule " + s.id + " " + d.done;
      const fired = (d) => d.outcome === "started" ? "schedule " + s.id + " started run " + d.run_id
        : d.outcome === "skipped" ? "schedule " + s.id + ": firing skipped, its previous run still goes (overlap " + d.overlap + ")"
          : "schedule " + s.id + " triggered; no run seen starting yet (overlap " + d.overlap + ")";
      // A schedule keeps the chain it was given; the version names that copy.
      const chain = [s.chain, s.file ? el("div", { class: "muted" }, s.file) : "",
        s.version ? el("div", { class: "muted version" }, "version " + s.version) : ""];
      const update = el("button", {
        type: "button", class: "plain", "data-action": "update-chain", title: "run the chain and overrides chosen in the form above from now on",
        onclick: async () => {
          const r = await api("PUT", base + "/chain", { chain: $("#s-chain").value, sets: setsOf($("#s-sets").value) });
          flash(r.status === 200 ? "schedule " + s.id + " now runs " + r.data.file + " version " + r.data.version : r.data.error, r.status === 200);
          load();
        },
      }, "Update chain");
      // The zone the fields are read in; an interval has none.
      const zone = s.time_zone || (s.cron.startsWith("@every") ? "" : "UTC");
      const settings = [s.catchup_window ? "catch-up " + s.catchup_window : "", s.jitter ? "jitter " + s.jitter : "",
        s.pause_on_failure ? "pauses on failure" : ""].filter(Boolean).join(", ");
      return el("tr", { "data-schedule": s.id },
        el("td", {}, s.id), el("td", { class: "cron" }, el("code", { style: "white-space: nowrap" }, s.cron), " ", zone), el("td", { class: "chain" }, ...chain),
        el("td", { class: "paused" }, s.paused ? ["paused", s.note ? el("div", { class: "muted" }, s.note) : ""] : "active"),
        el("td", { class: "next" }, s.paused || !s.next ? "—" : when(s.next)),
        el("td", { class: "last" }, s.last ? [state(s.last.state), " ", when(s.last.at), el("div", {}, runLink(s.last.run_id))] : "never"),
        el("td", { class: "overlap" }, s.overlap, settings ? el("div", { class: "muted" }, settings) : ""),
        el("td", {}, s.paused ? act("Resume", "POST", base + "/unpause", said) : act("Pause", "POST", base + "/pause", said), " ",
          act("Run now", "POST", base + "/trigger", fired), " ", update, " ", act("Delete", "DELETE", base, said)));
    }));
    return listed;
  };
  api("GET", "/api/chains").then(({ status, data }) => {
    if (status !== 200) return;
    for (const name of data.registered || []) $("#s-chain").append(el("option", { value: name }, name));
    if (data.sets) $("#s-sets").placeholder = "overrides, e.g. " + data.sets.join(", ");
  });
  $("#new-schedule").addEventListener("submit", async (e) => {
    e.preventDefault();
    const { status, data } = await api("POST", "/api/schedules", {
      id: $("#s-id").value.trim(), cron: $("#s-cron").value.trim(), time_zone: $("#s-tz").value.trim() || undefined, chain: $("#s-chain").value, sets: setsOf($("#s-sets").value),
      overlap: $("#s-overlap").value || undefined, catchup_window: $("#s-catchup").value.trim() || undefined,
      jitter: $("#s-jitter").value.trim() || undefined, pause_on_failure: $("#s-pause-on-failure").checked || undefined,
    });
    flash(status === 201 ? "schedule " + data.id + " created" : data.error, status === 201);
    // Temporal lists schedules from its visibility store, which learns of a new one a
    // moment later: look again until it is there.
    for (let i = 0; i < 20; i++) {
      if ((await load()).includes(data.id) || status !== 201) break;
      await new Promise((r) => setTimeout(r, 500));
    }
  });
  load();
};

pages.search = () => {
  const q = $("#q");
  const params = new URLSearchParams(location.search);
  q.value = params.get("q") || "";
  $("#dsl-toggle").addEventListener("change", (e) => { $("#dsl").hidden = !e.target.checked; q.disabled = e.target.checked; });
  const run = async () => {
    let res;
    if ($("#dsl-toggle").checked) {
      res = await api("POST", "/api/search", $("#dsl").value);
    } else {
      history.replaceState(null, "", "/search?" + new URLSearchParams({ q: q.value }));
      res = await api("GET", "/api/search?" + new URLSearchParams([["q", q.value], ["size", "25"], ["agg", "biz"], ["agg", "chain"], ["agg", "tenant"]]));
    }
    const { status, data } = res;
    if (status !== 200) {
      fill($("#results tbody"), []);
      $("#total").textContent = "";
      if (status !== 401) flash(data.error);
      return;
    }
    flash("");
    const hits = (data.hits && data.hits.hits) || [];
    const total = data.hits && data.hits.total ? data.hits.total.value : hits.length;
    $("#total").textContent = num(total) + " hit(s), " + hits.length + " shown";
    fill($("#results tbody"), hits.map((h) => {
      const src = h._source || {};
      const biz = src.biz || h._index;
      return el("tr", { "data-key": src.key || h._id },
        el("td", {}, itemLink(biz, src.key || h._id, src.tenant)), el("td", {}, biz),
        el("td", { class: "n" }, h._score === null || h._score === undefined ? "" : h._score.toFixed(3)),
        el("td", {}, titleOf(src)), el("td", {}, when(src.ts)));
    }));
    const facets = [];
    for (const [name, agg] of Object.entries(data.aggregations || {})) {
      if (!agg.buckets) continue;
      facets.push(el("h3", {}, name));
      for (const b of agg.buckets) {
        const key = b.key_as_string || b.key;
        facets.push(el("a", {
          href: "#", onclick: (e) => {
            e.preventDefault();
            const term = name + ':"' + key + '"';
            q.value = q.value.trim() ? "(" + q.value.trim() + ") AND " + term : term;
            run();
          },
        }, el("span", {}, String(key)), el("span", { class: "muted" }, num(b.doc_count))));
      }
    }
    fill($("#facets"), facets);
  };
  $("#search-form").addEventListener("submit", (e) => { e.preventDefault(); run(); });
  if (q.value || params.has("q")) run();
};

pages.items = () => {
  let page = 1;
  const size = 25;
  const biz = $("#biz");
  const load = async () => {
    if (!biz.value) return;
    history.replaceState(null, "", "/items?" + new URLSearchParams({ biz: biz.value, page }));
    const { status, data } = await api("GET", "/api/items?" + new URLSearchParams({ biz: biz.value, page, size }));
    if (status !== 200) { if (status !== 401) flash(data.error); return; }
    const pagesTotal = Math.max(1, Math.ceil(data.total / size));
    $("#pageinfo").textContent = "page " + page + " of " + pagesTotal + " · " + num(data.total) + " records";
    $("#prev").disabled = page <= 1;
    $("#next").disabled = page >= pagesTotal;
    fill($("#items tbody"), (data.items || []).map((it) => el("tr", {},
      el("td", {}, itemLink(it.biz, it.key, it.tenant)), el("td", {}, titleOf(it)), el("td", {}, when(it.ts)),
      el("td", {}, runLink(it.run_id)), el("td", { class: "n" }, it.flag))));
  };
  $("#prev").addEventListener("click", () => { page--; load(); });
  $("#next").addEventListener("click", () => { page++; load(); });
  biz.addEventListener("change", () => { page = 1; load(); });
  api("GET", "/api/items").then(({ status, data }) => {
    if (status !== 200) { if (status !== 401) flash(data.error); return; }
    for (const b of data.bizes || []) biz.append(el("option", { value: b.biz }, b.biz + " (" + num(b.count) + ")"));
    const params = new URLSearchParams(location.search);
    if (params.get("biz")) biz.value = params.get("biz");
    page = Number(params.get("page")) || 1;
    load();
  });
};

function show(v) {
  if (v === null || v === undefined) return "";
  return typeof v === "object" ? JSON.stringify(v) : String(v);
}

pages.record = async () => {
  const { biz, key } = $("#record").dataset;
  const path = encodeURIComponent(biz) + "/" + encodeURIComponent(key);
  // Records are per tenant: the link names whose record this is (none: the default).
  const linked = new URLSearchParams(location.search).get("tenant") || "";
  const { status, data } = await api("GET", "/api/items/" + path + (linked ? "?tenant=" + encodeURIComponent(linked) : ""));
  if (status === 200) {
    const rows = [];
    for (const f of ["key", "biz", "url", "ts", "hash", "flag", "chain", "run_id", "tenant", "id"]) {
      let v = f === "ts" ? when(data.ts) : show(data[f]);
      if (f === "url" && data.url) v = el("a", { href: data.url, target: "_blank", rel: "noopener" }, data.url);
      if (f === "run_id" && data.run_id) v = runLink(data.run_id);
      rows.push(el("tr", {}, el("th", {}, f), el("td", {}, v)));
    }
    for (const [f, v] of Object.entries(data.data || {}).sort()) rows.push(el("tr", {}, el("th", {}, "data." + f), el("td", {}, show(v))));
    fill($("#fields tbody"), rows);
  } else if (status !== 401) {
    $("#record-missing").hidden = false;
    $("#record-missing").textContent = data.error;
  }
  // The page the record came from, when its step archived it (archive:).
  if (status === 200) {
    const q = "?tenant=" + encodeURIComponent(data.tenant || "");
    const a = await api("GET", "/api/archive/" + path + q);
    if (a.status === 200 && a.data.archived) {
      $("#archived-link").replaceChildren(el("a", { href: "/archive/" + path + q }, "archived response"),
        " (" + a.data.type + ", fetched " + when(a.data.fetched_at) + ")");
      $("#archived-link").hidden = false;
    }
  }
  // History is per tenant: the one the link names, else the shown record's, else the
  // default tenant.
  const tenant = linked || (status === 200 && data.tenant) || "";
  const h = await api("GET", "/api/history/" + path + (tenant ? "?tenant=" + encodeURIComponent(tenant) : ""));
  if (h.status !== 200) {
    $("#history-note").textContent = h.data.error || "no history";
    return;
  }
  const versions = (h.data.versions || []).slice().sort((a, b) => new Date(a.ts) - new Date(b.ts)); // oldest first
  $("#history-note").textContent = versions.length + " version(s) in HBase; a filled dot is a field that changed in that version.";
  $("#timeline").replaceChildren(timeline(versions));
  $("#versions").hidden = versions.length === 0;
  fill($("#versions tbody"), versions.map((v, i) => el("tr", {},
    el("td", {}, i + 1), el("td", {}, when(v.ts)), el("td", {}, (v.changed || []).join(", ")))));
};

// The archived response of a record's page: headers and body shown as text, never
// rendered (textContent), so the page's markup and scripts stay inert.
pages.archived = async () => {
  const { biz, key } = $("#archived").dataset;
  const path = encodeURIComponent(biz) + "/" + encodeURIComponent(key);
  const search = location.search;
  $("#archived-record").href = "/items/" + path + search;
  const { status, data } = await api("GET", "/api/archive/" + path + search);
  if (status !== 200 || !data.archived) {
    if (status === 401) return;
    $("#archived-missing").hidden = false;
    $("#archived-missing").textContent = data.error || "not archived: " + data.reason;
    return;
  }
  const rows = [];
  for (const f of ["url", "status", "type", "fetched_at", "run_id", "step", "task", "digest", "file", "offset", "length"]) {
    let v = f === "fetched_at" ? when(data.fetched_at) : show(data[f]);
    if (f === "run_id") v = runLink(data.run_id);
    rows.push(el("tr", {}, el("th", {}, f), el("td", {}, v)));
  }
  fill($("#archived-meta tbody"), rows);
  const lines = [];
  for (const [name, values] of Object.entries(data.header || {}).sort()) for (const v of values) lines.push(name + ": " + v);
  $("#archived-headers").textContent = lines.join("\n");
  const notes = [num(data.body_bytes) + " bytes"];
  if (data.content_encoding) notes.push("decoded from " + data.content_encoding);
  if (data.truncated) notes.push("truncated: only the first 2 MiB shown");
  $("#archived-note").textContent = notes.join(" · ");
  $("#archived-body").textContent = data.body;
};

// timeline draws a record's versions as an SVG: one row per field, one dot per version
// at its fetch time, filled where the field's value changed.
function timeline(versions) {
  const svg = svgEl;
  const fields = [];
  for (const v of versions) for (const f of Object.keys(v.fields || {})) if (!fields.includes(f)) fields.push(f);
  const left = 150, right = 120, top = 30, rowH = 26;
  const width = 900, height = top + fields.length * rowH + 40;
  const root = svg("svg", { width, height, viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": "field history" });
  const times = versions.map((v) => new Date(v.ts).getTime());
  const t0 = Math.min(...times), t1 = Math.max(...times);
  const x = (t) => t1 === t0 ? left + (width - left - right) / 2 : left + (t - t0) / (t1 - t0) * (width - left - right);
  versions.forEach((v, i) => {
    const vx = x(times[i]);
    root.append(svg("line", { class: "axis", x1: vx, y1: top - 8, x2: vx, y2: height - 30 }));
    root.append(svg("text", { x: vx, y: height - 12, "text-anchor": "middle" }, new Date(v.ts).toLocaleString()));
    root.append(svg("text", { x: vx, y: top - 14, "text-anchor": "middle" }, "v" + (i + 1)));
  });
  fields.forEach((f, r) => {
    const y = top + r * rowH + rowH / 2;
    root.append(svg("text", { class: "label", x: 8, y: y + 4 }, f));
    root.append(svg("line", { class: "track", x1: left, y1: y, x2: width - right, y2: y }));
    versions.forEach((v, i) => {
      if (!(f in (v.fields || {}))) return;
      const changed = (v.changed || []).includes(f);
      const dot = svg("circle", { class: changed ? "changed" : "same", cx: x(times[i]), cy: y, r: changed ? 7 : 5, "data-field": f, "data-version": i + 1 });
      dot.append(svg("title", {}, f + " @ " + new Date(v.ts).toLocaleString() + ": " + show(v.fields[f])));
      root.append(dot);
    });
  });
  return root;
}

pages.pools = () => {
  api("GET", "/api/pools").then(({ status, data }) => {
    if (status !== 200) { $("#pools-note").textContent = data.error; return; }
    const pools = data.pools || [];
    $("#pools").hidden = pools.length === 0;
    $("#pools-note").textContent = pools.length ? "" : "No pools yet.";
    fill($("#pools tbody"), pools.map((p) => el("tr", { "data-pool": p.tenant + "/" + p.site + "/" + p.kind },
      el("td", {}, p.kind), el("td", {}, p.tenant), el("td", {}, p.site),
      ...["size", "free", "in_use", "banned"].map((k) => el("td", { class: "n" }, num(p[k]))),
      el("td", {}, Object.entries(p.counts || {}).sort().map(([k, v]) => k + " " + v).join(", ")))));
  });
  api("GET", "/api/dedup").then(({ status, data }) => {
    if (status !== 200) { $("#dedup-note").textContent = data.error; return; }
    const ns = data.namespaces || [];
    $("#dedup").hidden = ns.length === 0;
    $("#dedup-note").textContent = ns.length ? "Items remembered per namespace (tenant:site.task)." : "No dedup namespaces yet.";
    fill($("#dedup tbody"), ns.map((n) => el("tr", {},
      el("td", {}, n.namespace), el("td", { class: "n" }, num(n.items)), el("td", { class: "n" }, num(n.buckets)),
      el("td", { class: "n" }, n.per_bucket.toFixed(1)), el("td", { class: "n" }, n.bytes_per_entry.toFixed(2)),
      el("td", { class: "n" }, n.false_dup_rate.toExponential(2)))));
  });
  api("GET", "/api/recrawl").then(({ status, data }) => {
    if (status !== 200) { $("#recrawl-note").textContent = data.error; return; }
    const steps = data.steps || [];
    $("#recrawl").hidden = steps.length === 0;
    $("#recrawl-note").textContent = steps.length ? "Pages of steps with a recrawl policy: when each is due, how far apart visits are planned, and the estimated share of changes seen later than the policy's min." : "No recrawl steps yet.";
    fill($("#recrawl tbody"), steps.map((st) => el("tr", { "data-ns": st.namespace },
      el("td", {}, st.namespace), el("td", { class: "n" }, num(st.pages)), el("td", { class: "n" }, num(st.due)), el("td", { class: "n" }, num(st.leased)),
      el("td", {}, st.intervals.map((iv, i) => (iv.upto ? "≤" + iv.upto : ">" + st.intervals[i - 1].upto) + " " + iv.pages).join(", ")),
      el("td", { class: "n" }, (100 * st.late).toFixed(1) + "%"), el("td", { class: "n" }, st.visits_per_hour.toFixed(1)))));
  });
  fetch("/healthz").then((r) => r.json()).then((h) => {
    fill($("#health tbody"), Object.entries(h.stores || {}).sort().map(([name, c]) => el("tr", {},
      el("td", {}, name), el("td", {}, el("span", { class: "state " + (c.ok ? "completed" : "failed") }, c.ok ? "up" : "down")), el("td", { class: "n" }, c.ms), el("td", { class: "error" }, c.error || ""))));
  });
};

document.addEventListener("DOMContentLoaded", () => {
  const name = document.body.dataset.page;
  for (const a of document.querySelectorAll("header nav a")) {
    if ((a.dataset.nav || "").split(" ").includes(name)) a.classList.add("active");
  }
  $("#login").addEventListener("submit", (e) => {
    e.preventDefault();
    token.set($("#token").value.trim());
    location.reload();
  });
  if (token.get()) $("#who").textContent = "token set";
  if (pages[name]) pages[name]();
});

// ---- Pictures: the chain as a graph, a run's charts over time, the fleet's heartbeats.

// chainGraph draws a chain's steps as boxes in layers, left to right: a step sits one
// layer right of the furthest step it takes inputs from (longest path). An arrow runs
// from every step in `from` (labelled "each: field" for a step that takes one input per
// element of a list field); a step that consumes itself has a loop with its max_depth.
// counts, when given, maps a step id to its live stats, written in its box.
function chainGraph(steps, counts) {
  const W = 210, gapX = 120, gapY = 56, top = 46, left = 16;
  const H = counts ? 104 : 62;
  const byID = {};
  steps.forEach((s, i) => { byID[s.id] = { step: s, index: i, layer: 0 }; });
  for (let round = 0; round < steps.length; round++) { // longest path; cycles stop at the cap
    let moved = false;
    for (const s of steps) {
      for (const f of s.from || []) {
        if (f === s.id || !byID[f]) continue;
        const want = Math.min(byID[f].layer + 1, steps.length - 1);
        if (want > byID[s.id].layer) { byID[s.id].layer = want; moved = true; }
      }
    }
    if (!moved) break;
  }
  const layers = [];
  for (const s of steps) (layers[byID[s.id].layer] ||= []).push(s.id);
  layers.forEach((ids, l) => ids.forEach((id, r) => {
    byID[id].x = left + l * (W + gapX);
    byID[id].y = top + r * (H + gapY);
  }));
  const rows = Math.max(1, ...layers.map((ids) => (ids || []).length));
  const width = left * 2 + layers.length * W + Math.max(0, layers.length - 1) * gapX;
  const back = steps.some((s) => (s.from || []).some((f) => f !== s.id && byID[f] && byID[f].layer >= byID[s.id].layer));
  const height = top + rows * (H + gapY) - gapY + (back ? 60 : 16); // room under the boxes for arrows that go back
  const svg = svgEl;
  const root = svg("svg", { class: "chain-graph", width, height, viewBox: "0 0 " + width + " " + height, role: "img",
    "aria-label": "chain graph: " + steps.map((s) => s.id + (s.from ? " from " + s.from.join(", ") : "")).join("; ") });
  const defs = svg("defs");
  const marker = svg("marker", { id: "graph-arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }));
  defs.append(marker);
  root.append(defs);
  const edges = svg("g", { class: "edges" });
  root.append(edges);
  for (const s of steps) {
    const to = byID[s.id];
    for (const f of s.from || []) {
      const from = byID[f];
      if (!from) continue;
      const attrs = { "data-from": f, "data-to": s.id, "marker-end": "url(#graph-arrow)" };
      let d, lx, ly;
      if (f === s.id) {
        const a = to.x + W * 0.68, b = to.x + W * 0.32;
        d = `M${a},${to.y} C${a},${to.y - 42} ${b},${to.y - 42} ${b},${to.y}`;
        lx = to.x + W / 2; ly = to.y - 36;
        edges.append(svg("path", Object.assign(attrs, { class: "edge self", d })));
        edges.append(svg("text", { class: "edge-label", x: lx, y: ly, "text-anchor": "middle", "data-loop": s.id },
          "↻ itself" + (s.max_depth ? ", max_depth " + s.max_depth : "") + (s.each ? ", each: " + s.each : "")));
        continue;
      }
      const x1 = from.x + W, y1 = from.y + H / 2, x2 = to.x, y2 = to.y + H / 2;
      if (to.layer > from.layer) {
        const mx = (x1 + x2) / 2;
        d = `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2 - 2},${y2}`;
        lx = mx; ly = (y1 + y2) / 2 - 6;
      } else { // back or sideways: under the boxes
        const bx1 = from.x + W / 2, bx2 = to.x + W / 2, by = Math.max(from.y, to.y) + H;
        d = `M${bx1},${from.y + H} C${bx1},${by + 40} ${bx2},${by + 40} ${bx2},${to.y + H + 2}`;
        lx = (bx1 + bx2) / 2; ly = by + 34;
      }
      edges.append(svg("path", Object.assign(attrs, { class: "edge", d })));
      if (s.each) edges.append(svg("text", { class: "edge-label", x: lx, y: ly, "text-anchor": "middle" }, "each: " + s.each));
    }
  }
  for (const s of steps) {
    const { x, y } = byID[s.id];
    const c = counts && counts[s.id];
    const busy = c && (c.queued || 0) + (c.in_flight || 0) > 0;
    const g = svg("g", { class: "step" + (busy ? " busy" : "") + (c && c.failed ? " failing" : ""), "data-step": s.id, transform: `translate(${x},${y})` });
    g.append(svg("rect", { width: W, height: H, rx: 6 }));
    g.append(svg("text", { class: "step-id", x: 10, y: 20 }, s.id));
    g.append(svg("text", { class: "step-task", x: 10, y: 37 }, s.task));
    g.append(svg("text", { class: "step-store", x: 10, y: 53 }, "stores: " + ((s.store || []).join(", ") || "none")));
    if (counts) {
      const k = c || {};
      const line = (y, key, label) => svg("text", { class: "count", x: 10, y, "data-k": key }, label);
      g.append(line(73, "pages", "pages " + num(k.pages) + " · items " + num(k.items)));
      g.append(line(89, "backlog", (busy ? "◔ " : "") + "queued " + num(k.queued) + " · in flight " + num(k.in_flight)));
      if (k.failed) g.append(svg("text", { class: "count failed", x: W - 10, y: 20, "text-anchor": "end", "data-k": "failed" }, "✕ " + num(k.failed) + " failed"));
      for (const key of ["pages", "items", "queued", "in_flight", "failed"]) g.setAttribute("data-" + key.replace("_", "-"), k[key] || 0);
    }
    g.append(svg("title", {}, s.id + ": " + s.task + (s.from ? ", from " + s.from.join(", ") : ", a root step")));
    root.append(g);
  }
  return root;
}

// A series' look: color, dash and marker, so that lines read without color too.
const seriesLook = [
  { color: "#2456c7", dash: "", marker: "circle" },
  { color: "#b3261e", dash: "7 4", marker: "square" },
  { color: "#1d7f45", dash: "2 3", marker: "triangle" },
  { color: "#a15c00", dash: "9 3 2 3", marker: "diamond" },
  { color: "#6b3fa0", dash: "4 2", marker: "cross" },
  { color: "#00838f", dash: "12 4", marker: "circle" },
];

function markerAt(shape, x, y, look) {
  const a = { class: "marker", stroke: look.color, fill: look.color };
  switch (shape) {
    case "square": return svgEl("rect", Object.assign(a, { x: x - 3.5, y: y - 3.5, width: 7, height: 7 }));
    case "triangle": return svgEl("path", Object.assign(a, { d: `M${x},${y - 4.5} L${x + 4.5},${y + 3.5} L${x - 4.5},${y + 3.5} z` }));
    case "diamond": return svgEl("path", Object.assign(a, { d: `M${x},${y - 5} L${x + 5},${y} L${x},${y + 5} L${x - 5},${y} z` }));
    case "cross": return svgEl("path", Object.assign(a, { d: `M${x - 4},${y - 4} L${x + 4},${y + 4} M${x - 4},${y + 4} L${x + 4},${y - 4}`, "stroke-width": 2 }));
    default: return svgEl("circle", Object.assign(a, { cx: x, cy: y, r: 3.5 }));
  }
}

// niceCeil is the smallest of 1, 2, 2.5, 5 × 10^n at or above v/4, times 4: an axis
// top whose quarters are round numbers.
function niceCeil(v) {
  const q = v / 4, p = Math.pow(10, Math.floor(Math.log10(q)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= q) return m * p * 4;
  return v;
}

function shortNum(v) {
  if (v >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (v >= 1e4) return Math.round(v / 1e3) + "k";
  if (v >= 1e3) return (v / 1e3).toFixed(1) + "k";
  return Number.isInteger(v) ? String(v) : String(Number(v.toFixed(v < 10 ? 2 : 1)));
}

// chart draws series of [t seconds, value] points over a shared time axis as lines, or
// stacked areas (each series on top of the ones before it), with labelled axes and a
// legend giving each series' dash and marker.
function chart({ id, title, ylabel, times, series, stacked, empty }) {
  const width = 400, height = 210, ml = 50, mr = 12, mt = 12, mb = 40;
  const box = el("figure", { class: "chart", id, "data-series": series.length });
  box.append(el("figcaption", {}, title));
  const root = svgEl("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title });
  const ts = times;
  const tops = series.map(() => []);
  ts.forEach((_, i) => {
    let acc = 0;
    series.forEach((s, k) => { acc = (stacked ? acc : 0) + (s.points[i] ? s.points[i][1] : 0); tops[k][i] = acc; });
  });
  const tmax = Math.max(1, ...ts);
  const vmax = niceCeil(Math.max(1, ...tops.flat()));
  const x = (t) => ml + t / tmax * (width - ml - mr);
  const y = (v) => height - mb - v / vmax * (height - mt - mb);
  root.setAttribute("data-samples", ts.length);
  for (let i = 0; i <= 4; i++) {
    const v = vmax * i / 4, t = tmax * i / 4;
    root.append(svgEl("line", { class: "grid", x1: ml, x2: width - mr, y1: y(v), y2: y(v) }));
    root.append(svgEl("text", { class: "tick", x: ml - 5, y: y(v) + 4, "text-anchor": "end" }, shortNum(v)));
    root.append(svgEl("text", { class: "tick", x: x(t), y: height - mb + 15, "text-anchor": "middle" }, (tmax < 8 ? t.toFixed(1) : shortNum(Math.round(t))) + "s"));
  }
  root.append(svgEl("line", { class: "axis", x1: ml, x2: ml, y1: mt, y2: height - mb }));
  root.append(svgEl("line", { class: "axis", x1: ml, x2: width - mr, y1: height - mb, y2: height - mb }));
  root.append(svgEl("text", { class: "axis-label", x: (ml + width - mr) / 2, y: height - 5, "text-anchor": "middle" }, "seconds since the run started"));
  root.append(svgEl("text", { class: "axis-label", x: 12, y: (mt + height - mb) / 2, "text-anchor": "middle",
    transform: `rotate(-90 12 ${(mt + height - mb) / 2})` }, ylabel));
  const legend = el("ul", { class: "legend" });
  series.forEach((s, k) => {
    const look = seriesLook[k % seriesLook.length];
    const line = ts.map((t, i) => `${x(t)},${y(tops[k][i])}`);
    if (stacked) {
      const below = ts.map((t, i) => `${x(t)},${y(k ? tops[k - 1][i] : 0)}`).reverse();
      root.append(svgEl("polygon", { class: "area", points: line.concat(below).join(" "), fill: look.color }));
    }
    root.append(svgEl("polyline", { class: "line", points: line.join(" "), stroke: look.color, "stroke-dasharray": look.dash || null, "data-series": s.name }));
    const every = Math.max(1, Math.ceil(ts.length / 40));
    ts.forEach((t, i) => { if (i % every === 0 || i === ts.length - 1) root.append(markerAt(look.marker, x(t), y(tops[k][i]), look)); });
    const sw = svgEl("svg", { width: 34, height: 12, "aria-hidden": "true" });
    sw.append(svgEl("line", { x1: 1, x2: 33, y1: 6, y2: 6, stroke: look.color, "stroke-width": 2, "stroke-dasharray": look.dash || null }));
    sw.append(markerAt(look.marker, 17, 6, look));
    legend.append(el("li", { "data-series": s.name }, sw, " " + s.name));
  });
  if (!series.length) root.append(svgEl("text", { class: "tick", x: (ml + width - mr) / 2, y: (mt + height - mb) / 2, "text-anchor": "middle" }, empty || "nothing yet"));
  box.append(root, legend);
  return box;
}

// runCharts draws a run's samples: pages/s and items/s, the backlog of each step
// (queued + in flight, stacked) and failures by cause (stacked).
function runCharts(samples, stepIDs) {
  const times = samples.map((s) => s.t);
  // The rate at a sample is over the interval that ends there; the first sample takes
  // the rate of the interval after it.
  const rate = (k) => samples.map((s, i) => {
    const a = samples[Math.max(0, i - 1)], b = samples[Math.max(i, Math.min(1, samples.length - 1))], dt = b.t - a.t;
    return [s.t, dt > 0 ? Math.max(0, b[k] - a[k]) / dt : 0];
  });
  const causes = [];
  for (const s of samples) for (const c of Object.keys(s.causes)) if (!causes.includes(c)) causes.push(c);
  return [
    chart({ id: "chart-rates", title: "Pages/s and items/s", times, ylabel: "per second",
      series: [{ name: "pages/s", points: rate("pages") }, { name: "items/s", points: rate("items") }] }),
    chart({ id: "chart-backlog", title: "Backlog per step (queued + in flight)", times, ylabel: "inputs", stacked: true,
      series: stepIDs.map((id) => ({ name: id, points: samples.map((s) => [s.t, s.backlog[id] || 0]) })) }),
    chart({ id: "chart-failures", title: "Failures by cause", times, ylabel: "failed inputs", stacked: true, empty: "no failures",
      series: causes.map((c) => ({ name: c, points: samples.map((s) => [s.t, s.causes[c] || 0]) })) }),
  ];
}

// fleetPicture draws one row per worker: a dot per heartbeat the console saw in the
// last minutes, and the age of the last one; a stale worker's row says "stale" and its
// last beat is a hollow ring with a cross.
function fleetPicture(data) {
  const workers = data.workers || [];
  const span = 300, now = new Date(data.now).getTime();
  const width = 920, rowH = 26, left = 300, right = 150, top = 22;
  const height = top + workers.length * rowH + 24;
  const x = (t) => left + (1 - (now - t) / 1000 / span) * (width - left - right);
  const root = svgEl("svg", { class: "fleet", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "worker heartbeats" });
  for (let m = 0; m <= span / 60; m++) {
    const tx = x(now - m * 60000);
    root.append(svgEl("line", { class: "grid", x1: tx, x2: tx, y1: top - 6, y2: height - 22 }));
    root.append(svgEl("text", { class: "tick", x: tx, y: height - 8, "text-anchor": "middle" }, m ? "−" + m + " min" : "now"));
  }
  workers.forEach((w, r) => {
    const y = top + r * rowH + rowH / 2;
    const g = svgEl("g", { class: "worker" + (w.stale ? " stale" : ""), "data-worker": w.identity, "data-queue": w.task_queue, "data-stale": w.stale });
    g.append(svgEl("text", { class: "label", x: 8, y: y + 4 }, w.identity + " · " + w.task_queue));
    g.append(svgEl("line", { class: "track", x1: left, x2: width - right, y1: y, y2: y }));
    const beats = (w.beats || []).map((b) => new Date(b).getTime()).filter((t) => now - t <= span * 1000);
    beats.forEach((t, i) => {
      const last = i === beats.length - 1;
      const dot = svgEl("circle", { class: "beat" + (last && w.stale ? " last-stale" : ""), cx: x(t), cy: y, r: last ? 5 : 3.5 });
      dot.append(svgEl("title", {}, w.identity + " beat at " + new Date(t).toLocaleTimeString()));
      g.append(dot);
      if (last && w.stale) g.append(svgEl("path", { class: "stale-cross", d: `M${x(t) - 3},${y - 3} L${x(t) + 3},${y + 3} M${x(t) - 3},${y + 3} L${x(t) + 3},${y - 3}` }));
    });
    g.append(svgEl("text", { class: "age", x: width - right + 10, y: y + 4 },
      (w.stale ? "✕ stale, " : "● ") + "last beat " + shortNum(w.age_s) + " s ago"));
    root.append(g);
  });
  return root;
}
