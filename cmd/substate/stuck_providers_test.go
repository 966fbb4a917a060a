package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/restatetest"
	"github.com/substatehq/substate/testkit/workertest"
)

// stuckWithin is how long after its deadline a stuck event may be marked,
// by the worker's own clock: the precision for one tenant.
const stuckWithin = time.Second

// TestStuckAgainstProviders is the issue's stuck story against "substate
// run" and each provider: a workflow left backing off past its SLO gets a
// stuck CloudEvent on SUBSTATE_CHANGES, marked by the worker at its
// deadline, while the worker sends the provider nothing (awstest's call
// log; the requests to the real Restate server's admin API); its moving
// on gives unstuck. What the worker does in process (the stuck list and
// metrics): TestStuckStepFunctions and TestStuckRestate in worker/e2e.
func TestStuckAgainstProviders(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes and a Restate server")
	}
	t.Run("StepFunctions", testStuckStepFunctions)
	t.Run("Restate", testStuckRestate)
}

// testStuckStepFunctions: the reconciler's one read of the execution's
// history shows it backing off; after that the local AWS server hears
// nothing more from the worker while the tenant becomes stuck. The
// SUCCEEDED event unsticks it.
func testStuckStepFunctions(t *testing.T) {
	srv := awstest.New(t)
	awstest.Env(t, srv.URL, awstest.Region)
	slo := writeSLOFile(t, "workflows:\n  \"*\": {run: 1h}\n  order-fulfillment:\n    backing-off: 5s\n")
	// One read of each running execution's history an hour: the first
	// sweep's, which finds it backing off.
	p := startWorkerProcess(t, t.TempDir(), "--slo-file", slo,
		"--reconcile-interval", "100ms", "--sfn-history-interval", "1h", "--sfn-redrive-check-interval", "0")
	b := p.bus(t)

	ev, arn, input := sfnRunningEvent(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	ev["time"] = now.Format(time.RFC3339)
	ev["detail"].(map[string]any)["startDate"] = now.UnixMilli()
	srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: awstest.StateMachineARN("order-fulfillment"), Name: "ord-2024-000124",
		Status: "RUNNING", Input: input, StartDate: now})
	// Cut after the task timed out: its Retry interval is running. The
	// provider's times are in the past, as the worker sees them: a
	// tenant whose last event is in the worker's future is not listed by
	// the reconciler's sweeps until it is past, and is then polled again.
	failedAt := now.Add(-500 * time.Millisecond)
	if err := srv.SetHistory(arn, awstest.RetryHistoryAt(t, 8, failedAt)); err != nil {
		t.Fatal(err)
	}
	postEvent(t, p.httpURL, ev)
	v := workertest.WaitView(t, p.httpURL, "acme", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateBackingOff })
	deadline := failedAt.Add(5 * time.Second)
	if !v.Deadline.Equal(deadline) || v.DeadlineSLO != substate.SLOBackingOff || v.Stuck {
		t.Fatalf("backing off: %+v; want deadline %s for backing-off", v, deadline)
	}
	if !time.Now().Before(deadline) {
		t.Fatalf("the deadline %s passed before the test could watch it", deadline)
	}
	if srv.TotalCalls() == 0 {
		t.Fatal("the reconciler read nothing: the view cannot have learned the execution backs off")
	}
	srv.ResetCalls()

	waitStuckEvent(t, b, "acme", deadline)
	time.Sleep(500 * time.Millisecond) // a call made because of it would come now
	if calls := srv.Log(); len(calls) != 0 {
		t.Fatalf("the worker called the AWS API %d times while the tenant became stuck, want none: %+v", len(calls), calls)
	}

	// It ends: the SUCCEEDED event moves it on.
	ev["id"], ev["time"] = "succeeded-event", time.Now().UTC().Format(time.RFC3339)
	d := ev["detail"].(map[string]any)
	d["status"], d["stopDate"] = "SUCCEEDED", time.Now().UnixMilli()
	postEvent(t, p.httpURL, ev)
	waitUnstuckEvent(t, b, "acme")
	if v := tenantView(t, p.httpURL, "acme"); v.Stuck || !v.Deadline.IsZero() {
		t.Fatalf("succeeded: %+v; want neither stuck nor a deadline", v)
	}
}

