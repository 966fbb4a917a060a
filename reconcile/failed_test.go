package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/reconcile"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// failedFixture stores the execution of sfn-status-failed.json in the
// fake, failed, with the retry history of sfn-history-retry.json (two
// failed attempts that were retried).
func failedFixture(t *testing.T, srv *awstest.Server) sfnFixture {
	t.Helper()
	x := readSFNFixture(t, "sfn-status-failed.json")
	var page struct{ Events []json.RawMessage }
	if err := json.Unmarshal(fixtures.Provider("sfn-history-retry.json"), &page); err != nil {
		t.Fatal(err)
	}
	srv.AddExecution(awstest.Execution{ARN: x.ARN, StateMachineARN: x.MachineARN, Name: x.Name, Status: "FAILED",
		Input: x.Input, StartDate: x.StartDate, StopDate: time.UnixMilli(1718791262338).UTC(), // the event's stopDate
		Error: "UpstreamUnavailable", Cause: `{"errorMessage":"payment provider returned HTTP 503"}`, History: page.Events})
	return x
}

// newFailedReconciler returns a reconciler on the clock that also reads
// and checks the view's failed tenants.
func newFailedReconciler(p *pipelinetest.Pipeline, sfn substate.StatusPoller, clock *pipelinetest.Clock) *reconcile.Reconciler {
	r := newReconciler(p.View, sfn, p.Pub, clock)
	r.Failed, r.RecheckWindow, r.RecheckEvery, r.FailedQPS = p.View, 14*24*time.Hour, time.Hour, 0.5
	return r
}

// TestReconcilerReadsExecutionHeardOfFailed: an execution first heard of
// through its FAILED event is read once, with its history, so the view
// shows the retries and the step the event does not carry.
func TestReconcilerReadsExecutionHeardOfFailed(t *testing.T) {
	ctx := context.Background()
	p := pipelinetest.New(t)
	clock := pipelinetest.NewClock(time.Date(2024, 6, 19, 10, 30, 0, 0, time.UTC))
	p.View.Now = clock.Now
	srv, sfn := newSFN(t, clock)
	failedFixture(t, srv)
	r := newFailedReconciler(p, sfn, clock)
	if _, err := r.Sweep(ctx); err != nil { // the reconciler runs before the failure
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	p.Publish(t, substate.RawEvent{Kind: substate.RawEventBridge, ID: "eb-failed", Body: fixtures.Provider("sfn-status-failed.json")})
	v := p.WaitTenant(t, runningTenant, "failed", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateFailed })
	if v.WorkflowRetryCount != 0 {
		t.Fatalf("retries %d from the event alone; the test needs the event to say nothing of them", v.WorkflowRetryCount)
	}
	clock.Advance(r.Interval)
	res, err := r.Sweep(ctx)
	if err != nil || res.Rechecked != 1 || res.Published != 1 {
		t.Fatalf("sweep = %+v, %v; want one read, published", res, err)
	}
	if srv.Calls("GetExecutionHistory") != 1 {
		t.Fatalf("history calls = %d, want 1", srv.Calls("GetExecutionHistory"))
	}
	p.Settle(t)
	v = p.Tenant(t, runningTenant)
	if v.WorkflowRetryCount != 2 || v.WorkflowStep == "" || v.WorkflowSubState != substate.StateFailed {
		t.Fatalf("view = %s, retries %d, step %q; want failed with the history's 2 retries and its step", v.WorkflowSubState, v.WorkflowRetryCount, v.WorkflowStep)
	}
	// Read once: the next sweeps make no call until its check is due.
	srv.ResetCalls()
	for range 4 {
		clock.Advance(r.Interval)
		if _, err := r.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.TotalCalls(); got != 0 {
		t.Fatalf("%d calls after the read, want none before its hourly check", got)
	}
}

// TestReconcilerFindsRedriveDoneElsewhere: a failed execution redriven
// outside substate, whose events were lost, is found by its hourly check
// within its 14-day redrive window, and the view follows it; outside the
// window nothing is checked.
func TestReconcilerFindsRedriveDoneElsewhere(t *testing.T) {
	ctx := context.Background()
	p := pipelinetest.New(t)
	clock := pipelinetest.NewClock(time.Date(2024, 6, 19, 11, 0, 0, 0, time.UTC))
	p.View.Now = clock.Now
	srv, sfn := newSFN(t, clock)
	x := failedFixture(t, srv)
	p.Publish(t, substate.RawEvent{Kind: substate.RawEventBridge, ID: "eb-failed", Body: fixtures.Provider("sfn-status-failed.json")})
	p.WaitTenant(t, runningTenant, "failed", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateFailed })
	old := addFailed(t, p, srv, sfn, "old-failure", clock.Now().Add(-15*24*time.Hour))

	clock.Advance(24 * time.Hour) // the worker restarts a day later
	r := newFailedReconciler(p, sfn, clock)
	res, err := r.Sweep(ctx)
	if err != nil || res.Rechecked != 1 {
		t.Fatalf("first sweep = %+v, %v; want the failure inside the window checked", res, err)
	}
	if h, d := srv.Calls("GetExecutionHistory"), srv.Calls("DescribeExecution"); h != 0 || d != 1 {
		t.Fatalf("calls: history %d, describe %d; a check of a failure from before the start is one DescribeExecution", h, d)
	}
	// Someone redrives it with the AWS console; EventBridge's event is lost.
	if err := srv.Redrive(x.ARN); err != nil {
		t.Fatal(err)
	}
	srv.ResetCalls()
	clock.Advance(30 * time.Minute)
	if _, err := r.Sweep(ctx); err != nil || srv.TotalCalls() != 0 {
		t.Fatalf("sweep half an hour later: %v, %d calls; want none", err, srv.TotalCalls())
	}
	clock.Advance(30 * time.Minute)
	res, err = r.Sweep(ctx)
	if err != nil || res.Rechecked != 1 || res.Published != 1 {
		t.Fatalf("sweep an hour later = %+v, %v; want the check published", res, err)
	}
	v := p.WaitTenant(t, runningTenant, "running again", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateRunning })
	if v.WorkflowExecutionID != x.ARN {
		t.Fatalf("view = %+v", v)
	}
	for _, c := range srv.Log() {
		if c.ExecutionARN == old {
			t.Fatalf("the execution that failed 15 days ago was checked: %+v", c)
		}
	}
}

