package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/reconcile"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// taskHistory returns history events, oldest first, from start: a Task
// state entered and its task scheduled and started, then the given event
// types, one second apart.
func taskHistory(start time.Time, more ...string) []json.RawMessage {
	types := append([]string{"ExecutionStarted", "TaskStateEntered", "TaskScheduled", "TaskStarted"}, more...)
	events := make([]json.RawMessage, len(types))
	for i, typ := range types {
		e := map[string]any{"id": i + 1, "previousEventId": i, "type": typ,
			"timestamp": float64(start.Add(time.Duration(i)*time.Second).UnixMilli()) / 1000}
		switch typ {
		case "TaskStateEntered":
			e["stateEnteredEventDetails"] = map[string]any{"name": "Provision"}
		case "TaskFailed":
			e["taskFailedEventDetails"] = map[string]any{"error": "Provision.Busy", "cause": "quota service busy"}
		}
		events[i], _ = json.Marshal(e)
	}
	return events
}

// TestReconcilerThroughThrottling runs the reconciler through a 70 s
// window in which Step Functions throttles every GetExecutionHistory call,
// on the injected clock: the throttled API is tried again only as its
// backoff allows, one call each time (the SDK does not retry it), every
// running execution is still polled each interval (its status, with
// DescribeExecution), the calls stay within what polling costs when
// nothing is throttled, and once the API answers the history is read
// again, the retry it held shows, and a line says the reads caught up.
func TestReconcilerThroughThrottling(t *testing.T) {
	clock := pipelinetest.NewClock(time.Date(2024, 6, 19, 10, 0, 0, 0, time.UTC))
	srv, sfn := newSFN(t, clock)
	f := newThrottleFixture(t, pipelinetest.New(t), clock, srv, sfn)
	defer f.dumpOnFailure(t)
	srv.ThrottleBetween("GetExecutionHistory", f.from, f.until)
	f.run(t, 20*time.Second, nil)

	var inWindow, throttled int
	for _, c := range srv.Log() {
		if _, ok := f.interval(c.At); !ok {
			continue
		}
		inWindow++
		if c.Failed != "" {
			throttled++
		}
	}
	t.Run("ThrottledAPIBacksOff", func(t *testing.T) {
		// A probe per sweep at most, each one call: 70 s of 15 s sweeps.
		if most := int(f.until.Sub(f.from)/f.r.Every) + 1; throttled == 0 || throttled > most {
			t.Fatalf("%d throttled calls in the window, want 1 to %d", throttled, most)
		}
		if got := pipelinetest.Counter(t, f.m.Throttled, "stepfunctions", "GetExecutionHistory"); int(got) != throttled {
			t.Fatalf("throttled calls counted %v, want %d", got, throttled)
		}
	})
	t.Run("CallsWithinBudget", func(t *testing.T) {
		// Unthrottled, each poll costs a history call (and a describe when
		// something changed): no more than two calls per execution per
		// interval, whatever the throttling.
		intervals := int(f.until.Sub(f.from)/f.r.Every) + 1
		if most := 2 * len(f.arns) * intervals; inWindow > most {
			t.Fatalf("%d calls in the window, want at most %d", inWindow, most)
		}
	})
	t.Run("EveryExecutionPolledEachInterval", f.wantPolledEachInterval)
	t.Run("CaughtUp", func(t *testing.T) {
		f.wantCaughtUp(t)
		for _, line := range []string{"the poller backs off it", "history reads fall behind",
			"step functions answers this API again", "history reads caught up"} {
			if got := f.logs.Count(line); got != 1 {
				t.Errorf("%d log lines say %q, want 1", got, line)
			}
		}
		if got := testutil.ToFloat64(f.m.Behind.WithLabelValues("stepfunctions")); got != 0 {
			t.Errorf("behind = %v after the catch-up", got)
		}
		if got := testutil.ToFloat64(f.m.Backoff.WithLabelValues("stepfunctions", "GetExecutionHistory")); got != 0 {
			t.Errorf("backoff = %v s after the API answered", got)
		}
		if got := f.logs.Count("polls lag"); got != 0 {
			t.Errorf("%d lag warnings: the polls kept their interval", got)
		}
	})
}

