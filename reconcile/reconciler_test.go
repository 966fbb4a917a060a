package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/reconcile"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// runningTenant is the tenant of sfn-status-running.json: the input's
// customerId.
const runningTenant = "cus_88412"

// trackRunning sends the RUNNING EventBridge event of the fixture through
// the normalizer and projector, stores the execution in the fake as
// running, and returns it.
func trackRunning(t *testing.T, p *pipelinetest.Pipeline, srv *awstest.Server) sfnFixture {
	t.Helper()
	x := readSFNFixture(t, "sfn-status-running.json")
	addExecution(srv, x)
	p.Publish(t, substate.RawEvent{Kind: substate.RawEventBridge, ID: "eb-running", Body: fixtures.Provider("sfn-status-running.json")})
	p.WaitTenant(t, runningTenant, "running", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateRunning })
	return x
}

func TestReconcilerRecoversLostSucceeded(t *testing.T) {
	ctx := context.Background()
	p := pipelinetest.New(t)
	clock := pipelinetest.NewClock(time.Date(2024, 6, 19, 10, 1, 0, 0, time.UTC))
	srv, sfn := newSFN(t, clock)
	x := trackRunning(t, p, srv)
	last := p.Tenant(t, runningTenant).LastEventAt

	// The execution succeeds; its event is lost.
	if err := srv.SetStatus(x.ARN, "SUCCEEDED", "", ""); err != nil {
		t.Fatal(err)
	}
	r := newReconciler(p.View, sfn, p.Pub, clock)
	r.After = 2 * time.Minute // poll only the executions nothing was heard of for 2 minutes

	clock.Set(last.Add(r.After)) // not stale yet: nothing heard for exactly After
	res, err := r.Sweep(ctx)
	if err != nil || res.Polled != 0 || srv.TotalCalls() != 0 {
		t.Fatalf("sweep before --reconcile-after: %+v, %d calls, %v; want no poll", res, srv.TotalCalls(), err)
	}

	clock.Advance(r.Interval) // one sweep later
	res, err = r.Sweep(ctx)
	if err != nil || res.Polled != 1 || res.Published != 1 {
		t.Fatalf("sweep after --reconcile-after: %+v, %v; want one poll published", res, err)
	}
	v := p.WaitTenant(t, runningTenant, "succeeded", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateSucceeded })
	if v.WorkflowExecutionID != "" || v.ProviderState != "SUCCEEDED" || v.Provider != substate.ProviderStepFunctions {
		t.Fatalf("view = %+v", v)
	}
}

func TestReconcilerDetectsBackingOffFromHistory(t *testing.T) {
	ctx := context.Background()
	p := pipelinetest.New(t)
	clock := pipelinetest.NewClock(time.Date(2024, 6, 19, 10, 10, 0, 0, time.UTC))
	srv, sfn := newSFN(t, clock)
	x := trackRunning(t, p, srv)

	// The second attempt timed out and the Retry interval is running: no
	// event is sent for that.
	var page struct{ Events []json.RawMessage }
	if err := json.Unmarshal(fixtures.Provider("sfn-history-retry.json"), &page); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetHistory(x.ARN, page.Events[:8]); err != nil {
		t.Fatal(err)
	}
	r := newReconciler(p.View, sfn, p.Pub, clock)
	res, err := r.Sweep(ctx)
	if err != nil || res.Published != 1 {
		t.Fatalf("sweep: %+v, %v", res, err)
	}
	if srv.Calls("GetExecutionHistory") != 1 {
		t.Fatalf("history calls = %d, want 1: the first poll of an execution reads history", srv.Calls("GetExecutionHistory"))
	}
	v := p.WaitTenant(t, runningTenant, "backing-off", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateBackingOff })
	if v.WorkflowRetryCount != 2 || v.WorkflowErrorMessage != "States.Timeout: Task timed out after 30.00 seconds" || v.WorkflowVerb != substate.VerbRetrying {
		t.Fatalf("view = retries %d, error %q, verb %s; want 2 (one retried failure, one waiting), the timeout, retrying", v.WorkflowRetryCount, v.WorkflowErrorMessage, v.WorkflowVerb)
	}
}

