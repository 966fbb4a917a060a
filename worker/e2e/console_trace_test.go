package e2e_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// TestConsoleTraceLink: with --trace-ui-url, each transition of the
// tenant's timeline links to its trace, the history route's traceUrl.
func TestConsoleTraceLink(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	w := workertest.Start(t, func(f *worker.Flags) { f.TraceUIURL = "http://jaeger.example:16686/trace/{traceId}" })
	cw := &consoleWorker{Worker: w, url: w.HTTP.URL(), t0: time.Now().Add(-time.Hour)}
	body := sfnEvent("evt-traced", "traced-1", "run-traced-1", "RUNNING", cw.t0, time.Now(), "")
	hdr := map[string]string{"Content-Type": "application/json", "traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"}
	if code := workertest.Post(t, cw.url+"/v1/ingest/eventbridge", body, hdr); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	cw.tenantIs(t, "traced-1", substate.StateRunning)
	var hist substate.HistoryPage
	workertest.GetJSON(t, cw.url+"/v1/tenants/traced-1/history", &hist)
	if len(hist.Transitions) != 1 || hist.Transitions[0].TraceURL == "" {
		t.Fatalf("history %+v: want one transition with its trace link", hist.Transitions)
	}
	want := hist.Transitions[0].TraceURL

	ctx := newBrowser(t)
	run(t, ctx, "open the tenant", chromedp.Navigate(cw.url+"/#/tenant/traced-1"))
	waitJS(t, ctx, 10*time.Second, `document.querySelector('#timeline a.trace')`)
	var href string
	eval(t, ctx, `document.querySelector('#timeline a.trace').href`, &href)
	if href != want {
		t.Errorf("the timeline's trace link is %s, want the history's %s", href, want)
	}
}