// testStuckRestate: the worker is given the real Restate server's admin
// API through a proxy that counts its requests, and learns of the
// invocation from webhook deliveries; while the invocation backs off and
// becomes stuck, the worker sends Restate not one request. Resumed and
// done, it is unstuck.
func testStuckRestate(t *testing.T) {
	rs := restatetest.Start(t)
	countingURL, calls := rs.CountingAdmin(t)
	slo := writeSLOFile(t, "workflows:\n  Provision:\n    backing-off: 8s\n")
	// The poller polls only invocations nothing was heard of for an hour.
	p := startWorkerProcess(t, t.TempDir(), "--slo-file", slo, "--sfn-reconcile", "off",
		"--restate-admin-url", countingURL, "--restate-poll-interval", "250ms", "--restate-poll-after", "1h")
	b := p.bus(t)
	deliver := func(id string, row map[string]any) {
		t.Helper()
		body, _ := json.Marshal(row)
		if err := workertest.DeliverRow(p.httpURL, id, body); err != nil {
			t.Fatalf("deliver %s: %v", id, err)
		}
	}

	rs.Gate(t, "acme", "fail")
	id := rs.Send(t, "Provision", "acme", "slow", nil, 0)
	// slow waits 80 s after its third failure: the row holds still.
	row := rs.WaitRow(t, id, "backing off after 3 attempts", func(r map[string]any) bool {
		return r["status"] == "backing-off" && r["retry_count"] == 3.0
	})
	deliver("msg-backing-off", row)
	v := workertest.WaitView(t, p.httpURL, "acme", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateBackingOff })
	before := calls.Load()
	if v.WorkflowType != "Provision" || v.DeadlineSLO != substate.SLOBackingOff || !v.Deadline.Equal(v.WorkflowSubStateSince.Add(8*time.Second)) {
		t.Fatalf("backing off: %+v; want the Provision service's backing-off deadline", v)
	}
	if !time.Now().Before(v.Deadline) {
		t.Fatalf("the deadline %s passed before the test could watch it", v.Deadline)
	}
	waitStuckEvent(t, b, "acme", v.Deadline)
	time.Sleep(500 * time.Millisecond) // a request made because of it would come now
	if n := calls.Load() - before; n != 0 {
		t.Fatalf("the worker sent Restate's admin API %d requests while the tenant became stuck, want none", n)
	}

	// The operator resumes it through the worker, whose requests to
	// Restate the proxy counts: the count above is of the worker's path.
	rs.Gate(t, "acme", "open")
	if code, out, errOut := runCLIFor(t, time.Minute, "executions", "retry", "acme", "--reason", "downstream back", "--server", p.httpURL); code != 0 ||
		!strings.Contains(out, "retried restate execution "+id) {
		t.Fatalf("retry: exit %d\n%s%s", code, out, errOut)
	}
	if calls.Load() == before {
		t.Fatal("the retry sent nothing through the counting proxy: it does not count the worker's requests")
	}
	row = rs.WaitRow(t, id, "completed", func(r map[string]any) bool { return r["status"] == "completed" })
	deliver("msg-completed", row)
	waitUnstuckEvent(t, b, "acme")
	if v := tenantView(t, p.httpURL, "acme"); v.Stuck || !v.Deadline.IsZero() {
		t.Fatalf("completed: %+v; want neither stuck nor a deadline", v)
	}
}

// writeSLOFile writes an SLO file and returns its path.
func writeSLOFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "slo.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// sfnRunningEvent returns the README's example EventBridge event as it
// was while the execution ran, and the execution's ARN and input.
func sfnRunningEvent(t *testing.T) (ev map[string]any, arn, input string) {
	t.Helper()
	if err := json.Unmarshal(workertest.Example(t, "stepfunctions-failed.json"), &ev); err != nil {
		t.Fatal(err)
	}
	d := ev["detail"].(map[string]any)
	d["status"], d["stopDate"], d["error"], d["cause"] = "RUNNING", nil, nil, nil
	ev["id"] = "running-event"
	return ev, d["executionArn"].(string), d["input"].(string)
}