func TestReconcilerLatePollDoesNotRegress(t *testing.T) {
	ctx := context.Background()
	p := pipelinetest.New(t)
	clock := pipelinetest.NewClock(time.Date(2024, 6, 19, 10, 10, 0, 0, time.UTC))
	srv, sfn := newSFN(t, clock)
	x := readSFNFixture(t, "sfn-status-running.json")
	addExecution(srv, x)

	// A poll reads the execution while it runs …
	late, err := sfn.Poll(ctx, x.ARN, true)
	if err != nil {
		t.Fatal(err)
	}
	// … then the SUCCEEDED event arrives and is applied …
	p.Publish(t, substate.RawEvent{Kind: substate.RawEventBridge, ID: "eb-succeeded", Body: fixtures.Provider("sfn-status-succeeded.json")})
	p.WaitTenant(t, runningTenant, "succeeded", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateSucceeded })
	// … and only then is the poll result published.
	p.Publish(t, late)
	pipelinetest.WaitFor(t, "the late poll to be normalized", func() bool { return bustest.Count(t, p.Bus.JetStream, substate.StreamEvents) == 2 })
	p.Settle(t)
	if v := p.Tenant(t, runningTenant); v.WorkflowSubState != substate.StateSucceeded || v.ProviderState != "SUCCEEDED" {
		t.Fatalf("view after the late poll = %s (%s), want succeeded", v.WorkflowSubState, v.ProviderState)
	}
	if res, err := newReconciler(p.View, sfn, p.Pub, clock).Sweep(ctx); err != nil || res.Stale != 0 {
		t.Fatalf("sweep: %+v, %v; a succeeded tenant is never polled", res, err)
	}
}

func TestReconcilerPollsEachExecutionEvery(t *testing.T) {
	ctx := context.Background()
	p := pipelinetest.New(t)
	clock := pipelinetest.NewClock(time.Date(2024, 6, 19, 10, 10, 0, 0, time.UTC))
	srv, sfn := newSFN(t, clock)
	trackRunning(t, p, srv)
	r := newReconciler(p.View, sfn, p.Pub, clock)
	r.Every = 15 * time.Second

	var polls []int
	for i := range 13 { // a minute of sweeps 5 s apart
		res, err := r.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Polled == 1 {
			polls = append(polls, i)
		}
		clock.Advance(5 * time.Second)
	}
	if got, want := fmtInts(polls), "[0 3 6 9 12]"; got != want {
		t.Errorf("polled at sweeps %s, want %s (every 15 s, whatever was heard)", got, want)
	}
	// Each poll reads the history; nothing new after the first, so one describe.
	if h, d := srv.Calls("GetExecutionHistory"), srv.Calls("DescribeExecution"); h != 5 || d != 1 {
		t.Errorf("calls: %d history, %d describe; want 5 and 1", h, d)
	}
}

