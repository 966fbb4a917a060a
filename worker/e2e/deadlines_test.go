package e2e_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/restatetest"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// writeSLOs writes an SLO file and returns its path.
func writeSLOs(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "slo.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// feedOf returns the tenant's messages on SUBSTATE_CHANGES of a kind.
func feedOf(t *testing.T, w *workertest.Worker, tenant string, kind substate.ChangeKind) []bustest.FeedChange {
	t.Helper()
	var out []bustest.FeedChange
	for _, c := range bustest.Changes(t, w.Bus.JetStream) {
		if c.Change.TenantID == tenant && c.Change.Kind == kind {
			out = append(out, c)
		}
	}
	return out
}

// waitStuck waits for the tenant's stuck message on the feed and checks
// it came no earlier than the deadline; it logs how much later.
func waitStuck(t *testing.T, w *workertest.Worker, tenant string, deadline time.Time) bustest.FeedChange {
	t.Helper()
	var got bustest.FeedChange
	workertest.Eventually(t, func() string {
		stuck := feedOf(t, w, tenant, substate.ChangeStuck)
		if len(stuck) == 0 {
			return "no stuck message for " + tenant
		}
		got = stuck[0]
		return ""
	})
	c := got.Change
	if !c.New.Stuck || !c.New.StuckSince.Equal(deadline) || c.Old.Stuck {
		t.Fatalf("stuck message %+v; want stuck since %s", c, deadline)
	}
	if got.Msg.Time.Before(deadline) {
		t.Fatalf("the stuck message was stored at %s, before the deadline %s", got.Msg.Time, deadline)
	}
	t.Logf("the stuck message was stored %s after the deadline", got.Msg.Time.Sub(deadline).Round(time.Millisecond))
	return got
}

// TestStuckStepFunctions is a Step Functions execution left backing off
// past its SLO: the reconciler's one read of its history shows it backing
// off, and after that the local AWS server hears nothing more from the
// worker, while the stuck message reaches SUBSTATE_CHANGES at the
// deadline; its end gives unstuck.
func TestStuckStepFunctions(t *testing.T) {
	srv := awstest.New(t)
	awstest.Env(t, srv.URL, awstest.Region)
	body, arn, input := runningEvent(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	var ev map[string]any
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatal(err)
	}
	ev["time"] = now.Format(time.RFC3339)
	ev["detail"].(map[string]any)["startDate"] = now.UnixMilli()
	body, _ = json.Marshal(ev)
	srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: awstest.StateMachineARN("order-fulfillment"), Name: "ord-2024-000124",
		Status: "RUNNING", Input: input, StartDate: now})
	// Cut after the task timed out: its Retry interval is running. The
	// provider's times are in the past, as the worker sees them: a tenant
	// whose last event is in the worker's future is not listed by the
	// reconciler's sweeps until it is past, and is then polled again,
	// which this test would count as a call made for the stuck tenant.
	failedAt := now.Add(-500 * time.Millisecond)
	if err := srv.SetHistory(arn, awstest.RetryHistoryAt(t, 8, failedAt)); err != nil {
		t.Fatal(err)
	}
	slos := writeSLOs(t, "workflows:\n  \"*\": {run: 1h}\n  order-fulfillment:\n    backing-off: 4s\n")
	w := workertest.Start(t, func(f *worker.Flags) {
		f.SLOFile = slos
		// One read of each running execution's history an hour: the first
		// sweep's, which finds it backing off.
		f.ReconcileInterval, f.SFNHistoryInterval, f.SFNRedriveCheck = 100*time.Millisecond, time.Hour, 0
	})
	url := w.HTTP.URL()
	if code := workertest.Post(t, url+"/v1/ingest/eventbridge", body, nil); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	v := workertest.WaitView(t, url, "acme", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateBackingOff })
	deadline := failedAt.Add(4 * time.Second)
	if !v.Deadline.Equal(deadline) || v.DeadlineSLO != substate.SLOBackingOff || v.Stuck {
		t.Fatalf("backing off: %+v; want deadline %s for backing-off", v, deadline)
	}
	if srv.TotalCalls() == 0 {
		t.Fatal("the reconciler read nothing: the view cannot have learned the execution backs off")
	}
	srv.ResetCalls()

	waitStuck(t, w, "acme", deadline)
	v = workertest.WaitView(t, url, "acme", func(v substate.TenantView) bool { return v.Stuck })
	if !v.StuckSince.Equal(deadline) || v.WorkflowSubState != substate.StateBackingOff {
		t.Fatalf("stuck: %+v", v)
	}
	time.Sleep(500 * time.Millisecond) // a call made because of it would come now
	if n := srv.TotalCalls(); n != 0 {
		t.Fatalf("the worker called the AWS API %d times while the tenant became stuck, want none", n)
	}
	code, list := workertest.Get(t, url+"/v1/tenants?stuck=true")
	if code != http.StatusOK || !strings.Contains(list, `"tenantId":"acme"`) {
		t.Fatalf("GET /v1/tenants?stuck=true: %d %s", code, list)
	}
	if _, metrics := workertest.Get(t, url+"/metrics"); !strings.Contains(metrics,
		`substate_tenants_stuck{provider="stepfunctions",sub_state="backing-off",workflow_type="order-fulfillment"} 1`) ||
		!strings.Contains(metrics, `substate_slo_events_total{outcome="missed",slo="backing-off"} 1`) {
		t.Fatalf("/metrics lacks the stuck tenant:\n%s", grepLines(metrics, "stuck", "slo_events"))
	}

	// It ends: the SUCCEEDED event moves it on.
	ev["id"], ev["time"] = "succeeded-event", time.Now().UTC().Format(time.RFC3339)
	d := ev["detail"].(map[string]any)
	d["status"], d["stopDate"] = "SUCCEEDED", time.Now().UnixMilli()
	body, _ = json.Marshal(ev)
	if code := workertest.Post(t, url+"/v1/ingest/eventbridge", body, nil); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	workertest.Eventually(t, func() string {
		if len(feedOf(t, w, "acme", substate.ChangeUnstuck)) != 1 {
			return "no unstuck message"
		}
		return ""
	})
	if v := workertest.WaitView(t, url, "acme", func(v substate.TenantView) bool { return !v.Stuck }); !v.Deadline.IsZero() {
		t.Fatalf("succeeded: %+v; want no deadline", v)
	}
}

