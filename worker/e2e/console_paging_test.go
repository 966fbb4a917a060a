package e2e_test

import (
	"context"
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
// address opened anew shows the same page. Last reads the last page from
// the mirror of the order in one request, and Previous from there goes on
// backwards with the mirror's tokens, showing the pages in the order's
// own direction.
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
	var page1, page2, page3 substate.TenantPage
	workertest.GetJSON(t, cw.url+"/v1/tenants?provider=stepfunctions&limit=50", &page1)
	workertest.GetJSON(t, cw.url+"/v1/tenants?provider=stepfunctions&limit=50&pageToken="+page1.NextPageToken, &page2)
	workertest.GetJSON(t, cw.url+"/v1/tenants?provider=stepfunctions&limit=50&pageToken="+page2.NextPageToken, &page3)
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

	t.Run("Last", func(t *testing.T) { consoleLastPages(t, ctx, cw.url, [][]string{ids(page1), ids(page2), ids(page3)}) })
}

// consoleLastPages goes from page 1 of a 3-page table (want, in the
// order's direction) to the last page and back to the first with
// Previous, through the browser's history and from a shared address.
func consoleLastPages(t *testing.T, ctx context.Context, url string, want [][]string) {
	shows := func(ctx context.Context, page int, info string) {
		t.Helper()
		waitJS(t, ctx, 10*time.Second, fmt.Sprintf(`document.querySelectorAll('#tenants tbody tr').length === %d && document.getElementById('page-info').textContent.startsWith(%s)`,
			len(want[page-1]), jsString(info)))
		if got := tableIDs(t, ctxTab{ctx}); !slices.Equal(got, want[page-1]) {
			t.Fatalf("%s: %v, want %v", info, got, want[page-1])
		}
	}
	click := func(ctx context.Context, id string) {
		t.Helper()
		eval(t, ctx, `document.getElementById('`+id+`').click(); true`, nil)
	}
	waitJS(t, ctx, 5*time.Second, `!document.getElementById('last').disabled`)
	click(ctx, "last")
	shows(ctx, 3, "page 3 of 3 · 120 tenants")
	waitJS(t, ctx, 5*time.Second, `document.getElementById('last').disabled && document.getElementById('next').disabled && !document.getElementById('prev').disabled`)
	// One request of the mirror for the remainder, not a walk of the pages before.
	var asked bool
	eval(t, ctx, `performance.getEntriesByType('resource').some((e) => e.name.includes('/v1/tenants?') && e.name.includes('sort=tenantId%3Adesc') && e.name.includes('limit=20') && !e.name.includes('pageToken'))`, &asked)
	if !asked {
		t.Fatal("the last page was not read as the mirror's first 20 tenants")
	}
	var hash string
	eval(t, ctx, `location.hash`, &hash)
	if !strings.Contains(hash, "provider=stepfunctions") || !strings.Contains(hash, "fromEnd=1") {
		t.Fatalf("the address of the last page is %s, want the filter and fromEnd=1", hash)
	}
	click(ctx, "prev")
	shows(ctx, 2, "page 2 of 3")
	eval(t, ctx, `location.hash`, &hash)
	if !strings.Contains(hash, "fromEnd=2") || !strings.Contains(hash, "backToken=") {
		t.Fatalf("the address of page 2 from the end is %s, want fromEnd=2 and its token", hash)
	}
	click(ctx, "prev")
	shows(ctx, 1, "page 1 of 3")
	waitJS(t, ctx, 5*time.Second, `document.getElementById('prev').disabled && document.getElementById('first').disabled`)
	eval(t, ctx, `history.back(); true`, nil)
	shows(ctx, 2, "page 2 of 3")
	click(ctx, "next")
	shows(ctx, 3, "page 3 of 3")

	// Page 2 from the end opened anew: its Next, knowing no later token,
	// offers the last page, which is the same.
	other := newBrowser(t)
	run(t, other, "open page 2 from the end", chromedp.Navigate(url+"/"+hash))
	shows(other, 2, "page 2 of 3")
	click(other, "next")
	shows(other, 3, "page 3 of 3")

	// Another order: its mirror is another sort.
	var sorted []substate.TenantPage
	for token := ""; len(sorted) < 3; {
		var p substate.TenantPage
		workertest.GetJSON(t, url+"/v1/tenants?provider=stepfunctions&sort=updatedAt:desc&limit=50&pageToken="+token, &p)
		sorted, token = append(sorted, p), p.NextPageToken
	}
	for i, p := range sorted {
		want[i] = nil
		for _, v := range p.Tenants {
			want[i] = append(want[i], v.TenantID)
		}
	}
	run(t, other, "open the table by last update", chromedp.Navigate(url+"/#/?provider=stepfunctions&sort=updatedAt:desc"))
	shows(other, 1, "page 1 of 3 · 120 tenants")
	waitJS(t, other, 5*time.Second, `!document.getElementById('last').disabled`)
	click(other, "last")
	shows(other, 3, "page 3 of 3")
	click(other, "prev")
	shows(other, 2, "page 2 of 3")
}