func TestReconcilerFailures(t *testing.T) {
	ctx := context.Background()
	view := pipelinetest.OpenView(t)
	clock := pipelinetest.NewClock(time.Date(2024, 6, 19, 10, 10, 0, 0, time.UTC))
	srv, sfn := newSFN(t, clock)
	b := bustest.Open(t)
	pub := publishers.NewJetStream(b.JetStream)
	machine := awstest.StateMachineARN("orders")
	var arns []string
	for i, tenant := range []string{"t1", "t2", "t3"} {
		arn := awstest.ExecutionARN(machine, tenant)
		arns = append(arns, arn)
		applyRunning(t, view, tenant, arn, uint64(i+1), clock.Now().Add(-time.Hour))
		if tenant != "t3" {
			srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: machine, Name: tenant, Status: "RUNNING",
				Input: `{"tenantId":"` + tenant + `"}`, StartDate: clock.Now().Add(-time.Hour)})
		}
	}
	var logs pipelinetest.Logs
	r := newReconciler(view, sfn, pub, clock)
	r.Logger, r.Metrics = logs.Logger(), reconcile.NewMetrics(nil)

	t.Run("Throttled", func(t *testing.T) {
		srv.Throttle("DescribeExecution", 1) // the SDK does not retry a throttled poll
		if _, ok := r.Metrics.LastSweep(); ok {
			t.Fatal("a last sweep before any")
		}
		before := time.Now()
		res, err := r.Sweep(ctx)
		if last, ok := r.Metrics.LastSweep(); !ok || last.Before(before) {
			t.Fatalf("last sweep %v %v after a sweep that began at %v", last, ok, before)
		}
		if err != nil || res.Failed != 1 || res.Deferred != 2 || res.Published != 0 {
			t.Fatalf("sweep = %+v, %v; want the first poll throttled and the rest deferred", res, err)
		}
		if got := pipelinetest.Counter(t, r.Metrics.Polls, "stepfunctions", substate.ETHROTTLED); got != 1 {
			t.Fatalf("throttled polls counted = %v", got)
		}
	})
	t.Run("HeldWhileBackingOff", func(t *testing.T) {
		srv.ResetCalls()
		res, err := r.Sweep(ctx)
		if err != nil || res.Polled != 0 || res.Deferred != 2 || srv.TotalCalls() != 0 {
			t.Fatalf("sweep = %+v, %v, %d calls; want the provider held: no poll, no call", res, err, srv.TotalCalls())
		}
	})
	t.Run("RetriedInTurn", func(t *testing.T) {
		clock.Advance(r.Interval)
		srv.ResetCalls()
		res, err := r.Sweep(ctx)
		if err != nil || res.Published != 2 || res.Failed != 1 {
			t.Fatalf("sweep = %+v, %v; want t1 and t2 published, t3 not found", res, err)
		}
		var order []string
		for _, c := range srv.Log() {
			if c.Op == "GetExecutionHistory" {
				order = append(order, c.ExecutionARN)
			}
		}
		if want := []string{arns[1], arns[2], arns[0]}; !slices.Equal(order, want) {
			t.Fatalf("polled %v, want %v: the throttled execution goes to the back of the line", order, want)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		for range 3 {
			clock.Advance(r.Every)
			res, err := r.Sweep(ctx)
			if err != nil || res.Unpolled != 1 || res.Polled != 2 || res.Published != 0 {
				t.Fatalf("sweep = %+v, %v; want t3 left alone, t1 and t2 polled and, unchanged, not published again", res, err)
			}
		}
		if got := logs.Count(arns[2]); got != 1 {
			t.Fatalf("the unknown execution was logged %d times, want once", got)
		}
		if got := pipelinetest.Counter(t, r.Metrics.Polls, "stepfunctions", substate.ENOTFOUND); got != 1 {
			t.Fatalf("not-found polls counted = %v, want 1", got)
		}
	})
	t.Run("PublishFails", func(t *testing.T) {
		if err := srv.SetStatus(arns[0], "SUCCEEDED", "", ""); err != nil { // a change to publish
			t.Fatal(err)
		}
		b.Close() // NATS goes away
		clock.Advance(r.Every)
		res, err := r.Sweep(ctx)
		if err == nil || res.Published != 0 {
			t.Fatalf("sweep = %+v, %v; want the sweep to stop with the publish error", res, err)
		}
		if got := pipelinetest.Counter(t, r.Metrics.Polls, "stepfunctions", reconcile.OutcomePublishFailed); got != 1 {
			t.Fatalf("publish failures counted = %v, want 1", got)
		}
	})
}

func TestReconcilerRunKeepsGoing(t *testing.T) {
	view := pipelinetest.OpenView(t)
	clock := pipelinetest.NewClock(time.Date(2024, 6, 19, 10, 10, 0, 0, time.UTC))
	srv, sfn := newSFN(t, clock)
	arn := awstest.ExecutionARN(awstest.StateMachineARN("orders"), "t1")
	applyRunning(t, view, "t1", arn, 1, clock.Now().Add(-time.Hour))
	srv.Fail("", 1000, 500, "InternalFailure", "injected outage")
	r := newReconciler(view, sfn, publishers.NewJetStream(bustest.Open(t).JetStream), clock)
	ctx, cancel := context.WithCancel(context.Background())
	sweeps := 0
	r.Sleep = func(ctx context.Context, d time.Duration) error {
		if sweeps++; sweeps == 5 {
			cancel()
		}
		return clock.Sleep(ctx, d)
	}
	if err := r.Run(ctx); err != nil {
		t.Fatalf("run = %v, want nil after the context ends", err)
	}
	if got := srv.Calls("GetExecutionHistory"); got != 5*awstest.MaxAttempts {
		t.Fatalf("history calls = %d, want one poll (with the SDK's retries) per sweep: %d", got, 5*awstest.MaxAttempts)
	}
}

// pollerFunc is a StatusPoller made of a function, to watch a real one.
type pollerFunc func(ctx context.Context, id string, withHistory bool) (substate.RawEvent, error)

func (f pollerFunc) Poll(ctx context.Context, id string, withHistory bool) (substate.RawEvent, error) {
	return f(ctx, id, withHistory)
}

