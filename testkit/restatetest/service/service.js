"use strict";
// The Restate service substate's integration tests run against a real
// restate-server. Usage: node service.js <service port> <control port>.
// The control port (plain HTTP on loopback) lets a test steer handlers:
// GET /gate?key=K&gate=open|fail sets the gate of object key K;
// GET /attempts?id=I answers how many attempts invocation I has started.

// Node 20 lacks Promise.withResolvers, which the SDK uses.
if (typeof Promise.withResolvers !== "function") {
  Promise.withResolvers = function withResolvers() {
    let resolve, reject;
    const promise = new Promise((res, rej) => { resolve = res; reject = rej; });
    return { promise, resolve, reject };
  };
}

const crypto = require("node:crypto");
const http = require("node:http");
const http2 = require("node:http2");
const restate = require("@restatedev/restate-sdk");

const attempts = new Map(); // invocation id -> attempts seen
const gates = new Map(); // object key -> "open" | "fail"

function attempt(ctx) {
  const id = ctx.request().id;
  const n = (attempts.get(id) || 0) + 1;
  attempts.set(id, n);
  return n;
}

// Retries one second apart, so a test sees each backing-off spell.
const everySecond = { initialInterval: 1000, maxInterval: 1000, exponentiationFactor: 1, maxAttempts: 1000, onMaxAttempts: "pause" };

const provision = restate.object({
  name: "Provision",
  handlers: {
    // Succeeds at once.
    ok: async (ctx) => { await ctx.run("step", () => "done"); return "ok"; },
    // Fails {failures} times, or while its gate says "fail", then succeeds.
    flaky: restate.handlers.object.exclusive({ retryPolicy: everySecond }, async (ctx, input) => {
      const n = attempt(ctx);
      const failures = (input && input.failures) || 0;
      if (n <= failures || gates.get(ctx.key) === "fail") {
        throw new Error(`downstream unavailable (attempt ${n})`);
      }
      return `ok after ${n}`;
    }),
    // Works for {ms} (2 s by default) outside Restate's sight: running.
    busy: async (ctx, input) => {
      await new Promise((resolve) => setTimeout(resolve, (input && input.ms) || 2000));
      return "done";
    },
    // Fails for good.
    terminal: async () => { throw new restate.TerminalError("card declined: insufficient_funds", { errorCode: 402 }); },
    // Sleeps {ms} (an hour by default): the invocation suspends half a
    // second later (its inactivity timeout).
    nap: restate.handlers.object.exclusive({ inactivityTimeout: 500 }, async (ctx, input) => {
      await ctx.sleep((input && input.ms) || 3600000);
      return "rested";
    }),
    // Fails until its gate is "open"; paused by its retry policy after 3 attempts.
    stuck: restate.handlers.object.exclusive(
      { retryPolicy: { initialInterval: 200, maxInterval: 200, maxAttempts: 3, onMaxAttempts: "pause" } },
      async (ctx) => {
        const n = attempt(ctx);
        if (gates.get(ctx.key) !== "open") throw new Error(`downstream unavailable (attempt ${n})`);
        return `ok after ${n}`;
      }),
    // Fails while its gate says "fail", waiting 0.05 s, 2 s, 80 s, 1 h…
    // between attempts: backing off after the third, it holds still long
    // enough to be checked.
    slow: restate.handlers.object.exclusive(
      { retryPolicy: { initialInterval: 50, exponentiationFactor: 40, maxInterval: 3600000, maxAttempts: 1000, onMaxAttempts: "pause" } },
      async (ctx) => {
        const n = attempt(ctx);
        if (gates.get(ctx.key) === "fail") throw new Error(`downstream unavailable (attempt ${n})`);
        return `ok after ${n}`;
      }),
    // Like stuck, but waiting 0.05 s, then 5 s between attempts: resumed
    // with its gate still shut, it backs off after its second attempt long
    // enough to be checked, then pauses again.
    stall: restate.handlers.object.exclusive(
      { retryPolicy: { initialInterval: 50, exponentiationFactor: 100, maxInterval: 3600000, maxAttempts: 3, onMaxAttempts: "pause" } },
      async (ctx) => {
        const n = attempt(ctx);
        if (gates.get(ctx.key) !== "open") throw new Error(`downstream unavailable (attempt ${n})`);
        return `ok after ${n}`;
      }),
    // Like stuck, but every attempt fails with the same message (Restate
    // then records one TransientError event for all of them).
    same: restate.handlers.object.exclusive(
      { retryPolicy: { initialInterval: 200, maxInterval: 200, maxAttempts: 3, onMaxAttempts: "pause" } },
      async (ctx) => {
        attempt(ctx);
        if (gates.get(ctx.key) !== "open") throw new Error("downstream unavailable");
        return "ok";
      }),
    // Fail fast: every attempt fails (its message names the attempt) while
    // the gate is not "open", 0.5 s apart; the retry policy ends the run
    // after 4 attempts, within a default poll interval, by killing it.
    burstKill: restate.handlers.object.exclusive({ retryPolicy: burst("kill") }, failing),
    // Like burstKill, but the retry policy pauses it after 4 attempts.
    burstPause: restate.handlers.object.exclusive({ retryPolicy: burst("pause") }, failing),
    // Like burstPause, but waiting 0.25 s, 1 s, then 4 s between attempts:
    // paused after 4 attempts within 6 s, and, resumed, backing off for
    // seconds before it pauses again after 4 more.
    relapse: restate.handlers.object.exclusive(
      { retryPolicy: { initialInterval: 250, exponentiationFactor: 4, maxInterval: 4000, maxAttempts: 4, onMaxAttempts: "pause" } },
      failing),
    // Fails while its gate is not "open", waiting 0.05 s, 1 min, 1 min…
    // between attempts: backing off for a minute after its second attempt.
    // It fails before it calls the context, so it never sees a cancel.
    backoff: restate.handlers.object.exclusive(
      { retryPolicy: { initialInterval: 50, exponentiationFactor: 1200, maxInterval: 60000, maxAttempts: 1000, onMaxAttempts: "pause" } },
      failing),
  },
});