// TestReconcilerChecksFailedWithinShare: checks of many failed executions
// never go faster than FailedQPS, and each is checked once an hour.
func TestReconcilerChecksFailedWithinShare(t *testing.T) {
	ctx := context.Background()
	p := pipelinetest.New(t)
	clock := pipelinetest.NewClock(time.Date(2024, 6, 19, 11, 0, 0, 0, time.UTC))
	p.View.Now = clock.Now
	srv, sfn := newSFN(t, clock)
	const failed = 40
	for i := range failed {
		addFailed(t, p, srv, sfn, fmt.Sprintf("t%02d", i), clock.Now().Add(-time.Duration(i)*time.Hour))
	}
	clock.Advance(time.Minute)
	r := newFailedReconciler(p, sfn, clock)
	start := clock.Now()
	end := start.Add(2*time.Hour + time.Minute)
	for clock.Now().Before(end) {
		if _, err := r.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		clock.Advance(r.Interval)
	}
	checks := map[string][]time.Time{}
	for i, c := range srv.Log() {
		checks[c.ExecutionARN] = append(checks[c.ExecutionARN], c.At)
		if allowed := float64(r.FailedBurst()) + r.FailedQPS*c.At.Sub(start).Seconds(); float64(i+1) > allowed+1e-9 {
			t.Fatalf("call %d at %v: more than the %.1f the share allows", i, c.At.Sub(start), allowed)
		}
		if c.Op != "DescribeExecution" {
			t.Fatalf("call %+v; a check is one DescribeExecution", c)
		}
	}
	if len(checks) != failed {
		t.Fatalf("%d executions checked, want %d", len(checks), failed)
	}
	for arn, at := range checks {
		// 40 checks at 0.5 a second take 80 s: the first check of each is
		// within 2 minutes, the next ones an hour apart.
		if at[0].Sub(start) > 2*time.Minute || len(at) < 2 || len(at) > 3 {
			t.Fatalf("%s checked at %v", arn, at)
		}
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap < time.Hour || gap > time.Hour+2*time.Minute {
				t.Fatalf("%s checked %v after the check before, want an hour", arn, gap)
			}
		}
	}
}

// addFailed stores a failed execution of the tenant in the fake, stopped
// at stopped, and puts its status through the pipeline; it returns its
// ARN.
func addFailed(t *testing.T, p *pipelinetest.Pipeline, srv *awstest.Server, sfn substate.StatusPoller, tenant string, stopped time.Time) string {
	t.Helper()
	machine := awstest.StateMachineARN("orders")
	arn := awstest.ExecutionARN(machine, tenant)
	srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: machine, Name: tenant, Status: "FAILED",
		Input: `{"tenantId":"` + tenant + `"}`, StartDate: stopped.Add(-time.Minute), StopDate: stopped, Error: "Boom", Cause: "boom"})
	raw, err := sfn.Poll(context.Background(), arn, false)
	if err != nil {
		t.Fatal(err)
	}
	p.Publish(t, raw)
	p.WaitTenant(t, tenant, "failed", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateFailed })
	srv.ResetCalls()
	return arn
}
