package e2e_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// TestConsoleWithKeys is the console of a worker that has read-API keys,
// as every worker off loopback must: the page opens without a key (a
// browser cannot send one with a navigation), its data is refused until
// the operator enters a key with the Key button, and then the table, the
// live stream (whose key travels in a cookie), a transition's raw
// evidence (redacted for a read:raw key) and a long history's next page
// all work.
func TestConsoleWithKeys(t *testing.T) {
	const key = "viewer-key-0123456789abcdef0123456789"
	w := workertest.Start(t, func(f *worker.Flags) { f.APIKeys = "viewer read,read:raw * sha256:" + workertest.KeyHash(key) })
	cw := &consoleWorker{Worker: w, url: w.HTTP.URL(), t0: time.Now().Add(-time.Hour).Truncate(time.Second)}
	post := func(status, message string) {
		t.Helper()
		cw.n++
		body := string(sfnEvent(fmt.Sprintf("evt-%d", cw.n), "acme-1", "run-acme-1", status, cw.t0, time.Now(), message))
		body = strings.Replace(body, `{\"tenantId\":\"acme-1\"}`, `{\"tenantId\":\"acme-1\",\"password\":\"hunter2\"}`, 1)
		if code := workertest.Post(t, cw.url+"/v1/ingest/eventbridge", []byte(body), map[string]string{"Content-Type": "application/json"}); code != http.StatusAccepted {
			t.Fatalf("ingest %s: %d", status, code)
		}
	}
	post("RUNNING", "")
	workertest.Eventually(t, func() string {
		if code, _, body := workertest.APIGet(t, cw.url+"/v1/tenants/acme-1", key); code != 200 || !strings.Contains(body, `"running"`) {
			return fmt.Sprintf("acme-1: %d %s", code, body)
		}
		return ""
	})

	ctx := newBrowser(t)
	run(t, ctx, "open the console without a key", chromedp.Navigate(cw.url+"/"))
	waitJS(t, ctx, 10*time.Second, `document.getElementById('table-note') && document.getElementById('table-note').textContent.includes('unauthorized')`)

	eval(t, ctx, `window.prompt = () => `+strconv.Quote(key)+`; document.getElementById('key-button').click(); true`, nil)
	waitJS(t, ctx, 10*time.Second, rowSel("acme-1")+` && `+rowSel("acme-1")+`.querySelector('.sub').textContent === 'running'`)
	waitJS(t, ctx, 10*time.Second, `document.getElementById('live').classList.contains('on')`)

	post("FAILED", "card declined")
	waitJS(t, ctx, 10*time.Second, rowSel("acme-1")+`.querySelector('.sub').textContent === 'failed' && `+rowSel("acme-1")+`.querySelector('.err').textContent === 'card declined'`)

	run(t, ctx, "open the tenant", chromedp.Navigate(cw.url+"/#/tenant/acme-1"))
	waitJS(t, ctx, 10*time.Second, `document.querySelector('#timeline tbody') && document.querySelector('#timeline tbody').dataset.loaded && document.querySelectorAll('#timeline tbody tr').length === 2`)
	eval(t, ctx, `document.querySelector('#timeline tbody tr .evidence summary').click(); true`, nil)
	waitJS(t, ctx, 10*time.Second, `document.querySelector('#timeline tbody tr .evidence details').dataset.loaded === 'ok'`)
	var raw string
	eval(t, ctx, `document.querySelector('#timeline tbody tr .evidence pre').textContent`, &raw)
	if !strings.Contains(raw, "[redacted]") || strings.Contains(raw, "hunter2") || !strings.Contains(raw, "run-acme-1") {
		t.Fatalf("the raw evidence a read:raw key sees:\n%s", raw)
	}

	// A history longer than the page's first 1,000: the rest is fetched
	// with the key too.
	for batch := range 2 {
		var events []string
		for i := range 500 {
			events = append(events, string(sfnEvent(fmt.Sprintf("late-%d-%d", batch, i), "acme-1", "run-acme-1", "RUNNING", cw.t0, cw.t0, "")))
		}
		if code := workertest.Post(t, cw.url+"/v1/ingest/eventbridge", []byte("["+strings.Join(events, ",")+"]"), map[string]string{"Content-Type": "application/json"}); code != http.StatusAccepted {
			t.Fatalf("ingest a batch: %d", code)
		}
	}
	workertest.Eventually(t, func() string {
		if code, _, body := workertest.APIGet(t, cw.url+"/v1/tenants/acme-1/history?limit=2000", key); code != 200 || strings.Count(body, `"outcome"`) != 1002 {
			return fmt.Sprintf("history: %d, %d transitions", code, strings.Count(body, `"outcome"`))
		}
		return ""
	})
	run(t, ctx, "open the long history", chromedp.Navigate(cw.url+"/?again#/tenant/acme-1"))
	waitJS(t, ctx, 10*time.Second, `document.querySelectorAll('#timeline tbody tr').length === 1000 && document.getElementById('more-transitions')`)
	eval(t, ctx, `document.getElementById('more-transitions').click(); true`, nil)
	waitJS(t, ctx, 10*time.Second, `document.querySelectorAll('#timeline tbody tr').length === 1002 && !document.getElementById('more-transitions')`)
}