// burst is the retry policy of the fail-fast handlers: 4 attempts, 0.5 s
// apart, then onMax.
function burst(onMax) {
  return { initialInterval: 500, maxInterval: 500, exponentiationFactor: 1, maxAttempts: 4, onMaxAttempts: onMax };
}

// failing fails while the gate of its key is not "open", with a message
// naming the attempt.
async function failing(ctx) {
  const n = attempt(ctx);
  if (gates.get(ctx.key) !== "open") throw new Error(`downstream unavailable (attempt ${n})`);
  return `ok after ${n}`;
}

// A keyless service: its invocations have no target_service_key.
const notify = restate.service({
  name: "Notify",
  handlers: {
    send: async (ctx) => { await ctx.run("send", () => "sent"); return "sent"; },
    // Sleeps {ms} (1 s by default): suspended half a second later, then
    // completed, so its row changes several times.
    nap: restate.handlers.handler({ inactivityTimeout: 500 }, async (ctx, input) => {
      await ctx.sleep((input && input.ms) || 1000);
      return "rested";
    }),
  },
});

// Reporter posts an invocation's sys_invocation row to a webhook, signed as
// Standard Webhooks asks: how a Restate deployment reports to substate. A
// row goes with its journal's failure events and its handler's retry
// policy, which tell a paused or resumed invocation's attempts, and the row
// of a keyless service's invocation with its input, where its tenant is.
const reporter = restate.service({
  name: "Reporter",
  handlers: {
    report: async (ctx, input) => ctx.run("post", () => report(input)),
  },
});

