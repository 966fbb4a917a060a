package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/testkit/workertest"
)

// waitingWorkflow waits an hour: an execution that is running when the
// test looks.
const waitingWorkflow = `
name: waiting
version: "1"
startAt: nap
states:
  nap: {type: Wait, seconds: 3600, next: done}
  done: {type: Success}
`

// TestDNSRebindingRefused is DNS rebinding against the zero-configuration
// worker on loopback: a page served as evil.example, whose name its owner
// then resolves to 127.0.0.1, is the same origin as the worker to the
// browser. Its script reads every tenant, posts a forged event and stops
// a running engine execution, all same-origin, so neither CORS nor the
// cross-origin check stops it. The worker refuses each because the
// requests are addressed to evil.example (403), the streams and the
// execution are as they were, and programs that address it as localhost
// or by its IP are served as before.
func TestDNSRebindingRefused(t *testing.T) {
	ctx := context.Background()
	w := workertest.Start(t)
	ref, err := w.Engine.EnsureWorkflow(ctx, engine.Workflow{Definition: []byte(waitingWorkflow)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Engine.Start(ctx, engine.StartRequest{Workflow: ref, Name: "victim-run", TenantID: "victim", Input: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	base := w.HTTP.URL()
	workertest.Eventually(t, func() string {
		if v, err := w.View.Tenant(ctx, "victim"); err != nil || v.WorkflowSubState != substate.StateWaiting {
			return fmt.Sprintf("victim: %+v %v, want waiting", v, err)
		}
		return ""
	})
	before := streamCounts(t, w)

	u, _ := url.Parse(base)
	evil := "http://evil.example:" + u.Port()
	// Chromium resolves evil.example to 127.0.0.1, as the attacker's DNS
	// server does once the page is loaded.
	bctx := newBrowser(t, chromedp.Flag("host-resolver-rules", "MAP evil.example 127.0.0.1"))
	run(t, bctx, "open the rebound page", chromedp.Navigate(evil+"/"))
	forged := string(sfnEvent("rebound-1", "victim", "run-victim", "SUCCEEDED", time.Now(), time.Now(), ""))
	attack := `(async () => {
		const out = {};
		let r = await fetch("/v1/tenants");
		out.read = r.status; out.readBody = await r.text();
		r = await fetch("/v1/tenants/victim/execution/stop", {method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"});
		out.stop = r.status; out.stopBody = await r.text();
		r = await fetch("/v1/ingest/eventbridge", {method: "POST", headers: {"Content-Type": "application/json"}, body: ` + strconv.Quote(forged) + `});
		out.ingest = r.status;
		return JSON.stringify(out);
	})()`
	var res string
	run(t, bctx, "the rebound page's script", chromedp.Evaluate(attack, &res, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	}))
	var got struct {
		Read, Ingest, Stop int
		ReadBody, StopBody string
	}
	if err := json.Unmarshal([]byte(res), &got); err != nil {
		t.Fatalf("the page's answers %q: %v", res, err)
	}
	if got.Read != http.StatusForbidden || strings.Contains(got.ReadBody, `"victim"`) {
		t.Errorf("the rebound page read the tenants: %d %s", got.Read, got.ReadBody)
	}
	if got.Ingest != http.StatusForbidden {
		t.Errorf("the rebound page's ingest: %d, want 403", got.Ingest)
	}
	if got.Stop != http.StatusForbidden {
		t.Errorf("the rebound page's stop: %d %s, want 403", got.Stop, got.StopBody)
	}
	if !strings.Contains(got.StopBody, "--http-allowed-hosts") {
		t.Errorf("the refusal does not say what to configure: %s", got.StopBody)
	}
	if now := streamCounts(t, w); now != before {
		t.Errorf("streams %v after the rebound page's requests, want %v", now, before)
	}
	if v, err := w.View.Tenant(ctx, "victim"); err != nil || v.WorkflowSubState != substate.StateWaiting {
		t.Errorf("victim after the attack: %+v %v, want still waiting", v, err)
	}

	// Programs on the machine address it as localhost or by its IP.
	for _, addr := range []string{base, "http://localhost:" + u.Port()} {
		if code, body := workertest.Get(t, addr+"/v1/tenants/victim"); code != http.StatusOK {
			t.Errorf("GET %s: %d %s", addr, code, body)
		}
	}
}