// TestReconcilerThroughDescribeThrottling runs the reconciler, with the
// poller's API budget on the injected clock, through a 70 s window in
// which Step Functions throttles DescribeExecution for one execution
// (acme-a), whose history changes inside the window so that each of its
// polls needs the describe: acme-a is tried once per interval (one
// describe each, not re-polled while the others wait), the other running
// executions keep their turn every interval, every call is within the
// budget, and once the API answers for acme-a its retry shows and a line
// says the API answers again.
func TestReconcilerThroughDescribeThrottling(t *testing.T) {
	clock := pipelinetest.NewClock(time.Date(2024, 6, 19, 10, 0, 0, 0, time.UTC))
	srv := awstest.New(t)
	srv.Now = clock.Now
	const budget = 4.0 // calls a second, --sfn-api-budget's default
	sfn := stepfunctions.New(srv.Config(), stepfunctions.BudgetOn(budget, clock.Now, clock.Sleep))
	sfn.Now = clock.Now
	sfn.Backoff.Rand = func() float64 { return 1 } // the longest waits the jitter allows
	f := newThrottleFixture(t, pipelinetest.New(t), clock, srv, sfn)
	defer f.dumpOnFailure(t)
	srv.ThrottleExecutionBetween("DescribeExecution", f.throttled, f.from, f.until)
	const answersAgain = "step functions answers this API again"
	inWindowLines := -1
	// acme-a's task fails inside the window: its next polls find new
	// events and need its status.
	f.run(t, 10*time.Second, func() {
		if f.clock.Now().Before(f.until) {
			inWindowLines = f.logs.Count(answersAgain)
		}
	})

	calls := srv.Log()
	var throttled int
	describes := map[int]int{} // interval → acme-a's describe calls
	for _, c := range calls {
		k, ok := f.interval(c.At)
		if !ok {
			continue
		}
		if c.Failed != "" {
			throttled++
		}
		if c.ExecutionARN == f.throttled && c.Op == "DescribeExecution" {
			describes[k]++
		}
	}
	t.Run("ThrottledExecutionTriedOncePerInterval", func(t *testing.T) {
		if throttled == 0 {
			t.Fatal("no call was throttled: the window did not hit acme-a's describe")
		}
		for k, n := range describes {
			if n > 1 {
				t.Errorf("acme-a was described %d times in interval %d of the window, want at most once (%v)", n, k, describes)
			}
		}
		if got := pipelinetest.Counter(t, f.m.Throttled, "stepfunctions", "DescribeExecution"); int(got) != throttled {
			t.Errorf("throttled calls counted %v, want %d", got, throttled)
		}
	})
	t.Run("CallsWithinBudget", func(t *testing.T) {
		// The i-th call (from 0) goes no sooner than the budget's burst
		// (one second's worth) and rate allow since the first.
		for i, c := range calls {
			if allowed := math.Ceil(budget) + budget*c.At.Sub(calls[0].At).Seconds() + 1e-6; float64(i+1) > allowed {
				t.Fatalf("call %d (%s %s) at %v: more than the %.1f the budget allows", i, c.Op, f.arns[c.ExecutionARN], c.At.Sub(f.start), allowed)
			}
		}
	})
	t.Run("EveryExecutionPolledEachInterval", f.wantPolledEachInterval)
	t.Run("CaughtUp", func(t *testing.T) {
		f.wantCaughtUp(t)
		if got := f.logs.Count("the poller backs off it"); got != 1 {
			t.Errorf("%d log lines say the API is throttled, want 1", got)
		}
		if got := f.logs.Count(answersAgain); inWindowLines != 0 || got != 1 {
			t.Errorf("%q logged %d times in the window and %d in all; want once, after it", answersAgain, inWindowLines, got)
		}
		if got := testutil.ToFloat64(f.m.Backoff.WithLabelValues("stepfunctions", "DescribeExecution")); got != 0 {
			t.Errorf("backoff = %v s after the API answered", got)
		}
	})
}

// throttleFixture is what the throttling tests share: three running Step
// Functions executions, acme-a to acme-c, in the local server and the
// view, and a reconciler sweeping every 15 s on the test's clock through
// a window of 70 s.
type throttleFixture struct {
	p           *pipelinetest.Pipeline
	clock       *pipelinetest.Clock
	srv         *awstest.Server
	r           *reconcile.Reconciler
	m           *reconcile.Metrics
	logs        *pipelinetest.Logs
	start       time.Time
	from, until time.Time         // the throttling window
	arns        map[string]string // tenant by execution ARN
	throttled   string            // acme-a's ARN, whose task fails in the window
}