async function report({ invocationId, url, secret, adminUrl }) {
  const query = `SELECT * FROM sys_invocation WHERE id = '${invocationId.replace(/'/g, "''")}'`;
  const answer = await fetch(`${adminUrl}/query`, {
    method: "POST",
    headers: { "accept": "application/json", "content-type": "application/json" },
    body: JSON.stringify({ query }),
  });
  const { rows } = await answer.json();
  if (!rows || rows.length !== 1) throw new restate.TerminalError(`no row for ${invocationId}`);
  if (rows[0].status !== "completed") {
    // A paused row says nothing of its failures, and after a resume
    // retry_count starts again at 1: attach them as substate's poller does.
    const journal = await fetch(`${adminUrl}/query`, {
      method: "POST",
      headers: { "accept": "application/json", "content-type": "application/json" },
      body: JSON.stringify({ query: `SELECT id, appended_at, event_type, event_json FROM sys_journal_events WHERE id = '${invocationId.replace(/'/g, "''")}' AND event_type IN ('TransientError', 'Paused') ORDER BY appended_at` }),
    });
    const events = (await journal.json()).rows || [];
    if (events.length > 0) {
      rows[0].sys_journal_events = events;
      rows[0].sys_journal_events_count = events.length;
      const policy = await retryPolicy(adminUrl, rows[0].target_service_name, rows[0].target_handler_name);
      if (policy) rows[0].handler_retry_policy = policy;
    }
  }
  if (!rows[0].target_service_key) {
    const input = await invocationInput(adminUrl, invocationId);
    if (input !== undefined) rows[0].input = input;
  }
  const body = JSON.stringify(rows[0]);
  const id = `msg_${crypto.randomUUID()}`;
  const timestamp = Math.floor(Date.now() / 1000).toString();
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const signature = crypto.createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest("base64");
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", "webhook-id": id, "webhook-timestamp": timestamp, "webhook-signature": `v1,${signature}` },
    body,
  });
  return { status: res.status, row: rows[0] };
}

// invocationInput returns an invocation's input as substate's poller
// attaches it: the payload of the Input entry of its journal, when it is
// JSON of at most 64 KiB; undefined otherwise.
async function invocationInput(adminUrl, invocationId) {
  const answer = await fetch(`${adminUrl}/query`, {
    method: "POST",
    headers: { "accept": "application/json", "content-type": "application/json" },
    body: JSON.stringify({ query: `SELECT id, entry_json FROM sys_journal WHERE id = '${invocationId.replace(/'/g, "''")}' AND index = 0 AND entry_type = 'Command: Input' AND raw_length <= 81920` }),
  });
  const entry = ((await answer.json()).rows || [])[0];
  try {
    const payload = Buffer.from(JSON.parse(entry.entry_json).Command.Input.payload);
    return payload.length > 0 && payload.length <= 65536 ? JSON.parse(payload.toString("utf8")) : undefined;
  } catch {
    return undefined;
  }
}

// retryPolicy returns a handler's effective retry policy as substate's
// poller attaches it ({max_attempts, on_max_attempts}: the handler's
// settings, else the service's), or null: with it, the attempts of a spell
// paused after failing alike each time are known (Restate journals one
// TransientError for them).
async function retryPolicy(adminUrl, service, handler) {
  const answer = await fetch(`${adminUrl}/services/${encodeURIComponent(service)}`, { headers: { "accept": "application/json" } });
  if (!answer.ok) return null;
  const svc = await answer.json();
  const own = ((svc.handlers || []).find((h) => h.name === handler) || {}).retry_policy || {};
  const pick = (k) => (own[k] != null ? own[k] : (svc.retry_policy || {})[k]);
  if (pick("max_attempts") == null || pick("on_max_attempts") == null) return null;
  return { max_attempts: pick("max_attempts"), on_max_attempts: pick("on_max_attempts") };
}

const [port, controlPort] = process.argv.slice(2).map(Number);
http2.createServer(restate.createEndpointHandler({ services: [provision, notify, reporter] })).listen(port, "127.0.0.1");
http.createServer((req, res) => {
  const u = new URL(req.url, "http://127.0.0.1");
  if (u.pathname === "/attempts") {
    res.end(`${attempts.get(u.searchParams.get("id")) || 0}\n`);
    return;
  }
  gates.set(u.searchParams.get("key"), u.searchParams.get("gate"));
  res.end("ok\n");
}).listen(controlPort, "127.0.0.1", () => console.log(`listening on ${port} and ${controlPort}`));
