package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/workertest"
)

// sfnEvent is an EventBridge "Step Functions Execution Status Change" for
// tenant's execution exec, started at start, with status and (for FAILED)
// an error message.
func sfnEvent(id, tenant, exec, status string, start, at time.Time, message string) []byte {
	arn := "arn:aws:states:us-east-1:123456789012:execution:provision:" + exec
	input, _ := json.Marshal(map[string]string{"tenantId": tenant})
	detail := map[string]any{
		"executionArn": arn, "stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:provision",
		"name": exec, "status": status, "startDate": start.UnixMilli(), "input": string(input), "redriveCount": 0,
	}
	if status != "RUNNING" {
		detail["stopDate"] = at.UnixMilli()
	}
	if message != "" {
		cause, _ := json.Marshal(map[string]string{"errorMessage": message, "errorType": "ProvisioningFailed"})
		detail["error"], detail["cause"] = "ProvisioningFailed", string(cause)
	}
	b, _ := json.Marshal(map[string]any{
		"version": "0", "id": id, "detail-type": "Step Functions Execution Status Change", "source": "aws.states",
		"account": "123456789012", "time": at.UTC().Format(time.RFC3339), "region": "us-east-1",
		"resources": []string{arn}, "detail": detail,
	})
	return b
}

// consoleRestateRow is a Restate sys_invocation row of tenant (the service key).
func consoleRestateRow(id, tenant, status string, modified time.Time, retries int, failure string) []byte {
	row := map[string]any{
		"id": id, "target": "Provision/" + tenant + "/run", "target_service_name": "Provision", "target_service_key": tenant,
		"target_handler_name": "run", "target_service_ty": "workflow", "created_at": modified.Add(-time.Minute).UTC().Format(time.RFC3339Nano),
		"running_at": modified.Add(-time.Minute).UTC().Format(time.RFC3339Nano), "status": status,
		"modified_at": modified.UTC().Format(time.RFC3339Nano),
	}
	if retries > 0 {
		row["retry_count"], row["last_failure"] = retries, "[500] "+failure
	}
	b, _ := json.Marshal(row)
	return b
}

// consoleWorker is a worker with tenants to look at.
type consoleWorker struct {
	*workertest.Worker
	url string
	t0  time.Time
	n   int
}

func (cw *consoleWorker) postSFN(t *testing.T, tenant, exec, status string, at time.Time, message string) {
	t.Helper()
	cw.n++
	body := sfnEvent(fmt.Sprintf("evt-%d", cw.n), tenant, exec, status, cw.t0, at, message)
	if code := workertest.Post(t, cw.url+"/v1/ingest/eventbridge", body, map[string]string{"Content-Type": "application/json"}); code != http.StatusAccepted {
		t.Fatalf("ingest %s %s: %d", tenant, status, code)
	}
}

func (cw *consoleWorker) postRestate(t *testing.T, tenant, status string, at time.Time, retries int, failure string) {
	t.Helper()
	cw.n++
	body := consoleRestateRow("inv_"+fmt.Sprint(cw.n), tenant, status, at, retries, failure)
	hdr := map[string]string{"Content-Type": "application/json", "webhook-id": fmt.Sprintf("msg_%d", cw.n)}
	if code := workertest.Post(t, cw.url+"/v1/ingest/restate", body, hdr); code != http.StatusAccepted {
		t.Fatalf("ingest restate %s %s: %d", tenant, status, code)
	}
}

// tenantIs waits until the view shows tenant in sub-state s.
func (cw *consoleWorker) tenantIs(t *testing.T, tenant string, s substate.SubState) {
	t.Helper()
	workertest.WaitView(t, cw.url, tenant, func(v substate.TenantView) bool { return v.WorkflowSubState == s })
}

// startConsoleWorker starts a worker holding a mix of tenants: Step
// Functions runs in every state, Restate runs backing off with retries.
func startConsoleWorker(t *testing.T) *consoleWorker {
	w := workertest.Start(t)
	cw := &consoleWorker{Worker: w, url: w.HTTP.URL(), t0: time.Now().Add(-time.Hour).Truncate(time.Second)}
	for i := range 12 {
		tenant := fmt.Sprintf("acme-%02d", i)
		at := cw.t0.Add(time.Duration(i) * time.Minute)
		switch i % 4 {
		case 0:
			cw.postSFN(t, tenant, "run-"+tenant, "RUNNING", at, "")
		case 1:
			cw.postSFN(t, tenant, "run-"+tenant, "SUCCEEDED", at, "")
		case 2:
			cw.postSFN(t, tenant, "run-"+tenant, "FAILED", at, "quota exceeded in region "+tenant)
		case 3:
			cw.postRestate(t, tenant, "backing-off", at, i%5+1, "database unreachable")
		}
	}
	for i := range 4 {
		cw.postRestate(t, fmt.Sprintf("globex-%d", i), "running", cw.t0.Add(time.Duration(i)*time.Second), 0, "")
	}
	workertest.Eventually(t, func() string {
		var page substate.TenantPage
		if workertest.GetJSON(t, cw.url+"/v1/tenants?limit=100", &page); len(page.Tenants) != 16 {
			return fmt.Sprintf("%d tenants in the view, want 16", len(page.Tenants))
		}
		return ""
	})
	return cw
}

