package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/restatetest"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// TestRunRestateRealServer is the Restate story as a new user tries it: a
// real Restate server and a worker with only --restate-admin-url and
// --restate-services (and a short poll interval, so the test is quick); no
// webhook. A failing handler shows backing-off with Restate's own attempt
// count and message, without the stack trace, from the first sweep that
// starts after it backs off; pause, resume and success show; tenants whose
// invocation id Restate cannot parse are dead-lettered and hold up no one.
func TestRunRestateRealServer(t *testing.T) {
	rs := restatetest.Start(t)
	w := workertest.Start(t, func(f *worker.Flags) {
		f.RestateAdminURL, f.RestateServices, f.RestatePollEvery = rs.AdminURL, []string{"Provision"}, 250*time.Millisecond
	})
	url := w.HTTP.URL()

	// Two tenants whose invocation ids are not ids Restate can parse, as a
	// hand-made delivery could have left them in the view.
	pub := publishers.NewJetStream(w.Bus.JetStream)
	for tenant, id := range map[string]string{"mallory": "inv_1", "eve": "inv_1zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"} {
		row, _ := json.Marshal(map[string]any{"id": id, "target": "Provision/" + tenant + "/ok", "target_service_name": "Provision",
			"target_service_key": tenant, "status": "running", "created_at": time.Now().UTC().Format(time.RFC3339Nano),
			"modified_at": time.Now().UTC().Format(time.RFC3339Nano)})
		if err := pub.PublishRaw(context.Background(), substate.RawEvent{Kind: substate.RawRestate, ID: "seed-" + tenant, Body: row}); err != nil {
			t.Fatal(err)
		}
		workertest.WaitView(t, url, tenant, func(v substate.TenantView) bool { return v.WorkflowExecutionID == id })
	}

	t.Run("BackingOffWithinOneSweep", func(t *testing.T) {
		rs.Gate(t, "acme", "fail")
		id := rs.Send(t, "Provision", "acme", "slow", nil, 0)
		// slow waits 80 s after its third failure: the row holds still.
		row := rs.WaitRow(t, id, "backing off after 3 attempts", func(r map[string]any) bool {
			return r["status"] == "backing-off" && r["retry_count"] == 3.0
		})
		// Discovery put the invocation in the view; from then on every
		// sweep reads it by id (its modified_at no longer moves).
		workertest.WaitView(t, url, "acme", func(v substate.TenantView) bool { return v.WorkflowExecutionID == id })
		sweeps := restateSweeps(t, url)
		failure, _ := row["last_failure"].(string)
		if !strings.HasPrefix(failure, "[500 Internal] downstream unavailable (attempt 3)\n") || !strings.Contains(failure, "    at ") {
			t.Fatalf("Restate's last_failure = %q, want the message and a stack trace", failure)
		}
		// The second sweep from now started after the row backed off: it
		// must have published the row.
		workertest.Eventually(t, func() string {
			if n := restateSweeps(t, url); n < sweeps+2 {
				return fmt.Sprintf("%d sweeps since, want 2", n-sweeps)
			}
			return ""
		})
		if !rawHasRow(t, w, id, `"status":"backing-off"`, `"retry_count":3`) {
			t.Fatalf("two sweeps after invocation %s backed off, SUBSTATE_RAW has no row saying so", id)
		}
		v := workertest.WaitView(t, url, "acme", func(v substate.TenantView) bool {
			return v.WorkflowSubState == substate.StateBackingOff && v.WorkflowRetryCount >= 3
		})
		if v.WorkflowRetryCount != 3 || v.WorkflowErrorMessage != "downstream unavailable (attempt 3)" || v.WorkflowExecutionID != id {
			t.Fatalf("view %+v; want backing-off, 3 retries, the message without its stack trace", v)
		}
		// What the API answers: the message's start, on one line.
		code, body := workertest.Get(t, url+"/v1/tenants/acme")
		if code != http.StatusOK || !strings.Contains(body, `"backing-off"`) || !strings.Contains(body, "downstream unavailable (attempt 3)") || strings.Contains(body, " at ") || strings.Contains(body, `\n`) {
			t.Fatalf("GET /v1/tenants/acme: %d %s", code, body)
		}
		rs.Gate(t, "acme", "open")
		rs.Resume(t, id) // retry now instead of in 80 s
		v = workertest.WaitView(t, url, "acme", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateSucceeded })
		if v.WorkflowRetryCount != 0 || v.WorkflowErrorMessage != "" {
			t.Fatalf("succeeded: view %+v", v)
		}
	})
	t.Run("PausedResumedSucceeded", func(t *testing.T) {
		id := rs.Send(t, "Provision", "stark", "same", nil, 0)
		v := workertest.WaitView(t, url, "stark", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateError })
		if v.WorkflowRetryCount != 3 || v.WorkflowErrorMessage != "downstream unavailable" || v.ProviderState != "paused" {
			t.Fatalf("paused after 3 attempts: view %+v", v)
		}
		// Resumed with the fault still there: 3 more attempts, paused again.
		rs.Resume(t, id)
		v = workertest.WaitView(t, url, "stark", func(v substate.TenantView) bool {
			return v.WorkflowSubState == substate.StateError && v.WorkflowRetryCount >= 6
		})
		if got := rs.Attempts(t, id); v.WorkflowRetryCount != 6 || got != 6 {
			t.Fatalf("paused again: view %+v; the service saw %d attempts", v, got)
		}
		rs.Gate(t, "stark", "open")
		rs.Resume(t, id)
		workertest.WaitView(t, url, "stark", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateSucceeded })
	})
	t.Run("BogusIDsAreDeadLettered", func(t *testing.T) {
		for _, bad := range []string{"inv_1", "inv_1zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"} {
			found := false
			for _, m := range bustest.Msgs(t, w.Bus.JetStream, substate.StreamDLQ) {
				r := m.Header.Get(substate.HeaderDLQReason)
				found = found || (strings.Contains(r, "not a Restate invocation id") && strings.Contains(string(m.Data), bad))
			}
			if !found {
				t.Errorf("no dead letter names %s", bad)
			}
		}
	})
}

var sweepCount = regexp.MustCompile(`(?m)^substate_reconcile_sweep_duration_seconds_count\{poller="restate"\} (\d+)$`)

// restateSweeps returns how many Restate poller sweeps have completed, from
// the worker's /metrics.
func restateSweeps(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	m := sweepCount.FindStringSubmatch(b.String())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// rawHasRow reports whether SUBSTATE_RAW holds a Restate row of invocation
// id containing every one of parts.
func rawHasRow(t *testing.T, w *workertest.Worker, id string, parts ...string) bool {
	t.Helper()
	for _, m := range bustest.Msgs(t, w.Bus.JetStream, substate.StreamRaw) {
		if !bytes.Contains(m.Data, []byte(`"id":"`+id+`"`)) {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && bytes.Contains(m.Data, []byte(p))
		}
		if all {
			return true
		}
	}
	return false
}