// TestConsoleButtonsPerKey: the console shows a control only to a key the
// server would let use it. Each kind of key opens the dead-letter page, the
// table and a tenant's page of one worker: only admin sees Requeue, the
// "all N matching" actions and a tenant's Retry / Stop / Restart (a read
// or read:raw key would get 403), and the header names the key and its
// scope. The anonymous loopback caller is TestConsoleDeadLetters' (no
// Requeue) and TestConsoleFleetRetry's (the actions).
func TestConsoleButtonsPerKey(t *testing.T) {
	keys := map[string]string{
		"admin":    "admin-key-0123456789abcdef0123456789",
		"read:raw": "raw-key-0123456789abcdef0123456789ab",
		"read":     "read-key-0123456789abcdef0123456789a",
	}
	w := workertest.Start(t, func(f *worker.Flags) {
		f.APIKeys = "ops admin * sha256:" + workertest.KeyHash(keys["admin"]) +
			"; portal read:raw * sha256:" + workertest.KeyHash(keys["read:raw"]) +
			"; dash read * sha256:" + workertest.KeyHash(keys["read"])
	})
	cw := &consoleWorker{Worker: w, url: w.HTTP.URL(), t0: time.Now().Add(-time.Hour)}
	body := sfnEvent("evt-lost", "", "lost-run", "FAILED", cw.t0, time.Now(), "no tenant")
	if code := workertest.Post(t, cw.url+"/v1/ingest/eventbridge", body, map[string]string{"Content-Type": "application/json"}); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	cw.t0 = cw.t0.Truncate(time.Second)
	if code := workertest.Post(t, cw.url+"/v1/ingest/eventbridge", sfnEvent("evt-acme", "acme-1", "run-acme-1", "FAILED", cw.t0, time.Now(), "card declined"),
		map[string]string{"Content-Type": "application/json"}); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	workertest.Eventually(t, func() string {
		if code, _, body := workertest.APIGet(t, cw.url+"/v1/tenants/acme-1", keys["read"]); code != 200 || !strings.Contains(body, `"failed"`) {
			return fmt.Sprintf("acme-1: %d %s", code, body)
		}
		if code, _, body := workertest.APIGet(t, cw.url+"/console/api/deadletters", keys["read"]); code != 200 || !strings.Contains(body, `"rawSeq"`) {
			return fmt.Sprintf("dead letters: %d %s", code, body)
		}
		return ""
	})
	tests := []struct {
		scope, name string
		requeue     bool
	}{
		{"admin", "ops", true},
		{"read:raw", "portal", false},
		{"read", "dash", false},
	}
	ctx := newBrowser(t)
	for i, tt := range tests {
		t.Run(tt.scope, func(t *testing.T) {
			run(t, ctx, "open the dead letters", chromedp.Navigate(fmt.Sprintf("%s/?k=%d#/deadletters", cw.url, i)))
			eval(t, ctx, `window.prompt = () => `+strconv.Quote(keys[tt.scope])+`; document.getElementById('key-button').click(); true`, nil)
			waitJS(t, ctx, 10*time.Second, `document.body.dataset.scope === `+strconv.Quote(tt.scope)+` && document.querySelectorAll('#deadletters tbody tr').length === 1`)
			var got struct {
				Who     string
				Buttons int
			}
			eval(t, ctx, `({Who: document.getElementById('who').textContent, Buttons: document.querySelectorAll('#deadletters button.requeue').length})`, &got)
			if want := tt.name + " · " + tt.scope; got.Who != want {
				t.Errorf("header says %q, want %q", got.Who, want)
			}
			if shown := got.Buttons == 1; shown != tt.requeue {
				t.Errorf("requeue button shown: %v, want %v", shown, tt.requeue)
			}

			run(t, ctx, "open the table", chromedp.Navigate(fmt.Sprintf("%s/?k=%d#/?hasError=true", cw.url, i)))
			waitJS(t, ctx, 10*time.Second, `document.getElementById('match-total') && document.getElementById('match-total').dataset.total === '1'`)
			var fleet int
			eval(t, ctx, `document.querySelectorAll('#select-all button').length`, &fleet)
			if shown := fleet == 3; shown != tt.requeue || (fleet != 0 && fleet != 3) {
				t.Errorf("%d \"all matching\" buttons, want them (3) only for admin", fleet)
			}
			run(t, ctx, "open the tenant", chromedp.Navigate(fmt.Sprintf("%s/?k=%d#/tenant/acme-1", cw.url, i)))
			waitJS(t, ctx, 10*time.Second, `document.querySelector('#timeline tbody') && document.querySelector('#timeline tbody').dataset.loaded`)
			var acts int
			eval(t, ctx, `document.querySelectorAll('#tenant-actions button').length`, &acts)
			if shown := acts == 3; shown != tt.requeue || (acts != 0 && acts != 3) {
				t.Errorf("%d execution buttons on the tenant page, want them (3) only for admin", acts)
			}
		})
	}
}