// postEvent posts an EventBridge event to the worker at url.
func postEvent(t *testing.T, url string, ev map[string]any) {
	t.Helper()
	body, _ := json.Marshal(ev)
	if code := workertest.Post(t, url+"/v1/ingest/eventbridge", body, nil); code != http.StatusAccepted {
		t.Fatalf("ingest %s: %d", ev["id"], code)
	}
}

// feedEvents returns the tenant's messages on SUBSTATE_CHANGES of a
// CloudEvents type, each with its envelope, read as a subscriber reads
// them.
func feedEvents(t *testing.T, b *bus.Bus, tenant, typ string) []stuckMsg {
	t.Helper()
	var out []stuckMsg
	for _, c := range bustest.Changes(t, b.JetStream) {
		e, err := substate.UnmarshalChangeEvent(c.Msg.Data)
		if err != nil {
			t.Fatal(err)
		}
		if e.Subject == tenant && e.Type == typ {
			out = append(out, stuckMsg{Event: e, Stored: c.Msg.Time})
		}
	}
	return out
}

// stuckMsg is a CloudEvent of the change feed and when the stream stored
// it.
type stuckMsg struct {
	Event  substate.ChangeEvent
	Stored time.Time
}

// waitStuckEvent waits for the tenant's one stuck CloudEvent on
// SUBSTATE_CHANGES and checks it: stuck since the deadline, its deadline
// field the deadline, and marked by the worker (the event's time, the
// view's updatedAt) at or after the deadline and less than stuckWithin
// after it. Both times are the worker's clock, so the bound is on the
// worker's timer, not on how fast this test reads the feed.
func waitStuckEvent(t *testing.T, b *bus.Bus, tenant string, deadline time.Time) {
	t.Helper()
	var got []stuckMsg
	workertest.EventuallyWithin(t, time.Until(deadline)+30*time.Second, func() string {
		if got = feedEvents(t, b, tenant, substate.ChangeTypeStuck); len(got) == 0 {
			return "no stuck event for " + tenant
		}
		return ""
	})
	e := got[0].Event
	c := e.Data
	if len(got) != 1 || !c.New.Stuck || c.Old.Stuck || !c.New.StuckSince.Equal(deadline) || !c.New.Deadline.Equal(deadline) ||
		c.New.DeadlineSLO != substate.SLOBackingOff || c.New.WorkflowSubState != substate.StateBackingOff {
		t.Fatalf("stuck events %+v; want one, backing-off, stuck since and with the deadline %s", got, deadline)
	}
	marked := e.Time.Time
	if !marked.Equal(c.New.UpdatedAt.Truncate(time.Millisecond)) {
		t.Fatalf("the stuck event's time %s is not the view's updatedAt %s", marked, c.New.UpdatedAt)
	}
	delay := marked.Sub(deadline)
	t.Logf("the worker marked the tenant stuck %s after its deadline; the stream stored the event %s after it",
		delay, got[0].Stored.Sub(deadline).Round(time.Millisecond))
	if delay < 0 || delay >= stuckWithin {
		t.Fatalf("the worker marked the tenant stuck at %s, %s after its deadline %s; want from 0 to %s", marked, delay, deadline, stuckWithin)
	}
	if got[0].Stored.Before(deadline) {
		t.Fatalf("the stuck event was stored at %s, before the deadline %s", got[0].Stored, deadline)
	}
}

// waitUnstuckEvent waits for the tenant's one unstuck CloudEvent on
// SUBSTATE_CHANGES.
func waitUnstuckEvent(t *testing.T, b *bus.Bus, tenant string) {
	t.Helper()
	var got []stuckMsg
	workertest.EventuallyWithin(t, 30*time.Second, func() string {
		if got = feedEvents(t, b, tenant, substate.ChangeTypeUnstuck); len(got) == 0 {
			return "no unstuck event for " + tenant
		}
		return ""
	})
	if c := got[0].Event.Data; len(got) != 1 || !c.Old.Stuck || c.New.Stuck || !c.New.StuckSince.IsZero() {
		t.Fatalf("unstuck events %+v; want one, from stuck to not stuck", got)
	}
}