// grepLines returns the lines of s that contain any of words.
func grepLines(s string, words ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// TestStuckRestate is a Restate invocation of the real server left backing
// off past its SLO. The worker is given Restate's admin API (through a
// proxy that counts its requests) and learns of the invocation from
// webhook deliveries: while the invocation backs off and becomes stuck,
// the worker sends Restate not one request. Resumed and done, it is
// unstuck.
func TestStuckRestate(t *testing.T) {
	rs := restatetest.Start(t)
	countingURL, calls := rs.CountingAdmin(t)
	slos := writeSLOs(t, "workflows:\n  Provision:\n    backing-off: 8s\n")
	w := workertest.Start(t, func(f *worker.Flags) {
		f.SLOFile, f.RestateWebhookSecret = slos, webhookSecret
		f.RestateAdminURL, f.RestatePollEvery, f.RestatePollAfter = countingURL, 250*time.Millisecond, time.Hour
	})
	base := w.HTTP.URL()
	deliver := func(id string, row map[string]any) {
		t.Helper()
		body, _ := json.Marshal(row)
		if code := workertest.Post(t, base+"/v1/ingest/restate", body, signedHeaders(t, id, body)); code != http.StatusAccepted {
			t.Fatalf("deliver %s: %d", id, code)
		}
	}

	rs.Gate(t, "acme", "fail")
	id := rs.Send(t, "Provision", "acme", "slow", nil, 0)
	// slow waits 80 s after its third failure: the row holds still.
	row := rs.WaitRow(t, id, "backing off after 3 attempts", func(r map[string]any) bool {
		return r["status"] == "backing-off" && r["retry_count"] == 3.0
	})
	deliver("msg-backing-off", row)
	v := workertest.WaitView(t, base, "acme", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateBackingOff })
	if v.WorkflowType != "Provision" || v.DeadlineSLO != substate.SLOBackingOff || !v.Deadline.Equal(v.WorkflowSubStateSince.Add(8*time.Second)) {
		t.Fatalf("backing off: %+v; want the Provision service's backing-off deadline", v)
	}
	if !v.Deadline.After(time.Now()) {
		t.Fatalf("the deadline %s passed before the test could watch it", v.Deadline)
	}
	before := calls.Load()
	waitStuck(t, w, "acme", v.Deadline)
	time.Sleep(500 * time.Millisecond)
	if n := calls.Load() - before; n != 0 {
		t.Fatalf("the worker sent Restate %d requests while the tenant became stuck, want none", n)
	}

	rs.Gate(t, "acme", "open")
	rs.Resume(t, id)
	row = rs.WaitRow(t, id, "completed", func(r map[string]any) bool { return r["status"] == "completed" })
	deliver("msg-completed", row)
	workertest.Eventually(t, func() string {
		if len(feedOf(t, w, "acme", substate.ChangeUnstuck)) != 1 {
			return "no unstuck message"
		}
		return ""
	})
	if got := calls.Load() - before; got != 0 {
		t.Logf("the worker sent Restate %d requests after the tenant moved on", got)
	}
}