// openConsole opens the console at path#hash and waits for its table.
func openConsole(t *testing.T, cw *consoleWorker, hash string) ctxTab {
	t.Helper()
	ctx := newBrowser(t)
	run(t, ctx, "open console", chromedp.Navigate(cw.url+"/"+hash))
	waitJS(t, ctx, 10*time.Second, `document.querySelector('#tenants tbody') && document.querySelector('#tenants tbody').dataset.loaded`)
	waitJS(t, ctx, 10*time.Second, `document.getElementById('live').classList.contains('on')`)
	return ctxTab{ctx}
}

func TestConsoleLiveChange(t *testing.T) {
	cw := startConsoleWorker(t)
	tab := openConsole(t, cw, "#/?sort=updatedAt:desc")
	ctx := tab.ctx
	eval(t, ctx, `window.__notReloaded = true`, nil)
	// The counts load when the live stream opens, a moment after it shows
	// "on": wait for them before reading.
	waitJS(t, ctx, 10*time.Second, `(() => { const n = (s) => { const c = document.querySelector('#chips .chip[data-s="' + s + '"] .n'); return c ? Number(c.textContent) : -1; }; return n('running') === 7 && n('failed') === 3; })()`)
	var before map[string]int
	eval(t, ctx, `Object.fromEntries([...document.querySelectorAll('#chips .chip')].map(c => [c.dataset.s, Number(c.querySelector('.n').textContent)]))`, &before)
	if before["running"] != 7 || before["failed"] != 3 {
		t.Fatalf("counts before: %v, want running 7, failed 3", before)
	}

	// acme-00 is running; its run fails now, through the ingress.
	start := time.Now()
	cw.postSFN(t, "acme-00", "run-acme-00", "FAILED", time.Now(), "disk full on node 7")
	row := rowSel("acme-00")
	took := waitJS(t, ctx, 10*time.Second, row+`.querySelector('.sub').textContent === 'failed' && `+row+`.querySelector('.err').textContent === 'disk full on node 7'`)
	waitJS(t, ctx, 10*time.Second, `document.querySelector('#chips .chip[data-s=failed] .n').textContent === '4' && document.querySelector('#chips .chip[data-s=running] .n').textContent === '6'`)
	t.Logf("the row changed %s after the ingest was posted (%s after the post returned)", time.Since(start).Round(time.Millisecond), took.Round(time.Millisecond))
	var still bool
	eval(t, ctx, `window.__notReloaded === true`, &still)
	if !still {
		t.Fatal("the page reloaded")
	}

	// A new tenant appears in a table sorted by last update without a reload.
	cw.postSFN(t, "initech", "run-initech", "RUNNING", time.Now(), "")
	waitJS(t, ctx, 10*time.Second, `document.querySelector('#tenants tbody tr') && document.querySelector('#tenants tbody tr').dataset.id === 'initech'`)
	waitJS(t, ctx, 10*time.Second, `document.querySelector('#chips .chip[data-s=running] .n').textContent === '7'`)

	dir := t.TempDir()
	screenshot(t, ctx, dir, "overview.png", "")
	screenshot(t, ctx, dir, "table.png", "#tenants")
	if d := os.Getenv("SUBSTATE_CONSOLE_SCREENSHOT_DIR"); d != "" {
		screenshot(t, ctx, d, "console-overview.png", "")
	}
	t.Logf("screenshots in %s", dir)
}

// tableIDs are the tenant ids of the table's rows, in order.
func tableIDs(t *testing.T, ctx ctxTab) []string {
	t.Helper()
	var ids []string
	eval(t, ctx.ctx, `[...document.querySelectorAll('#tenants tbody tr')].map(r => r.dataset.id)`, &ids)
	return ids
}

func apiIDs(t *testing.T, base, query string) []string {
	t.Helper()
	var page substate.TenantPage
	if code := workertest.GetJSON(t, base+"/v1/tenants?"+query+"&limit=50", &page); code != 200 {
		t.Fatalf("GET /v1/tenants?%s: %d", query, code)
	}
	ids := []string{}
	for _, v := range page.Tenants {
		ids = append(ids, v.TenantID)
	}
	return ids
}