func TestReconcilerRateLimit(t *testing.T) {
	ctx := context.Background()
	view := pipelinetest.OpenView(t)
	clock := pipelinetest.NewClock(time.Date(2024, 6, 19, 10, 10, 0, 0, time.UTC))
	srv, sfn := newSFN(t, clock)
	machine := awstest.StateMachineARN("orders")
	const tenants = 20
	for i := range tenants {
		name := fmt.Sprintf("t%02d", i)
		arn := awstest.ExecutionARN(machine, name)
		applyRunning(t, view, name, arn, uint64(i+1), clock.Now().Add(-time.Hour))
		srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: machine, Name: name, Status: "RUNNING",
			Input: `{"tenantId":"` + name + `"}`, StartDate: clock.Now().Add(-time.Hour)})
	}
	// Record when each poll starts.
	var polls []time.Time
	watched := pollerFunc(func(ctx context.Context, id string, withHistory bool) (substate.RawEvent, error) {
		polls = append(polls, clock.Now())
		return sfn.Poll(ctx, id, withHistory)
	})
	r := newReconciler(view, watched, publishers.NewJetStream(bustest.Open(t).JetStream), clock)
	r.QPS, r.Burst = 4, 4
	start := clock.Now()
	res, err := r.Sweep(ctx)
	if err != nil || res.Published != tenants {
		t.Fatalf("sweep = %+v, %v", res, err)
	}
	// 4 polls go at once, the other 16 at 4 a second.
	if got, want := clock.Now().Sub(start), 4*time.Second; absDuration(got-want) > time.Millisecond {
		t.Fatalf("the sweep took %v of the injected clock, want %v", got, want)
	}
	for i, at := range polls {
		if allowed := float64(r.Burst) + r.QPS*at.Sub(start).Seconds() + 1e-6; float64(i+1) > allowed {
			t.Fatalf("poll %d at %v: more than the %.1f the limit allows", i, at.Sub(start), allowed)
		}
	}
	// A first poll reads the history and describes the execution.
	if got, want := srv.TotalCalls(), 2*tenants; got != want {
		t.Fatalf("calls = %d, want %d", got, want)
	}
}

// TestReconcilerSpreadsPollsFairly gives the reconciler a budget that
// covers a fifth of the running executions each interval: every execution
// is polled in turn, as often as every other, and the lag metric says how
// late the polls are.
func TestReconcilerSpreadsPollsFairly(t *testing.T) {
	ctx := context.Background()
	view := pipelinetest.OpenView(t)
	clock := pipelinetest.NewClock(time.Date(2024, 6, 19, 10, 10, 0, 0, time.UTC))
	srv, sfn := newSFN(t, clock)
	machine := awstest.StateMachineARN("orders")
	const tenants = 10
	counts := map[string]int{}
	for i := range tenants {
		name := fmt.Sprintf("t%02d", i)
		arn := awstest.ExecutionARN(machine, name)
		applyRunning(t, view, name, arn, uint64(i+1), clock.Now().Add(-time.Hour))
		srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: machine, Name: name, Status: "RUNNING",
			Input: `{"tenantId":"` + name + `"}`, StartDate: clock.Now().Add(-time.Hour)})
	}
	watched := pollerFunc(func(ctx context.Context, id string, withHistory bool) (substate.RawEvent, error) {
		counts[id]++
		return sfn.Poll(ctx, id, withHistory)
	})
	r := newReconciler(view, watched, publishers.NewJetStream(bustest.Open(t).JetStream), clock)
	r.Every, r.QPS, r.Burst, r.Metrics = 5*time.Second, 0.4, 1, reconcile.NewMetrics(nil)
	end := clock.Now().Add(5 * time.Minute)
	for clock.Now().Before(end) {
		if _, err := r.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
	}
	lo, hi := 1<<30, 0
	for _, n := range counts {
		lo, hi = min(lo, n), max(hi, n)
	}
	if len(counts) != tenants || hi-lo > 1 || lo < 10 {
		t.Fatalf("polls per execution range from %d to %d over %d executions; want every one polled about as often (at least 10)", lo, hi, len(counts))
	}
	lag := testutil.ToFloat64(r.Metrics.PollLag.WithLabelValues("stepfunctions"))
	if lag < 15 { // 10 polls take 25 s at 0.4 a second: each waits about 20 s past its 5 s interval
		t.Fatalf("lag metric = %v s, want the polls' delay past their interval", lag)
	}
}

func absDuration(d time.Duration) time.Duration { return max(d, -d) }
