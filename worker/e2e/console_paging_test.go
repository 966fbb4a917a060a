package e2e_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/workertest"
)

// TestConsolePaging: the table pages forward and back through 120 tenants
// with the total and the number of pages; the filter and the page are in
// the address, so the back button returns to the page before and an
// address opened anew shows the same page.
func TestConsolePaging(t *testing.T) {
	w := workertest.Start(t)
	cw := &consoleWorker{Worker: w, url: w.HTTP.URL(), t0: time.Now().Add(-time.Hour).Truncate(time.Second)}
	var events []string
	for i := range 120 {
		tenant := fmt.Sprintf("page-%03d", i)
		events = append(events, string(sfnEvent("evt-"+tenant, tenant, "run-"+tenant, "RUNNING", cw.t0, cw.t0, "")))
	}
	if code := workertest.Post(t, cw.url+"/v1/ingest/eventbridge", []byte("["+strings.Join(events, ",")+"]"), map[string]string{"Content-Type": "application/json"}); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	workertest.Eventually(t, func() string {
		var c struct{ Counts map[string]int64 }
		if workertest.GetJSON(t, cw.url+"/console/api/overview", &c); c.Counts[string(substate.StateRunning)] != 120 {
			return fmt.Sprintf("counts %v", c.Counts)
		}
		return ""
	})
	var page1, page2 substate.TenantPage
	workertest.GetJSON(t, cw.url+"/v1/tenants?provider=stepfunctions&limit=50", &page1)
	workertest.GetJSON(t, cw.url+"/v1/tenants?provider=stepfunctions&limit=50&pageToken="+page1.NextPageToken, &page2)
	ids := func(p substate.TenantPage) []string {
		var out []string
		for _, v := range p.Tenants {
			out = append(out, v.TenantID)
		}
		return out
	}

	ctx := newBrowser(t)
	tab := ctxTab{ctx}
	loaded := func(n int, info string) {
		t.Helper()
		waitJS(t, ctx, 10*time.Second, fmt.Sprintf(`document.querySelectorAll('#tenants tbody tr').length === %d && document.getElementById('page-info').textContent.startsWith(%s)`, n, jsString(info)))
	}
	run(t, ctx, "open the console", chromedp.Navigate(cw.url+"/#/?provider=stepfunctions"))
	loaded(50, "page 1 of 3 · 120 tenants")
	if got := tableIDs(t, tab); !slices.Equal(got, ids(page1)) {
		t.Fatalf("page 1 %v, want %v", got, ids(page1))
	}
	eval(t, ctx, `document.getElementById('next').click(); true`, nil)
	loaded(50, "page 2 of 3")
	if got := tableIDs(t, tab); !slices.Equal(got, ids(page2)) {
		t.Fatalf("page 2 %v, want %v", got, ids(page2))
	}
	var hash string
	eval(t, ctx, `location.hash`, &hash)
	if !strings.Contains(hash, "provider=stepfunctions") || !strings.Contains(hash, "page=2") || !strings.Contains(hash, "pageToken=") {
		t.Fatalf("the address of page 2 is %s, want the filter, the page and its token", hash)
	}
	eval(t, ctx, `document.getElementById('next').click(); true`, nil)
	loaded(20, "page 3 of 3")
	waitJS(t, ctx, 5*time.Second, `document.getElementById('next').disabled`)
	eval(t, ctx, `history.back(); true`, nil)
	loaded(50, "page 2 of 3")
	eval(t, ctx, `document.getElementById('prev').click(); true`, nil)
	loaded(50, "page 1 of 3")
	if got := tableIDs(t, tab); !slices.Equal(got, ids(page1)) {
		t.Fatalf("back on page 1: %v", got)
	}
	waitJS(t, ctx, 5*time.Second, `document.getElementById('prev').disabled`)

	// The address of page 2, opened in a new tab.
	other := newBrowser(t)
	run(t, other, "open page 2's address", chromedp.Navigate(cw.url+"/"+hash))
	waitJS(t, other, 10*time.Second, `document.querySelectorAll('#tenants tbody tr').length === 50 && document.getElementById('page-info').textContent.startsWith('page 2 of 3')`)
	if got := tableIDs(t, ctxTab{other}); !slices.Equal(got, ids(page2)) {
		t.Fatalf("page 2 opened from its address: %v", got)
	}
	eval(t, other, `document.getElementById('prev').click(); true`, nil)
	waitJS(t, other, 10*time.Second, `document.getElementById('page-info').textContent.startsWith('page 1 of 3')`)
}