func TestConsoleFiltersMatchTheAPI(t *testing.T) {
	cw := startConsoleWorker(t)
	tab := openConsole(t, cw, "")
	for _, q := range []string{
		"", "subState=failed", "subState=backing-off", "hasError=true", "minRetryCount=3", "provider=restate",
		"provider=stepfunctions", "tenantPrefix=glob", "tenantPrefix=acme-1", "sort=retryCount:desc", "sort=updatedAt:desc",
		"subState=running&provider=restate&tenantPrefix=globex", "hasError=true&sort=updatedAt:desc", "minRetryCount=2&sort=retryCount:desc",
		"subState=succeeded&hasError=true",
	} {
		t.Run(strings.NewReplacer("&", ",", "=", ":").Replace(cmpOr(q, "all")), func(t *testing.T) {
			eval(t, tab.ctx, `document.querySelector('#tenants tbody').dataset.loaded = ''`, nil)
			run(t, tab.ctx, "navigate", chromedp.Navigate(cw.url+"/#/?"+q))
			waitJS(t, tab.ctx, 10*time.Second, `document.querySelector('#tenants tbody') && document.querySelector('#tenants tbody').dataset.loaded`)
			got, want := tableIDs(t, tab), apiIDs(t, cw.url, q)
			if !slices.Equal(got, want) {
				t.Errorf("table %v\nAPI   %v", got, want)
			}
		})
	}
	// The form builds the same query as a URL does: pick failed, then sort
	// by retry count.
	t.Run("Form", func(t *testing.T) {
		run(t, tab.ctx, "navigate", chromedp.Navigate(cw.url+"/#/"))
		waitJS(t, tab.ctx, 10*time.Second, `document.querySelector('#tenants tbody') && document.querySelector('#tenants tbody').dataset.loaded`)
		eval(t, tab.ctx, `document.querySelector('#tenants tbody').dataset.loaded = ''`, nil)
		eval(t, tab.ctx, `(() => { const s = document.getElementById('f-provider'); s.value = 'restate'; s.dispatchEvent(new Event('change', {bubbles: true})); return true })()`, nil)
		waitJS(t, tab.ctx, 10*time.Second, `location.hash === '#/?provider=restate' && document.querySelector('#tenants tbody').dataset.loaded`)
		if got, want := tableIDs(t, tab), apiIDs(t, cw.url, "provider=restate"); !slices.Equal(got, want) || len(got) == 0 {
			t.Errorf("table %v\nAPI   %v", got, want)
		}
		eval(t, tab.ctx, `document.querySelector('#tenants tbody').dataset.loaded = ''`, nil)
		eval(t, tab.ctx, `document.querySelector('#chips .chip[data-s=running]').click()`, nil)
		waitJS(t, tab.ctx, 10*time.Second, `location.hash.includes('subState=running') && document.querySelector('#tenants tbody').dataset.loaded`)
		if got, want := tableIDs(t, tab), apiIDs(t, cw.url, "provider=restate&subState=running"); !slices.Equal(got, want) || len(got) != 4 {
			t.Errorf("after the running chip: table %v\nAPI   %v", got, want)
		}
	})
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ctxTab is a browser tab.
type ctxTab struct{ ctx context.Context }

func TestConsoleTenantTimelineAfterOutOfOrderDelivery(t *testing.T) {
	cw := startConsoleWorker(t)
	// A redriven execution's events arrive newest first: FAILED, then the
	// RUNNING that preceded it, then a second failure with another cause.
	t1 := cw.t0.Add(10 * time.Minute)
	cw.postSFN(t, "umbrella", "run-u", "FAILED", t1.Add(2*time.Minute), "certificate expired")
	cw.tenantIs(t, "umbrella", substate.StateFailed)
	cw.postSFN(t, "umbrella", "run-u", "RUNNING", t1, "")
	workertest.Eventually(t, func() string {
		var h substate.HistoryPage
		if workertest.GetJSON(t, cw.url+"/v1/tenants/umbrella/history", &h); len(h.Transitions) != 2 {
			return fmt.Sprintf("%d transitions, want 2", len(h.Transitions))
		}
		return ""
	})
	ctx := newBrowser(t)
	run(t, ctx, "open tenant", chromedp.Navigate(cw.url+"/#/tenant/umbrella"))
	waitJS(t, ctx, 10*time.Second, `document.querySelector('#timeline tbody') && document.querySelector('#timeline tbody').dataset.loaded`)
	var rows []struct {
		Seq     string `json:"seq"`
		Outcome string `json:"outcome"`
		Sub     string `json:"sub"`
	}
	eval(t, ctx, `[...document.querySelectorAll('#timeline tbody tr')].map(r => ({seq: r.dataset.seq, outcome: r.dataset.outcome, sub: r.querySelector('.sub').textContent}))`, &rows)
	var h substate.HistoryPage
	workertest.GetJSON(t, cw.url+"/v1/tenants/umbrella/history", &h)
	if len(rows) != len(h.Transitions) {
		t.Fatalf("timeline %v, history %v", rows, h.Transitions)
	}
	for i, tr := range h.Transitions {
		if rows[i].Seq != fmt.Sprint(tr.Seq) || rows[i].Outcome != tr.Outcome {
			t.Errorf("row %d: %+v, want seq %d outcome %s", i, rows[i], tr.Seq, tr.Outcome)
		}
		if i > 0 && tr.Seq <= h.Transitions[i-1].Seq {
			t.Errorf("history out of order at %d", i)
		}
	}
	if !strings.HasSuffix(rows[0].Sub, "failed") || rows[1].Outcome != "stale" {
		t.Errorf("timeline %+v: want the failure applied, then the late RUNNING stale", rows)
	}
	var fields map[string]string
	eval(t, ctx, `Object.fromEntries([...document.querySelectorAll('#tenant-fields dt')].map(dt => [dt.textContent, dt.nextElementSibling.textContent]))`, &fields)
	if fields["Sub-state"] != "failed" || fields["Error"] != "certificate expired" || fields["Provider"] != "stepfunctions" || fields["Legacy status"] != "failed" {
		t.Errorf("current view fields: %v", fields)
	}
	var raw string
	eval(t, ctx, `document.querySelector('#timeline tbody tr .evidence details').dataset.path`, &raw)
	var page substate.HistoryPage
	if code := workertest.GetJSON(t, cw.url+raw, &page); code != 200 || len(page.Transitions) != 1 || page.Transitions[0].Raw == nil {
		t.Errorf("evidence link %s: HTTP %d, %+v", raw, code, page)
	}
	screenshot(t, ctx, t.TempDir(), "tenant.png", "")
}

func TestConsoleShowsHostileTextAsText(t *testing.T) {
	cw := startConsoleWorker(t)
	id := `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">`
	msg := `<b>bold</b><script>window.__pwned=3</script><a href="javascript:alert(1)">click</a>`
	cw.postSFN(t, id, "run-x", "FAILED", time.Now(), msg)
	cw.tenantIs(t, id, substate.StateFailed)
	tab := openConsole(t, cw, "#/?hasError=true")
	ctx := tab.ctx
	row := rowSel(id)
	waitJS(t, ctx, 10*time.Second, row)
	var got struct {
		ID, Err          string
		Elements, Pwned  int
		TenantH1, TenErr string
	}
	eval(t, ctx, `({ID: `+row+`.querySelector('.id').textContent, Err: `+row+`.querySelector('.err').textContent,
		Elements: document.querySelectorAll('#tenants tbody script, #tenants tbody img, #tenants tbody b').length,
		Pwned: window.__pwned || 0})`, &got)
	if got.ID != id || got.Err != msg || got.Elements != 0 || got.Pwned != 0 {
		t.Fatalf("table: %+v", got)
	}
	eval(t, ctx, row+`.querySelector('.id a').click()`, nil)
	waitJS(t, ctx, 10*time.Second, `document.querySelector('#timeline tbody') && document.querySelector('#timeline tbody').dataset.loaded`)
	eval(t, ctx, `({TenantH1: document.getElementById('tenant-id').textContent, TenErr: document.getElementById('tenant-error').textContent,
		Elements: document.querySelectorAll('main script, main img, main b').length, Pwned: window.__pwned || 0})`, &got)
	if got.TenantH1 != id || got.TenErr != msg || got.Elements != 0 || got.Pwned != 0 {
		t.Fatalf("tenant page: %+v", got)
	}
}

func TestConsoleLayout(t *testing.T) {
	cw := startConsoleWorker(t)
	tab := openConsole(t, cw, "")
	ctx := tab.ctx
	dir := t.TempDir()
	// A phone: nothing wider than the screen but the table, which scrolls
	// in its own box.
	run(t, ctx, "phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	var width int
	eval(t, ctx, `document.documentElement.scrollWidth`, &width)
	if width > 390 {
		t.Errorf("at phone width the page is %d px wide", width)
	}
	screenshot(t, ctx, dir, "phone.png", "")
	// Dark mode follows the system's preference.
	run(t, ctx, "desktop", chromedp.EmulateViewport(1280, 800))
	var light, dark string
	eval(t, ctx, `getComputedStyle(document.body).backgroundColor`, &light)
	run(t, ctx, "dark", emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}))
	eval(t, ctx, `getComputedStyle(document.body).backgroundColor`, &dark)
	if light == dark {
		t.Errorf("same background in light and dark mode: %s", light)
	}
	screenshot(t, ctx, dir, "dark.png", "")
	if d := os.Getenv("SUBSTATE_CONSOLE_SCREENSHOT_DIR"); d != "" {
		screenshot(t, ctx, d, "console-dark.png", "")
	}
	t.Logf("screenshots in %s", filepath.Clean(dir))
}
