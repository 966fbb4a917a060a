// substate operator console. Plain JavaScript, no dependencies. Every piece
// of data from the worker is untrusted (tenant ids and error messages come
// from providers): it reaches the page only through textContent and
// attribute values, never as HTML.
"use strict";
(function () {
  const SUB_STATES = ["running", "waiting", "backing-off", "error", "succeeded", "failed"];
  const PROVIDERS = ["stepfunctions", "restate", "engine"];
  const FILTERS = ["subState", "hasError", "minRetryCount", "provider", "tenantPrefix", "fingerprint", "step", "workflowType", "verb", "inStateLongerThan", "stuck", "sort"];
  const main = document.getElementById("main");
  const state = { may: new Set(), who: null, counts: null, view: null, tenant: null, rows: new Map(), filter: {}, tokens: [""], page: 1, fromEnd: 0, backTokens: [""], total: null, reloadTimer: 0 };
  const PAGE = 50;
  // MIRROR names each order's mirror, the same tenants in exactly the
  // opposite order (GET /v1/tenants' sort; "" is the order without it).
  const MIRROR = { "": "tenantId:desc", "tenantId:desc": "", "retryCount:desc": "retryCount:asc", "retryCount:asc": "retryCount:desc", "updatedAt:desc": "updatedAt:asc", "updatedAt:asc": "updatedAt:desc" };

  // el builds an element: attributes from an object, children as nodes or
  // text (strings become text nodes, never markup).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "on") { for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn); }
      else if (k === "dataset") { Object.assign(e.dataset, v); }
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function key() { return sessionStorage.getItem("substate-key") || ""; }
  async function api(path, opts) {
    opts = opts || {};
    const headers = Object.assign({ Accept: "application/json" }, opts.headers || {});
    if (key()) headers.Authorization = "Bearer " + key();
    const res = await fetch(path, Object.assign({}, opts, { headers }));
    let body = null;
    try { body = await res.json(); } catch (e) { body = null; }
    if (!res.ok) {
      const msg = body && body.error ? body.error.code + ": " + body.error.message : res.status + " " + res.statusText;
      throw new Error(msg);
    }
    return body;
  }

  // The routes the page's key may call, from GET /v1/whoami (the server's
  // own guards): a control is shown only for a route listed there, so no
  // button answers 403.
  async function loadIdentity() {
    try {
      state.who = await api("/v1/whoami");
      state.may = new Set(state.who.routes);
    } catch (e) {
      state.who = null;
      state.may = new Set();
    }
    const w = document.getElementById("who");
    w.textContent = state.who ? state.who.name + " · " + state.who.scope + (state.who.tenantPrefix ? " · " + state.who.tenantPrefix + "*" : "") : "no key";
    document.body.dataset.scope = state.who ? state.who.scope : "";
  }
  function may(route) { return state.may.has(route); }

  // Times: relative, with the absolute time under it.
  function rel(t) {
    const s = Math.round((Date.now() - t.getTime()) / 1000);
    const a = Math.abs(s), fut = s < 0;
    let txt;
    if (a < 5) txt = "just now";
    else if (a < 60) txt = a + " s";
    else if (a < 3600) txt = Math.floor(a / 60) + " min";
    else if (a < 86400) txt = Math.floor(a / 3600) + " h";
    else txt = Math.floor(a / 86400) + " d";
    return a < 5 ? txt : fut ? "in " + txt : txt + " ago";
  }
  function abs(t) {
    const p = (n) => String(n).padStart(2, "0");
    return t.getFullYear() + "-" + p(t.getMonth() + 1) + "-" + p(t.getDate()) + " " + p(t.getHours()) + ":" + p(t.getMinutes()) + ":" + p(t.getSeconds());
  }
  function timeCell(iso) {
    if (!iso || iso.startsWith("0001-")) return el("span", { class: "muted" }, "–");
    const t = new Date(iso);
    return el("time", { class: "time", datetime: iso, title: t.toISOString() }, el("span", { class: "rel" }, rel(t)), el("span", { class: "abs" }, abs(t)));
  }
  setInterval(() => {
    for (const e of document.querySelectorAll("time.time")) e.querySelector(".rel").textContent = rel(new Date(e.getAttribute("datetime")));
  }, 5000);

  function badge(s) { return el("span", { class: "badge", dataset: { s: s || "" } }, s || "–"); }
  function notice(text) { return el("div", { class: "notice" }, text); }

  // ---- routing ----
  function route() {
    // A reload the live feed scheduled for the page left is not this
    // page's: it would draw that page under this one's address. Every
    // change of page comes through here.
    clearTimeout(state.reloadTimer);
    const h = location.hash || "#/";
    if (h.startsWith("#/tenant/")) return window.substateTenant.show(decodeURIComponent(h.slice("#/tenant/".length)));
    if (h.startsWith("#/actions/") && window.substateFleet) return window.substateFleet.showJob(decodeURIComponent(h.slice("#/actions/".length)));
    if (h.startsWith("#/deadletters")) return showDeadLetters(new URLSearchParams(h.split("?")[1] || ""));
    const params = new URLSearchParams(h.split("?")[1] || "");
    // Another page of the same filter: only the table changes.
    if (state.view === "overview" && document.getElementById("tenants") && FILTERS.every((k) => (params.get(k) || "") === (state.filter[k] || ""))) return gotoPage(params);
    return showOverview(params);
  }
  window.addEventListener("hashchange", route);

  // ---- overview and tenant table ----
  function filterQuery(f, extra) {
    const q = new URLSearchParams();
    for (const k of FILTERS) if (f[k]) q.set(k, f[k]);
    for (const [k, v] of Object.entries(extra || {})) if (v) q.set(k, v);
    return q;
  }

  function showOverview(params) {
    state.view = "overview";
    state.tenant = null;
    const f = {};
    for (const k of FILTERS) if (params.get(k)) f[k] = params.get(k);
    state.filter = f;
    state.total = null;
    setPage(params);
    main.replaceChildren(
      el("div", { class: "grid" },
        el("section", { class: "card" }, el("h2", {}, "Tenants by sub-state"), el("div", { class: "chips", id: "chips" }),
          el("h2", { class: "spaced" }, "Events per minute, last hour"), el("div", { id: "chart" })),
        el("section", { class: "card" }, el("h2", {}, "Health"), el("dl", { class: "health", id: "health" }))),
      el("section", { class: "card", id: "groups-card" }, el("h2", {}, "Groups"), el("div", { id: "groups" })),
      el("section", { class: "card" }, el("h2", {}, "Tenants"), filterForm(f), el("div", { id: "active-filter" }), el("div", { id: "select-all" }),
        el("div", { id: "fleet" }), el("div", { id: "table-note" }),
        el("div", { class: "scroll" }, el("table", { id: "tenants" },
          el("thead", {}, el("tr", {}, ["Tenant", "Sub-state", "Retries", "Error", "Provider", "Updated"].map((h) => el("th", {}, h)))),
          el("tbody"))),
        el("div", { class: "pager" }, el("button", { id: "first", type: "button", on: { click: () => pageTo(1) } }, "First page"),
          el("button", { id: "prev", type: "button", on: { click: () => state.fromEnd ? backTo(state.fromEnd + 1) : pageTo(state.page - 1) } }, "Previous page"),
          el("button", { id: "next", type: "button", on: { click: () => state.fromEnd ? backTo(state.fromEnd - 1) : pageTo(state.page + 1) } }, "Next page"),
          el("button", { id: "last", type: "button", on: { click: () => backTo(1) } }, "Last page"), el("span", { id: "page-info" }))));
    renderCounts();
    loadOverview();
    loadTable();
    if (window.substateFleet) window.substateFleet.overview(f);
  }

  function filterForm(f) {
    const sel = (name, opts, label) => el("label", {}, label, el("select", { id: "f-" + name, name },
      opts.map(([v, t]) => el("option", { value: v, selected: (f[name] || "") === v }, t))));
    const form = el("form", { class: "filters", on: { submit: (e) => { e.preventDefault(); applyForm(); } } },
      sel("subState", [["", "any"]].concat(SUB_STATES.map((s) => [s, s])), "Sub-state"),
      el("label", {}, el("input", { type: "checkbox", id: "f-hasError", checked: f.hasError === "true" }), "has error"),
      el("label", {}, el("input", { type: "checkbox", id: "f-stuck", checked: f.stuck === "true" }), "stuck"),
      el("label", {}, "Min retries", el("input", { type: "number", min: "0", id: "f-minRetryCount", value: f.minRetryCount || "", class: "narrow" })),
      sel("provider", [["", "any"]].concat(PROVIDERS.map((p) => [p, p])), "Provider"),
      el("label", {}, "Tenant id starts with", el("input", { type: "text", id: "f-tenantPrefix", value: f.tenantPrefix || "", maxlength: "256" })),
      sel("sort", [["", "tenant id"], ["updatedAt:desc", "last update"], ["retryCount:desc", "retry count"],
        ["tenantId:desc", "tenant id, from the end"], ["updatedAt:asc", "last update, oldest first"], ["retryCount:asc", "retry count, lowest first"]], "Sort"),
      el("button", { type: "submit", id: "apply" }, "Apply"));
    form.addEventListener("change", applyForm);
    return form;
  }

  function applyForm() {
    const v = (id) => document.getElementById(id);
    const f = {
      subState: v("f-subState").value, hasError: v("f-hasError").checked ? "true" : "", minRetryCount: v("f-minRetryCount").value,
      provider: v("f-provider").value, tenantPrefix: v("f-tenantPrefix").value, sort: v("f-sort").value,
      fingerprint: state.filter.fingerprint, step: state.filter.step, workflowType: state.filter.workflowType, verb: state.filter.verb, inStateLongerThan: state.filter.inStateLongerThan, stuck: v("f-stuck").checked ? "true" : "",
    };
    const q = filterQuery(f).toString();
    const want = "#/" + (q ? "?" + q : "");
    if (location.hash !== want) location.hash = want; else route();
  }

  async function loadOverview() {
    try {
      const o = await api("/console/api/overview");
      state.counts = o.counts;
      state.stuck = o.stuck || null;
      state.restateUI = o.restateUiUrl || "";
      renderCounts();
      renderChart(o.activity);
      renderHealth(o);
      document.getElementById("dlq-size").textContent = String(o.dlq.messages);
    } catch (e) {
      const h = document.getElementById("health");
      if (h) h.replaceChildren(el("dd", { class: "bad" }, e.message));
    }
  }

  function renderCounts() {
    const box = document.getElementById("chips");
    if (!box) return;
    box.replaceChildren(...SUB_STATES.map((s) => el("button", {
      type: "button", class: "chip" + (state.filter.subState === s ? " active" : ""), dataset: { s },
      on: { click: () => { const f = Object.assign({}, state.filter, { subState: state.filter.subState === s ? "" : s }); location.hash = "#/?" + filterQuery(f); } },
    }, el("span", { class: "label" }, s), el("span", { class: "n" }, state.counts ? String(state.counts[s] || 0) : "–"))),
    state.stuck ? el("button", {
      type: "button", id: "stuck-chip", class: "chip stuck" + (state.filter.stuck === "true" ? " active" : ""), title: "past their deadline with no change",
      on: { click: () => { const f = Object.assign({}, state.filter, { stuck: state.filter.stuck === "true" ? "" : "true" }); location.hash = "#/?" + filterQuery(f); } },
    }, el("span", { class: "label" }, "stuck"), el("span", { class: "n" }, String(Object.values(state.stuck).reduce((a, n) => a + n, 0)))) : "");
  }

  function renderChart(act) {
    const box = document.getElementById("chart");
    if (!box || !act) return;
    const NS = "http://www.w3.org/2000/svg";
    const W = 600, H = 110, mins = act.minutes || [];
    const max = Math.max(1, ...mins.map((m) => SUB_STATES.reduce((a, s) => a + (m.counts[s] || 0), 0)));
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.setAttribute("class", "chart");
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", "events per minute by sub-state");
    const bw = W / Math.max(mins.length, 1);
    mins.forEach((m, i) => {
      let y = H;
      for (const s of SUB_STATES) {
        const n = m.counts[s] || 0;
        if (!n) continue;
        const h = (n / max) * (H - 4);
        const r = document.createElementNS(NS, "rect");
        r.setAttribute("x", String(i * bw + 1)); r.setAttribute("width", String(Math.max(bw - 2, 1)));
        r.setAttribute("y", String(y - h)); r.setAttribute("height", String(h));
        r.setAttribute("data-s", s);
        const t = document.createElementNS(NS, "title");
        t.textContent = abs(new Date(m.at)) + " " + s + ": " + n;
        r.append(t);
        svg.append(r);
        y -= h;
      }
    });
    const legend = el("div", { class: "legend" }, SUB_STATES.map((s) => badge(s)), el("span", {}, "peak " + max + "/min"),
      act.truncated ? el("span", {}, "(only the newest events were read)") : null, act.error ? el("span", { class: "bad" }, act.error) : null);
    const axis = el("div", { class: "axis" }, el("span", {}, "60 min ago"), el("span", {}, "30 min ago"), el("span", {}, "now"));
    box.replaceChildren(svg, axis, legend);
  }

  function renderHealth(o) {
    const h = document.getElementById("health");
    if (!h) return;
    const items = [el("dt", {}, "NATS"), el("dd", { class: o.health.nats === "CONNECTED" ? "ok" : "bad", id: "health-nats" }, o.health.nats)];
    for (const c of o.health.consumers) {
      items.push(el("dt", {}, "Lag of " + c.name), el("dd", { class: c.error ? "bad" : c.pending + c.ackPending > 1000 ? "bad" : "ok" },
        c.error ? c.error : c.pending + " pending, " + c.ackPending + " in flight"));
    }
    if (o.health.reconciler) {
      items.push(el("dt", {}, "Reconciler last sweep"), el("dd", {}, o.health.reconciler.last ? timeCell(o.health.reconciler.last) : "none since start"));
    }
    items.push(el("dt", {}, "Dead letters"), el("dd", {}, el("a", { href: "#/deadletters" }, String(o.dlq.messages))));
    items.push(el("dt", {}, "Open consoles"), el("dd", {}, o.streams.open + (o.streams.dropped ? " (" + o.streams.dropped + " dropped as too slow)" : "")));
    h.replaceChildren(...items);
  }

  // loadTable reads the page the address names. A page counted from the
  // end is read from the mirror of the order (see MIRROR) and shown
  // reversed: the last page is the mirror's first T − (M−1)·50 tenants,
  // T the total and M the pages, and each page before it the mirror's
  // next 50, so the last of a million tenants costs one page's walk.
  async function loadTable() {
    let f = state.filter, token = state.tokens[state.page - 1] || "", limit = PAGE;
    if (state.fromEnd) {
      f = Object.assign({}, f, { sort: MIRROR[f.sort || ""] || "" });
      token = state.backTokens[state.fromEnd - 1] || "";
      if (state.fromEnd === 1) {
        state.awaitTotal = state.total === null;
        if (state.awaitTotal) return; // setTotal loads it
        limit = Math.max(1, state.total - (pages() - 1) * PAGE);
      }
    }
    const q = filterQuery(f, { pageToken: token, limit: String(limit) });
    const body = document.querySelector("#tenants tbody");
    const note = document.getElementById("table-note");
    try {
      const page = await api("/v1/tenants?" + q);
      if (!document.querySelector("#tenants tbody")) return;
      const tenants = state.fromEnd ? page.tenants.slice().reverse() : page.tenants;
      state.rows = new Map();
      body.replaceChildren(...tenants.map((v) => row(v)));
      state.next = page.nextPageToken || "";
      if (state.fromEnd) state.backTokens[state.fromEnd] = state.next; else state.tokens[state.page] = state.next;
      state.shown = tenants.length;
      state.asked = limit;
      renderPager();
      note.replaceChildren();
      body.dataset.loaded = String(Date.now());
    } catch (e) {
      note.replaceChildren(notice(e.message));
    }
  }

  // Paging: the page tokens of the pages seen, in order, so that Previous
  // goes back without a reload; the page's token and number are in the
  // address, so a page can be shared and the back button works. A page
  // opened from a shared address knows no earlier token: Previous then
  // offers the first page. Pages reached by Last are counted from the end
  // (fromEnd: 1 is the last page) with the mirror's tokens (backToken),
  // the same way in the other direction: their Next, not knowing the
  // page after, offers the last page.
  function setPage(params) {
    const k = Math.max(0, Math.floor(Number(params.get("fromEnd"))) || 0);
    if (k) {
      const token = k > 1 ? params.get("backToken") || "" : "";
      const n = token ? k : 1;
      if (state.backTokens[n - 1] !== token) state.backTokens = Object.assign([""], { [n - 1]: token });
      state.backTokens.length = n;
      state.fromEnd = n;
      state.page = 0; // no forward page: live changes do not reload it
      return;
    }
    state.fromEnd = 0;
    const token = params.get("pageToken") || "";
    const page = Math.max(1, Number(params.get("page")) || 1);
    if (!token) { state.tokens = [""]; state.page = 1; return; }
    if (state.tokens[page - 1] !== token) state.tokens = Object.assign([""], { [page - 1]: token });
    state.tokens.length = page;
    state.page = page;
  }
  function gotoPage(params) { setPage(params); loadTable(); }
  function pageTo(n) {
    const token = n <= 1 ? "" : state.tokens[n - 1];
    if (token === undefined) n = 1;
    location.hash = "#/?" + filterQuery(state.filter, n > 1 ? { pageToken: token, page: String(n) } : {});
  }
  function backTo(k) {
    const token = k <= 1 ? "" : state.backTokens[k - 1];
    if (token === undefined || k < 1) k = 1;
    location.hash = "#/?" + filterQuery(state.filter, k > 1 ? { fromEnd: String(k), backToken: token } : { fromEnd: "1" });
  }
  // setTotal takes the filter's exact count (the groups route's total),
  // which page numbers and the last page need.
  function setTotal(total) {
    state.total = total;
    if (state.fromEnd === 1 && state.awaitTotal) {
      if (total !== null) loadTable();
      else document.getElementById("table-note").replaceChildren(notice("The last page needs the filter's count, which the view could not give: narrow the filter, or page from the first page."));
    }
    renderPager();
  }
  function pages() { return state.total === null ? null : Math.max(1, Math.ceil(state.total / PAGE)); }
  function renderPager() {
    const info = document.getElementById("page-info");
    if (!info) return;
    const m = pages();
    const n = state.fromEnd ? (m === null ? null : Math.max(1, m - state.fromEnd + 1)) : state.page;
    const atLast = state.fromEnd ? state.fromEnd === 1 : !state.next;
    document.getElementById("next").disabled = state.fromEnd ? state.fromEnd <= 1 : !state.next;
    document.getElementById("prev").disabled = state.fromEnd ? !state.next : state.page <= 1;
    document.getElementById("first").disabled = n === 1;
    document.getElementById("last").disabled = m === null || atLast;
    info.textContent = "page " + (n === null ? state.fromEnd + " from the end" : n) + (m ? " of " + m : "") + (state.total !== null ? " · " + state.total + " tenants" : "") +
      (state.shown ? "" : " — no tenants on this page") +
      (state.next && state.shown < state.asked ? " (the view was read up to its scan limit; more may follow)" : "");
  }

  function row(v) {
    const tr = el("tr", { dataset: { id: v.tenantId } },
      el("td", { class: "id" }, el("a", { href: "#/tenant/" + encodeURIComponent(v.tenantId) }, v.tenantId)),
      el("td", { class: "sub" }, badge(v.workflowSubState)),
      el("td", { class: "num retries" }, String(v.workflowRetryCount)),
      el("td", { class: "err" }, v.workflowErrorMessage),
      el("td", { class: "provider" }, v.provider),
      el("td", { class: "updated" }, timeCell(v.updatedAt)));
    state.rows.set(v.tenantId, tr);
    return tr;
  }

  function matches(v) {
    const f = state.filter;
    return (!f.subState || v.workflowSubState === f.subState) && (f.hasError !== "true" || v.workflowErrorMessage) &&
      v.workflowRetryCount >= Number(f.minRetryCount || 0) && (!f.provider || v.provider === f.provider) &&
      v.tenantId.startsWith(f.tenantPrefix || "") && (!f.fingerprint || v.workflowErrorFingerprint === f.fingerprint) &&
      (!f.step || v.workflowStep === f.step) && (!f.workflowType || v.workflowType === f.workflowType) &&
      (!f.verb || v.workflowVerb === f.verb) && (f.stuck !== "true" || v.stuck);
  }

  // ---- live ----
  function onChange(ch) {
    if (state.counts) {
      const o = ch.oldSubState, n = ch.new.workflowSubState;
      if (o !== n) {
        if (o && state.counts[o] > 0) state.counts[o]--;
        if (n) state.counts[n] = (state.counts[n] || 0) + 1;
        renderCounts();
      }
    }
    if (state.view === "overview") {
      const old = state.rows.get(ch.tenantId);
      if (old) {
        const tr = row(ch.new);
        if (!matches(ch.new)) tr.classList.add("gone");
        tr.classList.add("flash");
        if (state.filter.sort === "updatedAt:desc" && state.page === 1) { old.remove(); document.querySelector("#tenants tbody").prepend(tr); }
        else old.replaceWith(tr);
      } else if (state.page === 1 && matches(ch.new)) {
        clearTimeout(state.reloadTimer);
        state.reloadTimer = setTimeout(loadTable, 300);
      }
    }
    if (state.view === "tenant" && state.tenant === ch.tenantId) {
      clearTimeout(state.reloadTimer);
      state.reloadTimer = setTimeout(() => window.substateTenant.show(ch.tenantId), 300);
    }
  }

  let source = null;
  function connect() {
    if (source) source.close();
    const live = document.getElementById("live");
    source = new EventSource("/console/api/changes");
    source.addEventListener("open", () => { live.textContent = "live"; live.className = "live on"; loadOverview(); });
    const mine = source;
    source.addEventListener("error", () => {
      live.textContent = "reconnecting…"; live.className = "live off";
      // The browser reconnects by itself, except after an answer that is
      // not a stream (a worker at its cap of streams answers 503).
      if (mine.readyState === EventSource.CLOSED) setTimeout(() => { if (source === mine) connect(); }, 5000);
    });
    source.addEventListener("change", (e) => { try { onChange(JSON.parse(e.data)); } catch (err) { /* ignore a bad event */ } });
    source.addEventListener("reset", () => { if (state.view === "overview") { loadOverview(); loadTable(); } else route(); });
  }
  setInterval(loadOverview, 15000);

  // ---- dead letters ----
  const REQUEUE = "POST /console/api/deadletters/{seq}/requeue";
  async function showDeadLetters(params) {
    state.view = "deadletters";
    state.tenant = null;
    const before = params.get("before") || "";
    const tbody = el("tbody");
    const msg = el("div", { id: "dlq-note" });
    main.replaceChildren(el("section", { class: "card" }, el("h2", {}, "Dead letters, newest first"), msg,
      el("p", { class: "muted" }, "Payloads are shown to read:raw keys, redacted unless your key is admin." + (may(REQUEUE) ? " Requeue maps a raw message again." : "")),
      el("div", { class: "scroll" }, el("table", { id: "deadletters" }, el("thead", {}, el("tr", {}, ["Time", "Stage", "Reason", "Tenant", "Payload", ""].map((h) => el("th", {}, h)))), tbody)),
      el("div", { class: "pager", id: "dlq-pager" })));
    try {
      const page = await api("/console/api/deadletters?limit=50" + (before ? "&before=" + encodeURIComponent(before) : ""));
      tbody.replaceChildren(...page.deadLetters.map((d) => el("tr", { dataset: { seq: String(d.seq) } },
        el("td", {}, timeCell(d.time)), el("td", {}, d.stage), el("td", { class: "err" }, d.reason),
        el("td", { class: "id" }, d.tenantId ? el("a", { href: "#/tenant/" + encodeURIComponent(d.tenantId) }, d.tenantId) : "–"),
        el("td", {}, d.payload === undefined ? el("span", { class: "muted payload-omitted" }, d.payloadOmitted || "no payload") :
          el("details", {}, el("summary", {}, d.redacted ? "payload (redacted)" : "payload"), el("pre", {}, JSON.stringify(d.payload, null, 2)))),
        el("td", {}, d.rawSeq && may(REQUEUE) ? el("button", { type: "button", class: "requeue", on: { click: (e) => requeue(d.seq, e.target) } }, "Requeue") : ""))));
      if (!page.deadLetters.length) msg.replaceChildren(notice("No dead letters."));
      if (page.before) document.getElementById("dlq-pager").replaceChildren(el("a", { href: "#/deadletters?before=" + page.before }, "Older →"));
    } catch (e) {
      msg.replaceChildren(notice(e.message));
    }
  }
  async function requeue(seq, button) {
    button.disabled = true;
    try {
      const r = await api("/console/api/deadletters/" + seq + "/requeue", { method: "POST" });
      button.replaceWith(document.createTextNode("requeued, " + r.published + " event(s) published"));
    } catch (e) {
      button.disabled = false;
      document.getElementById("dlq-note").replaceChildren(notice("Requeue of " + seq + " failed: " + e.message));
    }
  }

  document.getElementById("key-button").addEventListener("click", () => {
    const k = prompt("API key for this worker (kept in this tab only; empty to forget it):", "");
    if (k === null) return;
    if (k) sessionStorage.setItem("substate-key", k); else sessionStorage.removeItem("substate-key");
    // EventSource cannot send a header: the stream alone reads the key from
    // a cookie scoped to its path.
    document.cookie = "substate_console_key=" + encodeURIComponent(k) + "; path=/console/api/changes; SameSite=Strict" + (k ? "" : "; max-age=0");
    connect();
    loadIdentity().then(route);
  });

  // The other scripts of the page (fleet.js) use these.
  window.substateConsole = { el, api, may, badge, notice, timeCell, filterQuery, FILTERS, state, setTotal };

  connect();
  loadIdentity().then(route);
})();