// newThrottleFixture starts the fixture with sfn (from newSFN, or made on
// the same server with options of its own) polling srv.
func newThrottleFixture(t *testing.T, p *pipelinetest.Pipeline, clock *pipelinetest.Clock, srv *awstest.Server, sfn *stepfunctions.Provider) *throttleFixture {
	t.Helper()
	start := clock.Now()
	f := &throttleFixture{p: p, clock: clock, srv: srv, m: reconcile.NewMetrics(nil), logs: &pipelinetest.Logs{},
		start: start, from: start.Add(5 * time.Second), until: start.Add(75 * time.Second), arns: map[string]string{}}
	sfn.Logger = f.logs.Logger()
	sfn.OnBackoff = func(op string, d time.Duration) { f.m.SetBackoff(substate.ProviderStepFunctions, op, d) }
	sfn.OnBehind = func(n int) { f.m.SetBehind(substate.ProviderStepFunctions, n) }
	machine := awstest.StateMachineARN("tenant-provisioning")
	for i, tenant := range []string{"acme-a", "acme-b", "acme-c"} {
		arn := awstest.ExecutionARN(machine, tenant)
		f.arns[arn] = tenant
		srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: machine, Name: tenant, Status: "RUNNING",
			Input: `{"tenantId":"` + tenant + `"}`, StartDate: start.Add(-time.Minute), History: taskHistory(start.Add(-time.Minute))})
		applyRunning(t, p.View, tenant, arn, uint64(i+1), start.Add(-time.Minute))
	}
	f.throttled = awstest.ExecutionARN(machine, "acme-a")
	f.r = newReconciler(p.View, sfn, p.Pub, clock)
	f.r.Every, f.r.Interval, f.r.QPS = 15*time.Second, 15*time.Second, 0
	f.r.Logger, f.r.Metrics = f.logs.Logger(), f.m
	return f
}

// run runs the reconciler for two minutes of the test's clock; acme-a's
// first task fails, and is retried, once the clock passes failAt; each is
// called before every sleep.
func (f *throttleFixture) run(t *testing.T, failAt time.Duration, each func()) {
	t.Helper()
	end := f.start.Add(2 * time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	failed := false
	f.r.Sleep = func(ctx context.Context, d time.Duration) error {
		if now := f.clock.Now(); !failed && now.After(f.start.Add(failAt)) {
			failed = true
			if err := f.srv.SetHistory(f.throttled, taskHistory(f.start.Add(-time.Minute), "TaskFailed", "TaskScheduled", "TaskStarted")); err != nil {
				t.Error(err)
			}
		}
		if each != nil {
			each()
		}
		if f.clock.Now().After(end) {
			cancel()
		}
		return f.clock.Sleep(ctx, d)
	}
	if err := f.r.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// interval is the number of the window's sweep interval a call at at fell
// in; false outside the window.
func (f *throttleFixture) interval(at time.Time) (int, bool) {
	if at.Before(f.from) || !at.Before(f.until) {
		return 0, false
	}
	return int(at.Sub(f.from) / f.r.Every), true
}

// wantPolledEachInterval fails the test for each execution not polled in
// some whole interval of the window.
func (f *throttleFixture) wantPolledEachInterval(t *testing.T) {
	t.Helper()
	polled := map[string]map[int]bool{} // execution → the intervals it was polled in
	for _, c := range f.srv.Log() {
		if k, ok := f.interval(c.At); ok {
			if polled[c.ExecutionARN] == nil {
				polled[c.ExecutionARN] = map[int]bool{}
			}
			polled[c.ExecutionARN][k] = true
		}
	}
	for arn, tenant := range f.arns {
		for k := range int(f.until.Sub(f.from) / f.r.Every) {
			if !polled[arn][k] {
				t.Errorf("%s was not polled in interval %d of the window (%v)", tenant, k, polled[arn])
			}
		}
	}
}

// wantCaughtUp fails the test unless acme-a shows the retry the window
// held, after the pipeline settled.
func (f *throttleFixture) wantCaughtUp(t *testing.T) {
	t.Helper()
	f.p.Settle(t)
	if v := f.p.Tenant(t, "acme-a"); v.WorkflowRetryCount != 1 || v.WorkflowSubState != substate.StateRunning {
		t.Fatalf("acme-a = %s, retries %d; want running with the retry the window held", v.WorkflowSubState, v.WorkflowRetryCount)
	}
}

// dumpOnFailure prints the server's call log when the test failed.
func (f *throttleFixture) dumpOnFailure(t *testing.T) {
	if t.Failed() {
		for _, c := range f.srv.Log() {
			fmt.Printf("%6.1fs %-20s %s %s\n", c.At.Sub(f.start).Seconds(), c.Op, f.arns[c.ExecutionARN], c.Failed)
		}
	}
}
