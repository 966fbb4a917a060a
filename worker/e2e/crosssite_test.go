package e2e_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/substatehq/substate/testkit/workertest"
)

// TestCrossSiteBrowserRequestsRefused is a web page of another origin, open
// in the operator's browser, posting to a worker on loopback without keys
// (the zero-configuration default): a forged event to the ingress and a
// stop of a tenant's execution, sent as a browser sends a form or a
// no-cors fetch, which needs no CORS permission. Both are refused, and the
// streams hold what they held; the same requests from a program (no
// browser headers) still go through.
func TestCrossSiteBrowserRequestsRefused(t *testing.T) {
	w := workertest.Start(t)
	target := w.HTTP.URL()
	before := streamCounts(t, w)

	forged := string(sfnEvent("forged-1", "victim", "run-victim", "SUCCEEDED", time.Now(), time.Now(), ""))
	evil := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(rw, `<!doctype html><title>elsewhere</title><p>a page of another origin`)
	}))
	defer evil.Close()

	ctx := newBrowser(t)
	run(t, ctx, "open the other origin's page", chromedp.Navigate(evil.URL))
	// A Blob without a type is sent without a Content-Type, so the
	// ingress's JSON check does not stop it; mode no-cors needs no CORS
	// permission to send.
	attack := `Promise.all([
		fetch(` + strconv.Quote(target+"/v1/ingest/eventbridge") + `, {method: "POST", mode: "no-cors", body: new Blob([` + strconv.Quote(forged) + `])}),
		fetch(` + strconv.Quote(target+"/v1/tenants/victim/execution/stop") + `, {method: "POST", mode: "no-cors"}),
	]).then(() => "sent")`
	var sent string
	run(t, ctx, "post from the other origin", chromedp.Evaluate(attack, &sent, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	}))
	if sent != "sent" {
		t.Fatalf("the page's requests: %q", sent)
	}
	// The ingress answers only after the raw message is stored, so a
	// request that got through is in SUBSTATE_RAW by now.
	if got := streamCounts(t, w); got != before {
		t.Fatalf("streams %v after the other origin's posts, want %v: the forged event got in", got, before)
	}

	// Without browser headers (curl, EventBridge, a program), as before.
	code := workertest.Post(t, target+"/v1/ingest/eventbridge", []byte(forged), map[string]string{"Content-Type": "application/json"})
	if code != http.StatusAccepted {
		t.Fatalf("a program's ingest: %d, want 202", code)
	}
}
