package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// holdReloads makes the page hold the callbacks of its 300 ms timers (the
// reload the live feed schedules after a change) instead of running them,
// and honours clearTimeout on them; runHeld runs those still held. The
// test then decides when a scheduled reload fires.
const (
	holdReloads = `(() => {
  const held = new Map(), st = window.setTimeout.bind(window), ct = window.clearTimeout.bind(window);
  let n = 1e9;
  window.__held = held;
  window.setTimeout = (f, ms, ...a) => { if (ms !== 300) return st(f, ms, ...a); n++; held.set(n, f); return n; };
  window.clearTimeout = (id) => { if (!held.delete(id)) ct(id); };
  return true;
})()`
	runHeld = `(() => { const fs = [...window.__held.values()]; window.__held.clear(); fs.forEach((f) => f()); return fs.length; })()`
)

// TestConsoleReloadOfThePageLeft: a change the live feed brings for the
// page on screen schedules its reload; when the operator has gone to
// another page before it fires, that page stays drawn: a tenant's page is
// not replaced by the tenant left (under the new tenant's address, its
// action buttons acting on the other tenant), nor by the overview's table.
// A tenant opened again from the overview, after its page was left for
// it, gets its page drawn (not the overview kept, with an error). And the
// error of a page's reads that fail after it was left stays off the page
// opened since.
func TestConsoleReloadOfThePageLeft(t *testing.T) {
	cw := startConsoleWorker(t)
	ctx := newBrowser(t)
	run(t, ctx, "open a tenant", chromedp.Navigate(cw.url+"/#/tenant/acme-03"))
	waitJS(t, ctx, 10*time.Second, `document.getElementById('live').classList.contains('on') && document.querySelector('#timeline tbody').dataset.loaded`)
	eval(t, ctx, holdReloads, nil)

	// acme-03 changes while its page is open: its reload is scheduled.
	cw.postRestate(t, "acme-03", "running", time.Now(), 0, "")
	waitJS(t, ctx, 10*time.Second, `window.__held.size > 0`)
	// The operator opens acme-02 before the reload fires.
	eval(t, ctx, `location.hash = '#/tenant/acme-02'; true`, nil)
	stays := `document.getElementById('tenant-id').textContent === 'acme-02' && document.getElementById('tenant-error').textContent === 'quota exceeded in region acme-02'`
	waitJS(t, ctx, 10*time.Second, stays)
	eval(t, ctx, runHeld, nil) // what is still held: none, or a reload that must see it is late
	stillThere(t, ctx, stays, "acme-02's page after acme-03's reload fired")

	// Back to the overview, where a new tenant schedules the table's
	// reload; the operator opens the same tenant again first.
	run(t, ctx, "open the overview", chromedp.Navigate(cw.url+"/#/"))
	waitJS(t, ctx, 10*time.Second, `document.getElementById('live').classList.contains('on') && document.querySelector('#tenants tbody') && document.querySelector('#tenants tbody').dataset.loaded`)
	eval(t, ctx, holdReloads, nil)
	cw.postSFN(t, "acme-90", "run-acme-90", "RUNNING", time.Now(), "")
	waitJS(t, ctx, 10*time.Second, `window.__held.size > 0`)
	eval(t, ctx, `location.hash = '#/tenant/acme-02'; true`, nil)
	waitJS(t, ctx, 10*time.Second, stays)
	eval(t, ctx, runHeld, nil)
	stillThere(t, ctx, stays, "acme-02's page after the overview's reload fired")

	// acme-03's page is opened while its reads hang, and left for acme-02
	// before they fail: its error is not put on acme-02's page.
	eval(t, ctx, holdFetches("/v1/tenants/acme-03"), nil)
	eval(t, ctx, `location.hash = '#/tenant/acme-03'; true`, nil)
	waitJS(t, ctx, 10*time.Second, `window.__fail.length > 0`)
	eval(t, ctx, `location.hash = '#/tenant/acme-02'; true`, nil)
	waitJS(t, ctx, 10*time.Second, stays)
	eval(t, ctx, `window.__fail.forEach((f) => f()); true`, nil)
	stillThere(t, ctx, stays+` && !document.querySelector('#main .notice')`, "acme-02's page after acme-03's reads failed")
}

// holdFetches makes the page's requests whose URL holds part hang until
// the test fails them (each rejecter is on window.__fail), as a worker
// gone away mid-request would.
func holdFetches(part string) string {
	return `(() => {
  const f0 = window.fetch.bind(window);
  window.__fail = [];
  window.fetch = (u, o) => String(u).includes(` + jsString(part) + `) ? new Promise((_, reject) => { window.__fail.push(() => reject(new TypeError("Failed to fetch"))); }) : f0(u, o);
  return true;
})()`
}

// stillThere checks that expr holds now and for the next 2 s (the time a
// reload that fired has to fetch and draw).
func stillThere(t *testing.T, ctx context.Context, expr, what string) {
	t.Helper()
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		var ok bool
		eval(t, ctx, "!!("+expr+")", &ok)
		if !ok {
			var shown string
			eval(t, ctx, `location.hash + ' shows ' + (document.getElementById('tenant-id') ? document.getElementById('tenant-id').textContent : 'no tenant')`, &shown)
			t.Fatalf("%s: no longer drawn (%s)", what, shown)
		}
	}
}
