package e2e_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// TestWorkerEndToEnd is the README's story in the worker: the failed
// example reaches the view; the late RUNNING event, older than FAILED, is
// stale and leaves the tenant failed; the projector's metrics say so on
// /metrics; the queries and the events stream show it.
func TestWorkerEndToEnd(t *testing.T) {
	w := workertest.Start(t)
	url := w.HTTP.URL()
	if code := workertest.PostFile(t, url+"/v1/ingest/eventbridge", workertest.ExamplePath(t, "stepfunctions-failed.json"), nil); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	workertest.Eventually(t, func() string {
		var v substate.TenantView
		if code := workertest.GetJSON(t, url+"/v1/tenants/acme", &v); code != http.StatusOK || v.WorkflowSubState != substate.StateFailed {
			return fmt.Sprintf("acme: %d %+v", code, v)
		}
		return ""
	})
	if code := workertest.PostFile(t, url+"/v1/ingest/eventbridge", workertest.ExamplePath(t, "stepfunctions-running.json"), nil); code != http.StatusAccepted {
		t.Fatalf("ingest running: %d", code)
	}
	workertest.Eventually(t, func() string {
		if n := w.Metrics.Stale; testutil.ToFloat64(n) != 1 {
			return fmt.Sprintf("stale events: %v, want 1", testutil.ToFloat64(n))
		}
		return ""
	})
	// One change, one stale event, one write transaction: the projector's
	// metrics say so on /metrics (the lag gauges once first measured).
	workertest.Eventually(t, func() string {
		_, metrics := workertest.Get(t, url+"/metrics")
		for _, want := range []string{
			"substate_view_applied_total 1\n", "substate_view_unchanged_total 0\n", "substate_view_stale_total 1\n",
			"substate_view_commits_total 1\n", `substate_batch_size_count{stage="project"} `,
			`substate_consumer_lag{consumer="substate-projector"} `, `substate_consumer_lag{consumer="substate-normalizer"} `,
		} {
			if !strings.Contains(metrics, want) {
				return "/metrics lacks " + want
			}
		}
		return ""
	})
	var page substate.TenantPage
	if code := workertest.GetJSON(t, url+"/v1/tenants?hasError=true", &page); code != http.StatusOK || len(page.Tenants) != 1 ||
		page.Tenants[0].TenantID != "acme" || page.Tenants[0].WorkflowErrorMessage != "payment provider returned HTTP 503" {
		t.Fatalf("tenants with an error: %d %+v", code, page)
	}
	if code := workertest.GetJSON(t, url+"/v1/tenants?subState=running", &page); code != http.StatusOK || len(page.Tenants) != 0 {
		t.Fatalf("running tenants: %d %+v", code, page)
	}
	events := bustest.Msgs(t, w.Bus.JetStream, substate.StreamEvents)
	if len(events) != 2 || !strings.Contains(string(events[0].Data), `"tenantId":"acme"`) || !strings.Contains(string(events[0].Data), `"subState":"failed"`) {
		t.Fatalf("%s holds %d events, the first %s", substate.StreamEvents, len(events), events[0].Data)
	}
	if code, body := workertest.Get(t, url+"/v1/tenants/nobody"); code != http.StatusNotFound {
		t.Fatalf("unknown tenant: %d %s", code, body)
	}
}

// The fault of the first reproduction: a protocol line over the
// server's 4 KB limit makes nats-server refuse it and close the client's
// connection, for good. The worker stops with an error saying so (which
// "substate run" exits non-zero with, on one line) instead of idling (or
// stopping cleanly) without a connection.
func TestRunExitsNonZeroWhenNATSConnectionCloses(t *testing.T) {
	w := workertest.Start(t)
	_ = w.Bus.Conn.Publish("substate."+strings.Repeat("a", 5000), nil)
	err := w.Wait(t)
	if err == nil || !strings.Contains(err.Error(), "nats connection closed") || !strings.Contains(strings.ToLower(err.Error()), "maximum control line exceeded") {
		t.Fatalf("the worker stopped with %v; want the closed connection and why", err)
	}
}

// A part of the worker a flag turns off is left out of the run group, not
// run and returned at once: that would read as a part stopping on its own
// and end the worker (--evidence-check-interval 0, "never", did).
func TestRunWithPartsOff(t *testing.T) {
	w := workertest.Start(t, func(f *worker.Flags) {
		f.EvidenceCheckInterval, f.IngestMaxBacklog, f.IngestMaxInFlight, f.SFNReconcile = 0, 0, 0, "off"
	})
	select {
	case <-w.Done():
		t.Fatalf("the worker stopped with its optional parts off: %v", w.Err())
	case <-time.After(2 * time.Second):
	}
	if err := w.Ready(); err != nil {
		t.Errorf("not ready: %v", err)
	}
}

// A worker on a non-loopback address starts with both ingest credentials
// and read-API keys, and lets no anonymous reader in; with nothing to read
// on --http-addr (the ingest role, /metrics elsewhere) ingest credentials
// are enough. Without them "substate run" refuses to start
// (TestRunRefusesExposedHTTP in cmd/substate).
func TestExposedHTTPWithCredentials(t *testing.T) {
	readKey := "reader read * sha256:" + workertest.KeyHash("k")
	t.Run("OK", func(t *testing.T) {
		w := workertest.Start(t, func(f *worker.Flags) { f.HTTPAddr, f.IngestAPIKey, f.APIKeys = "0.0.0.0:0", "i", readKey })
		if w.Auth.AllowAnonymous {
			t.Fatal("an exposed worker lets anonymous readers in")
		}
	})
	t.Run("IngestRoleWithMetricsElsewhere", func(t *testing.T) {
		workertest.Start(t, func(f *worker.Flags) {
			f.HTTPAddr, f.Role, f.IngestAPIKey, f.MetricsAddr = "0.0.0.0:0", worker.RoleIngest, "i", "127.0.0.1:0"
		})
	})
}
