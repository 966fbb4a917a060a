// substate console: a tenant's page — its current view, the actions on
// its execution for keys that may take them, and its timeline with the
// operator actions interleaved. Untrusted text is written only as text.
"use strict";
(function () {
  const C = window.substateConsole;
  const { el, api, may, badge, notice, timeCell, state } = C;
  const main = document.getElementById("main");

  // ---- tenant page ----
  async function showTenant(id) {
    state.view = "tenant";
    state.tenant = id;
    const enc = encodeURIComponent(id);
    const fields = el("dl", { class: "fields", id: "tenant-fields" });
    const tbody = el("tbody");
    const note = el("div");
    // The page is built once per tenant, and a reload fills it in: it is
    // built when main does not show this tenant's page (another tenant's,
    // or any other page, drew it last).
    const title = document.getElementById("tenant-id");
    if (!title || title.textContent !== id) {
      main.replaceChildren(el("p", {}, el("a", { href: "#/" }, "← all tenants")), el("h1", { id: "tenant-id", class: "tenant-title" }, id),
        el("section", { class: "card" }, el("h2", {}, "Current view"), fields, el("div", { id: "tenant-actions" })), note,
        el("section", { class: "card" }, el("h2", {}, "Timeline"), el("div", { class: "scroll" }, el("table", { id: "timeline" },
          el("thead", {}, el("tr", {}, ["Recorded", "Occurred", "Sub-state", "Step", "Retries", "Error", "Outcome", "Provider state", "Evidence"].map((h) => el("th", {}, h)))), tbody))));
    }
    try {
      const [v, hist] = await Promise.all([api("/v1/tenants/" + enc), api("/v1/tenants/" + enc + "/history?limit=1000")]);
      if (state.tenant !== id) return;
      const f = [["Sub-state", badge(v.workflowSubState)], ["Verb", v.workflowVerb], ["Legacy status", v.workflowStatus], ["Retry count", String(v.workflowRetryCount)],
        ["Error", el("span", { class: "bad", id: "tenant-error" }, v.workflowErrorMessage || "")], ["Provider", v.provider], ["Provider state", v.providerState],
        ["Execution", el("span", {}, v.workflowExecutionId, " ", providerLink(v))], ["Current step", v.workflowStep || "–"],
        ["In this sub-state since", timeCell(v.workflowSubStateSince)],
        ["Deadline", v.deadline && !v.deadline.startsWith("0001-") ? timeCell(v.deadline) : el("span", { class: "muted" }, "none")],
        ["Stuck", v.stuck ? el("span", { class: "bad", id: "stuck-since" }, "stuck since ", timeCell(v.stuckSince)) : el("span", { id: "stuck-since" }, "no")],
        ["Next retry", nextRetry(v)],
        ["Updated", timeCell(v.updatedAt)], ["Last event", timeCell(v.lastEventAt)]];
      document.getElementById("tenant-fields").replaceChildren(...f.flatMap(([k, val]) => [el("dt", {}, k), el("dd", {}, val)]));
      document.querySelector("#timeline tbody").replaceChildren(...timeline(hist.transitions, hist.actions || []));
      renderTenantActions(v);
      main.querySelectorAll(".more").forEach((n) => n.remove());
      if (hist.nextAfterSeq) main.append(moreTransitions(id, hist.nextAfterSeq, hist.transitions.length));
      document.querySelector("#timeline tbody").dataset.loaded = String(Date.now());
    } catch (e) {
      if (state.tenant !== id) return; // the page was left: its error is not the one on screen's
      main.querySelectorAll(".notice").forEach((n) => n.remove());
      main.insertBefore(notice(e.message), main.children[2] || null);
    }
  }

  // moreTransitions offers the tenant's next page of history, fetched with
  // the page's key and added to the timeline.
  function moreTransitions(id, after, shown) {
    const p = el("p", { class: "more" }, "Showing the first " + shown + " transitions. ");
    const b = el("button", { type: "button", id: "more-transitions", on: { click: async () => {
      b.disabled = true;
      try {
        const h = await api("/v1/tenants/" + encodeURIComponent(id) + "/history?limit=1000&afterSeq=" + after);
        if (state.tenant !== id) return;
        document.querySelector("#timeline tbody").append(...timeline(h.transitions, h.actions || []));
        p.replaceWith(...(h.nextAfterSeq ? [moreTransitions(id, h.nextAfterSeq, shown + h.transitions.length)] : []));
      } catch (e) {
        b.disabled = false;
        p.append(notice(e.message));
      }
    } } }, "Show the next ones");
    p.append(b);
    return p;
  }

  function transitionRow(t) {
    const enc = encodeURIComponent(state.tenant);
    return el("tr", { dataset: { seq: String(t.seq), outcome: t.outcome } },
        el("td", {}, timeCell(t.storedAt)), el("td", {}, timeCell(t.occurredAt)),
        el("td", { class: "sub" }, t.old.subState && t.old.subState !== t.new.subState ? [badge(t.old.subState), " → "] : null, badge(t.new.subState)),
        el("td", { class: "step" }, t.new.step || ""),
        el("td", { class: "num" }, String(t.new.retryCount || 0)), el("td", { class: "err" }, t.new.errorMessage || ""),
        el("td", {}, t.outcome + (t.reason ? ": " + t.reason : "")), el("td", {}, t.providerState || ""),
        el("td", { class: "evidence" }, evidence("/v1/tenants/" + enc + "/history?raw=true&limit=1&afterSeq=" + (t.seq - 1)),
          t.traceUrl ? el("a", { class: "trace", href: t.traceUrl, target: "_blank", rel: "noopener noreferrer" }, "trace") : null));
  }

  // timeline interleaves the operator actions with the transitions, by
  // time (an action at the same time as a transition comes after it).
  function timeline(transitions, actions) {
    const rows = transitions.map((t) => ({ at: Date.parse(t.storedAt), tr: () => transitionRow(t) }))
      .concat(actions.map((a) => ({ at: Date.parse(a.time) + 0.5, tr: () => actionRow(a) })));
    rows.sort((a, b) => a.at - b.at);
    return rows.map((r) => r.tr());
  }
  function actionRow(a) {
    const what = a.action + (a.kill ? " (kill)" : "") + " by " + a.who + (a.reason ? " — " + a.reason : "");
    const outcome = a.outcome + (a.error ? ": " + a.error : a.detail ? ": " + a.detail : "");
    return el("tr", { class: "operator", dataset: { audit: a.id, outcome: a.outcome } },
      el("td", {}, timeCell(a.time)), el("td", {}, el("span", { class: "op-label" }, "operator")),
      el("td", { colspan: "4", class: "op-what" }, what, a.newExecutionId ? " → " + a.newExecutionId : ""),
      el("td", { class: "op-outcome" }, outcome), el("td", {}, a.job ? el("a", { href: "#/actions/" + encodeURIComponent(a.job) }, "job") : ""), el("td"));
  }

  // providerLink is the execution in its provider's own console: the AWS
  // console from a Step Functions execution ARN (its region is in it), the
  // Restate UI when the worker has --restate-ui-url.
  function providerLink(v) {
    if (v.provider === "restate" && state.restateUI && v.workflowExecutionId) {
      return el("a", { id: "provider-link", href: state.restateUI.split("{invocationId}").join(encodeURIComponent(v.workflowExecutionId)), target: "_blank", rel: "noopener noreferrer" }, "open in the Restate UI");
    }
    const m = /^arn:aws[a-z-]*:states:([a-z0-9-]+):\d+:execution:/.exec(v.workflowExecutionId || "");
    if (v.provider !== "stepfunctions" || !m) return null;
    const url = "https://" + m[1] + ".console.aws.amazon.com/states/home?region=" + m[1] + "#/v2/executions/details/" + encodeURIComponent(v.workflowExecutionId);
    return el("a", { id: "provider-link", href: url, target: "_blank", rel: "noopener noreferrer" }, "open in the AWS console");
  }
  // nextRetry: when a backing-off tenant's provider retries next, as the
  // view keeps it (workflowNextRetryAt); when the provider did not report
  // it (Step Functions never does), the page names the provider rather
  // than guess.
  const PROVIDER_NAMES = { stepfunctions: "Step Functions", restate: "Restate", engine: "the engine" };
  function nextRetry(v) {
    if (v.workflowSubState !== "backing-off") return el("span", { class: "muted" }, "–");
    const at = v.workflowNextRetryAt;
    if (at && !at.startsWith("0001-")) return el("span", { id: "next-retry", dataset: { at } }, timeCell(at));
    return el("span", { class: "muted", id: "next-retry" }, "not reported by " + (PROVIDER_NAMES[v.provider] || v.provider || "the provider"));
  }

  // ---- actions on one tenant's execution ----
  const ACT = "POST /v1/tenants/{id}/execution/{action}";
  // lastResult is the outcome of the last action taken on the page's
  // tenant ({tenant, make}): the action changes the tenant, and the page
  // that reloads for that change keeps the outcome below the buttons
  // instead of wiping it before the operator has read it.
  let lastResult = null;
  function actResult() {
    if (!lastResult) return null;
    return el("div", { id: "act-result" }, lastResult.make());
  }
  function renderTenantActions(v) {
    const box = document.getElementById("tenant-actions");
    if (!box || box.dataset.tenant === v.tenantId && box.dataset.busy) return;
    box.dataset.tenant = v.tenantId;
    if (lastResult && lastResult.tenant !== v.tenantId) lastResult = null;
    if (!may(ACT) || !v.workflowExecutionId) { box.replaceChildren(); return; }
    box.replaceChildren(el("div", { class: "controls" }, ["retry", "stop", "restart"].map((a) =>
      el("button", { type: "button", id: "act-" + a, on: { click: () => previewAction(v.tenantId, a) } }, a[0].toUpperCase() + a.slice(1)))));
    const kept = actResult();
    if (kept) box.append(kept);
  }
  async function previewAction(id, action) {
    const box = document.getElementById("tenant-actions");
    box.dataset.busy = "1";
    lastResult = null; // a new action: the last one's outcome is not its own
    const path = "/v1/tenants/" + encodeURIComponent(id) + "/execution/" + action;
    const post = (body) => api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const out = el("div", { id: "act-result" });
    const done = () => { delete box.dataset.busy; };
    let pv;
    try {
      pv = await post({ dryRun: true, reason: "preview" });
    } catch (e) {
      box.replaceChildren(notice(action + " would be refused: " + e.message), el("button", { type: "button", on: { click: () => { done(); showTenant(id); } } }, "Close"));
      done();
      return;
    }
    const reason = el("input", { type: "text", id: "act-reason", maxlength: "500", placeholder: "why (recorded in the audit trail)" });
    const form = el("form", { class: "confirm", on: { submit: async (e) => {
      e.preventDefault();
      if (!reason.value.trim()) { out.replaceChildren(notice("Say why: the reason is recorded with the action.")); return; }
      form.querySelectorAll("button").forEach((b) => { b.disabled = true; });
      try {
        // The execution previewed: if the tenant moved on to another one
        // since, the worker skips the action instead of taking it there.
        const r = await post({ reason: reason.value.trim(), executionId: pv.executionId });
        const text = action + ": " + r.outcome + (r.next ? " — " + r.next : "") + (r.newExecutionId ? " (new execution " + r.newExecutionId + ")" : "");
        lastResult = { tenant: id, make: () => el("p", { dataset: { outcome: r.outcome } }, text) };
      } catch (err) {
        const text = action + " failed: " + err.message;
        lastResult = { tenant: id, make: () => notice(text) };
      }
      out.replaceChildren(lastResult.make());
      done();
      setTimeout(() => { if (state.tenant === id) showTenant(id); }, 1500);
    } } }, el("label", {}, "Reason ", reason), el("button", { type: "submit", id: "act-confirm" }, "Confirm " + action),
      el("button", { type: "button", on: { click: () => { done(); renderTenantActions({ tenantId: id, workflowExecutionId: pv.executionId }); } } }, "Cancel"));
    box.replaceChildren(el("div", { class: "fleet", id: "act-preview" },
      el("p", {}, action + " " + pv.provider + " execution " + pv.executionId + " (" + (pv.execution && pv.execution.providerState ? pv.execution.providerState : "as described") + "). Nothing has been changed yet."),
      form, out));
  }

  // evidence is a transition's raw provider evidence, fetched with the
  // page's key when opened (a link would go without it).
  function evidence(path) {
    const pre = el("pre");
    const d = el("details", { dataset: { path } }, el("summary", {}, "raw"), pre);
    d.addEventListener("toggle", async () => {
      if (!d.open || d.dataset.loaded) return;
      try {
        const page = await api(path);
        const tr = page.transitions[0];
        pre.textContent = JSON.stringify(tr && tr.raw ? tr.raw : null, null, 2);
        d.dataset.loaded = "ok";
      } catch (e) {
        pre.replaceChildren(el("span", { class: "bad" }, e.message));
      }
    });
    return d;
  }

  window.substateTenant = { show: showTenant };
})();
