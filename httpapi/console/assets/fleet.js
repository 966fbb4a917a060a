// substate console: the group panel and fleet actions. A group filters the
// table; "select all N matching" previews an action on every tenant the
// filter matches (a dry run of POST /v1/actions), asks for a reason,
// creates the job for exactly the previewed set, follows its progress and
// shows its report. Untrusted text is written only as text.
"use strict";
(function () {
  const C = window.substateConsole;
  const { el, api, may, badge, notice, timeCell } = C;
  const GROUPS = [["fingerprint", "Error fingerprints"], ["step", "Steps"], ["provider", "Providers"], ["workflowType", "Workflow types"]];
  const CLICKABLE = { fingerprint: true, step: true, provider: true, workflowType: true };
  const ACTIONS = ["retry", "stop", "restart"];
  const CREATE = "POST /v1/actions";
  let run = 0; // the overview being shown; an older one's answers are dropped

  // actionFilter is the table's filter as a job's: every condition but
  // the order.
  function actionFilter(f) {
    const out = {};
    for (const k of C.FILTERS) if (k !== "sort" && f[k]) out[k] = f[k];
    return out;
  }
  function groupQuery(f, by) {
    const q = new URLSearchParams(actionFilter(f));
    q.set("by", by);
    q.set("limit", "8");
    return q;
  }

  async function overview(f) {
    const mine = ++run;
    renderActiveFilter(f);
    const box = document.getElementById("groups");
    // Each grouping on its own: one the view refuses (a filter that
    // would read too many tenants) says why in its column.
    const pages = await Promise.allSettled(GROUPS.map(([by]) => api("/v1/groups?" + groupQuery(f, by))));
    if (mine !== run || !document.getElementById("groups")) return;
    box.replaceChildren(el("div", { class: "group-cols" }, pages.map((p, i) => p.status === "fulfilled" ? groupColumn(f, GROUPS[i], p.value) :
      el("div", { class: "group-col", id: "groups-" + GROUPS[i][0] }, el("h3", {}, GROUPS[i][1]), notice(p.reason.message)))));
    box.dataset.loaded = String(Date.now());
    const counted = pages.find((p) => p.status === "fulfilled");
    if (!counted) { C.setTotal(null); return; }
    selectAll(f, counted.value.total);
    C.setTotal(counted.value.total);
  }

  function groupColumn(f, [by, title], page) {
    const rows = page.groups.map((g) => {
      const q = C.filterQuery(Object.assign({}, f, { [by]: g.value }));
      const label = CLICKABLE[by] ? el("a", { href: "#/?" + q, class: "group-link", title: g.value }, g.value) : el("span", { title: g.value }, g.value);
      return el("li", { dataset: { by, value: g.value } }, el("span", { class: "n" }, String(g.count)), label);
    });
    if (page.groupCount > page.groups.length) rows.push(el("li", { class: "muted" }, (page.groupCount - page.groups.length) + " more groups"));
    if (!rows.length) rows.push(el("li", { class: "muted" }, "none"));
    return el("div", { class: "group-col", id: "groups-" + by }, el("h3", {}, title), el("ol", { class: "groups" }, rows));
  }

  // renderActiveFilter shows the filters the form has no field for (a
  // group's fingerprint, step or workflow type…), each with a button that
  // removes it.
  function renderActiveFilter(f) {
    const box = document.getElementById("active-filter");
    if (!box) return;
    const extra = ["fingerprint", "step", "workflowType", "verb", "inStateLongerThan"].filter((k) => f[k]);
    box.replaceChildren(...extra.map((k) => el("span", { class: "filter-chip", dataset: { k } }, k + ": " + f[k],
      el("a", { href: "#/?" + C.filterQuery(Object.assign({}, f, { [k]: "" })), class: "remove", title: "remove this filter" }, "✕"))));
  }

  function selectAll(f, total) {
    const box = document.getElementById("select-all");
    if (!box) return;
    const items = [el("span", { id: "match-total", dataset: { total: String(total) } }, total + " tenants match")];
    if (may(CREATE) && total > 0) {
      for (const a of ACTIONS) {
        items.push(el("button", { type: "button", class: "fleet-" + a, on: { click: () => preview(f, a, total) } }, a[0].toUpperCase() + a.slice(1) + " all " + total + " matching"));
      }
    }
    box.replaceChildren(el("div", { class: "select-all" }, items));
  }

  // ---- the dry run, the confirmation ----
  async function preview(f, action, shown) {
    const box = document.getElementById("fleet");
    const filter = actionFilter(f);
    box.replaceChildren(el("section", { class: "fleet card-inner" }, el("p", {}, "Previewing " + action + " of " + shown + " tenants…")));
    let pv;
    try {
      pv = await api("/v1/actions", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ action, filter, dryRun: true }) });
    } catch (e) {
      box.replaceChildren(notice("Dry run failed: " + e.message));
      return;
    }
    const reason = el("input", { type: "text", id: "fleet-reason", maxlength: "500", placeholder: "why (recorded in the audit trail)", required: true });
    const confirm = el("button", { type: "submit", id: "fleet-confirm", disabled: pv.wouldAct === 0 }, action[0].toUpperCase() + action.slice(1) + " " + pv.total + " tenants");
    const form = el("form", { class: "confirm", on: { submit: (e) => { e.preventDefault(); start(pv, action, filter, reason.value.trim()); } } },
      el("label", {}, "Reason ", reason), confirm, el("button", { type: "button", id: "fleet-close", on: { click: () => box.replaceChildren() } }, "Cancel"));
    box.replaceChildren(el("section", { class: "fleet", id: "fleet-preview", dataset: { total: String(pv.total), wouldAct: String(pv.wouldAct) } },
      el("h3", {}, "Dry run: " + action + " " + pv.total + " tenants"),
      el("p", {}, pv.wouldAct + " would be asked, " + (pv.total - pv.wouldAct) + " refused; about " + duration(pv.estimatedSeconds) + " under the providers' limits. Nothing has been changed."),
      lanesTable(pv.lanes), reasonsTable(pv.reasons), (pv.notes || []).map((n) => el("p", { class: "muted" }, n)), form));
  }

  function lanesTable(lanes) {
    return el("div", { class: "scroll" }, el("table", { id: "fleet-lanes" },
      el("thead", {}, el("tr", {}, ["Provider", "Tenants", "Would act", "Would refuse", "API calls", "Time"].map((h) => el("th", {}, h)))),
      el("tbody", {}, lanes.map((l) => el("tr", { dataset: { lane: l.lane } }, el("td", {}, l.lane), el("td", { class: "num" }, String(l.members)),
        el("td", { class: "num act" }, String(l.wouldAct)), el("td", { class: "num refuse" }, String(l.wouldRefuse)),
        el("td", {}, (l.calls || []).map((c) => c.api + " " + c.calls).join(", ")), el("td", {}, duration(l.estimatedSeconds)))))));
  }
  function reasonsTable(reasons) {
    if (!reasons || !reasons.length) return null;
    return el("div", { class: "scroll" }, el("table", { id: "fleet-reasons" },
      el("thead", {}, el("tr", {}, ["Would be", "Provider", "Why", "Tenants", "For example"].map((h) => el("th", {}, h)))),
      el("tbody", {}, reasons.map((r) => el("tr", {}, el("td", {}, r.outcome), el("td", {}, r.lane), el("td", { class: "err" }, r.reason),
        el("td", { class: "num" }, String(r.count)), el("td", { class: "id" }, r.sampleTenantId ? el("a", { href: "#/tenant/" + encodeURIComponent(r.sampleTenantId) }, r.sampleTenantId) : ""))))));
  }
  function duration(s) {
    s = Math.ceil(s || 0);
    return s < 60 ? s + " s" : s < 3600 ? Math.ceil(s / 60) + " min" : (s / 3600).toFixed(1) + " h";
  }

  // ---- the job: created for exactly the previewed set, followed live ----
  async function start(pv, action, filter, reason) {
    const box = document.getElementById("fleet");
    if (!reason) { box.append(notice("Say why: the reason is recorded with every action.")); return; }
    let job;
    try {
      job = await api("/v1/actions", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ action, filter, reason, expectedCount: pv.total }) });
    } catch (e) {
      box.replaceChildren(notice("Not started: " + e.message + " (the view moved on since the preview? Preview again.)"));
      return;
    }
    location.hash = "#/actions/" + encodeURIComponent(job.id);
  }

  // showJob is the page of one job: its progress, live, then its report.
  async function showJob(id) {
    C.state.view = "job";
    C.state.tenant = null;
    const main = document.getElementById("main");
    const progress = el("div", { id: "job-progress" });
    const controls = el("div", { class: "controls", id: "job-controls" });
    const report = el("div", { id: "job-report" });
    main.replaceChildren(el("p", {}, el("a", { href: "#/" }, "← all tenants")),
      el("section", { class: "card" }, el("h2", {}, "Job ", el("span", { id: "job-id" }, id)), progress, controls), report);
    const mine = ++run;
    try {
      const job = await api("/v1/actions/" + encodeURIComponent(id));
      renderJob(job);
      if (!job.state || !["done", "cancelled"].includes(job.state)) await follow(id, mine);
      if (mine === run) await loadReport(id);
    } catch (e) {
      if (mine === run) progress.replaceChildren(notice(e.message));
    }
  }

  // follow reads the job's Server-Sent Events with fetch (which sends the
  // key; an EventSource cannot) until its end.
  async function follow(id, mine) {
    const headers = { Accept: "text/event-stream" };
    const k = sessionStorage.getItem("substate-key");
    if (k) headers.Authorization = "Bearer " + k;
    const res = await fetch("/v1/actions/" + encodeURIComponent(id) + "/events", { headers });
    if (!res.ok) throw new Error(res.status + " " + res.statusText);
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done || mine !== run) { reader.cancel().catch(() => {}); return; }
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const ev = parseEvent(block);
        if (ev.event === "progress" || ev.event === "end") renderJob(JSON.parse(ev.data));
        if (ev.event === "error") throw new Error((JSON.parse(ev.data).error || {}).message || "the worker stopped the progress stream");
        if (ev.event === "end") { reader.cancel().catch(() => {}); return; }
      }
    }
  }
  function parseEvent(block) {
    const ev = { event: "message", data: "" };
    for (const line of block.split("\n")) {
      if (line.startsWith("event: ")) ev.event = line.slice(7);
      else if (line.startsWith("data: ")) ev.data += line.slice(6);
    }
    return ev;
  }

  function renderJob(j) {
    const p = j.progress || {};
    const outcomes = (p.done || 0) + (p.pending || 0) + (p.refused || 0) + (p.unknown || 0) + (p.skipped || 0);
    const pct = j.total ? Math.floor((outcomes / j.total) * 100) : 0;
    const box = document.getElementById("job-progress");
    if (!box) return;
    box.dataset.state = j.state;
    box.replaceChildren(
      el("p", {}, badge(j.state), " ", j.action + " of " + j.total + " tenants, by " + j.who + (j.reason ? " — " + j.reason : "")),
      el("div", { class: "bar", role: "progressbar", "aria-valuenow": String(pct), "aria-valuemin": "0", "aria-valuemax": "100" }, el("span", { style: null, dataset: { pct: String(pct) } })),
      el("dl", { class: "outcomes" }, ["done", "pending", "refused", "unknown", "skipped", "remaining"].flatMap((k) => [el("dt", {}, k), el("dd", { id: "job-" + k }, String(p[k] || 0))])),
      el("p", { class: "muted" }, (p.ratePerSecond ? p.ratePerSecond.toFixed(1) + " a second" : "") + (p.etaSeconds ? ", about " + duration(p.etaSeconds) + " left" : "") + (p.waiting ? " — waiting: " + p.waiting : "")),
      el("div", {}, reasonsTable(j.reasons)));
    // The bar's width: a style attribute would need 'unsafe-inline'; the
    // CSSOM is allowed by the page's policy.
    box.querySelector(".bar span").style.width = pct + "%";
    const controls = document.getElementById("job-controls");
    const ctl = (op, label) => may("POST /v1/actions/{id}/{op}") ? el("button", { type: "button", id: "job-" + op, on: { click: () => control(j.id, op) } }, label) : null;
    const running = !["done", "cancelled"].includes(j.state);
    controls.replaceChildren(...(running ? [j.state === "paused" ? ctl("resume", "Resume") : ctl("pause", "Pause"), ctl("cancel", "Cancel")] : []).filter(Boolean));
  }
  async function control(id, op) {
    try {
      renderJob(await api("/v1/actions/" + encodeURIComponent(id) + "/" + op, { method: "POST" }));
    } catch (e) {
      document.getElementById("job-controls").append(notice(op + " failed: " + e.message));
    }
  }

  async function loadReport(id) {
    const r = await api("/v1/actions/" + encodeURIComponent(id) + "/report?limit=1000");
    const box = document.getElementById("job-report");
    if (!box) return;
    renderJob(r.job);
    box.replaceChildren(el("section", { class: "card" }, el("h2", {}, "Report"),
      el("div", { class: "scroll" }, el("table", { id: "job-members" },
        el("thead", {}, el("tr", {}, ["#", "Tenant", "Provider", "Execution", "Outcome", "Detail", "At"].map((h) => el("th", {}, h)))),
        el("tbody", {}, r.members.map((m) => el("tr", { dataset: { outcome: m.outcome } }, el("td", { class: "num" }, String(m.member)),
          el("td", { class: "id" }, el("a", { href: "#/tenant/" + encodeURIComponent(m.tenantId) }, m.tenantId)), el("td", {}, m.provider || ""),
          el("td", { class: "exec" }, m.newExecutionId || m.executionId || ""), el("td", {}, m.outcome),
          el("td", { class: "err" }, m.error || m.detail || ""), el("td", {}, timeCell(m.at))))))),
      r.nextAfter ? el("p", { class: "muted" }, "The first " + r.members.length + " members; substate actions report " + id + " lists them all.") : null));
    box.dataset.loaded = String(Date.now());
  }

  window.substateFleet = { overview, showJob };
})();
