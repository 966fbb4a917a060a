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
	p := pipelinetest.New(t)
	start := time.Date(2024, 6, 19, 10, 0, 0, 0, time.UTC)
	clock := pipelinetest.NewClock(start)
	srv, sfn := newSFN(t, clock)
	var logs pipelinetest.Logs
	m := reconcile.NewMetrics(nil)
	sfn.Logger = logs.Logger()
	sfn.OnBackoff = func(op string, d time.Duration) { m.SetBackoff(substate.ProviderStepFunctions, op, d) }
	sfn.OnBehind = func(n int) { m.SetBehind(substate.ProviderStepFunctions, n) }
	machine := awstest.StateMachineARN("tenant-provisioning")
	tenants := []string{"acme-a", "acme-b", "acme-c"}
	arns := map[string]string{}
	for i, tenant := range tenants {
		arn := awstest.ExecutionARN(machine, tenant)
		arns[arn] = tenant
		srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: machine, Name: tenant, Status: "RUNNING",
			Input: `{"tenantId":"` + tenant + `"}`, StartDate: start.Add(-time.Minute), History: taskHistory(start.Add(-time.Minute))})
		applyRunning(t, p.View, tenant, arn, uint64(i+1), start.Add(-time.Minute))
	}
	throttledArn := awstest.ExecutionARN(machine, "acme-a")

	r := newReconciler(p.View, sfn, p.Pub, clock)
	r.Every, r.Interval, r.QPS = 15*time.Second, 15*time.Second, 0
	r.Logger, r.Metrics = logs.Logger(), m
	from, until := start.Add(5*time.Second), start.Add(75*time.Second)
	srv.ThrottleBetween("GetExecutionHistory", from, until)
	end := start.Add(2 * time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	failed := false
	r.Sleep = func(ctx context.Context, d time.Duration) error {
		// The first task of acme-a fails and is retried inside the window.
		if now := clock.Now(); !failed && now.After(start.Add(20*time.Second)) {
			failed = true
			if err := srv.SetHistory(throttledArn, taskHistory(start.Add(-time.Minute), "TaskFailed", "TaskScheduled", "TaskStarted")); err != nil {
				t.Error(err)
			}
		}
		if clock.Now().After(end) {
			cancel()
		}
		return clock.Sleep(ctx, d)
	}
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}

	var inWindow, throttled int
	polled := map[string]map[int]bool{} // execution → the intervals it was polled in
	for _, c := range srv.Log() {
		if c.At.Before(from) || !c.At.Before(until) {
			continue
		}
		inWindow++
		if c.Failed != "" {
			throttled++
		}
		if polled[c.ExecutionARN] == nil {
			polled[c.ExecutionARN] = map[int]bool{}
		}
		polled[c.ExecutionARN][int(c.At.Sub(from)/r.Every)] = true
	}
	t.Run("ThrottledAPIBacksOff", func(t *testing.T) {
		// A probe per sweep at most, each one call: 70 s of 15 s sweeps.
		if most := int(until.Sub(from)/r.Every) + 1; throttled == 0 || throttled > most {
			t.Fatalf("%d throttled calls in the window, want 1 to %d", throttled, most)
		}
		if got := pipelinetest.Counter(t, m.Throttled, "stepfunctions", "GetExecutionHistory"); int(got) != throttled {
			t.Fatalf("throttled calls counted %v, want %d", got, throttled)
		}
	})
	t.Run("CallsWithinBudget", func(t *testing.T) {
		// Unthrottled, each poll costs a history call (and a describe when
		// something changed): no more than two calls per execution per
		// interval, whatever the throttling.
		intervals := int(until.Sub(from)/r.Every) + 1
		if most := 2 * len(tenants) * intervals; inWindow > most {
			t.Fatalf("%d calls in the window, want at most %d", inWindow, most)
		}
	})
	t.Run("EveryExecutionPolledEachInterval", func(t *testing.T) {
		for arn, tenant := range arns {
			for k := range int(until.Sub(from) / r.Every) {
				if !polled[arn][k] {
					t.Errorf("%s was not polled in interval %d of the window (%v)", tenant, k, polled[arn])
				}
			}
		}
	})
	t.Run("CaughtUp", func(t *testing.T) {
		p.Settle(t)
		v := p.Tenant(t, "acme-a")
		if v.WorkflowRetryCount != 1 || v.WorkflowSubState != substate.StateRunning {
			t.Fatalf("acme-a = %s, retries %d; want running with the retry the window held", v.WorkflowSubState, v.WorkflowRetryCount)
		}
		for _, line := range []string{"the poller backs off it", "history reads fall behind",
			"step functions answers this API again", "history reads caught up"} {
			if got := logs.Count(line); got != 1 {
				t.Errorf("%d log lines say %q, want 1", got, line)
			}
		}
		if got := testutil.ToFloat64(m.Behind.WithLabelValues("stepfunctions")); got != 0 {
			t.Errorf("behind = %v after the catch-up", got)
		}
		if got := testutil.ToFloat64(m.Backoff.WithLabelValues("stepfunctions", "GetExecutionHistory")); got != 0 {
			t.Errorf("backoff = %v s after the API answered", got)
		}
		if got := logs.Count("polls lag"); got != 0 {
			t.Errorf("%d lag warnings: the polls kept their interval", got)
		}
	})
	if t.Failed() {
		for _, c := range srv.Log() {
			fmt.Printf("%6.1fs %-20s %s %s\n", c.At.Sub(start).Seconds(), c.Op, arns[c.ExecutionARN], c.Failed)
		}
	}
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
	p := pipelinetest.New(t)
	start := time.Date(2024, 6, 19, 10, 0, 0, 0, time.UTC)
	clock := pipelinetest.NewClock(start)
	srv := awstest.New(t)
	srv.Now = clock.Now
	const budget = 4.0 // calls a second, --sfn-api-budget's default
	sfn := stepfunctions.New(srv.Config(), stepfunctions.BudgetOn(budget, clock.Now, clock.Sleep))
	sfn.Now = clock.Now
	sfn.Backoff.Rand = func() float64 { return 1 } // the longest waits the jitter allows
	var logs pipelinetest.Logs
	m := reconcile.NewMetrics(nil)
	sfn.Logger = logs.Logger()
	sfn.OnBackoff = func(op string, d time.Duration) { m.SetBackoff(substate.ProviderStepFunctions, op, d) }
	machine := awstest.StateMachineARN("tenant-provisioning")
	tenants := []string{"acme-a", "acme-b", "acme-c"}
	arns := map[string]string{}
	for i, tenant := range tenants {
		arn := awstest.ExecutionARN(machine, tenant)
		arns[arn] = tenant
		srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: machine, Name: tenant, Status: "RUNNING",
			Input: `{"tenantId":"` + tenant + `"}`, StartDate: start.Add(-time.Minute), History: taskHistory(start.Add(-time.Minute))})
		applyRunning(t, p.View, tenant, arn, uint64(i+1), start.Add(-time.Minute))
	}
	throttledArn := awstest.ExecutionARN(machine, "acme-a")

	r := newReconciler(p.View, sfn, p.Pub, clock)
	r.Every, r.Interval, r.QPS = 15*time.Second, 15*time.Second, 0
	r.Logger, r.Metrics = logs.Logger(), m
	from, until := start.Add(5*time.Second), start.Add(75*time.Second)
	srv.ThrottleExecutionBetween("DescribeExecution", throttledArn, from, until)
	const answersAgain = "step functions answers this API again"
	end := start.Add(2 * time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	failed, inWindowLines := false, -1
	r.Sleep = func(ctx context.Context, d time.Duration) error {
		// The first task of acme-a fails and is retried inside the window:
		// its next polls find new events and need its status.
		if now := clock.Now(); !failed && now.After(start.Add(10*time.Second)) {
			failed = true
			if err := srv.SetHistory(throttledArn, taskHistory(start.Add(-time.Minute), "TaskFailed", "TaskScheduled", "TaskStarted")); err != nil {
				t.Error(err)
			}
		}
		if clock.Now().Before(until) {
			inWindowLines = logs.Count(answersAgain)
		}
		if clock.Now().After(end) {
			cancel()
		}
		return clock.Sleep(ctx, d)
	}
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}

	calls := srv.Log()
	var throttled int
	polled := map[string]map[int]bool{} // execution → the intervals it was polled in
	describes := map[int]int{}          // interval → acme-a's describe calls
	for _, c := range calls {
		if c.At.Before(from) || !c.At.Before(until) {
			continue
		}
		k := int(c.At.Sub(from) / r.Every)
		if c.Failed != "" {
			throttled++
		}
		if polled[c.ExecutionARN] == nil {
			polled[c.ExecutionARN] = map[int]bool{}
		}
		polled[c.ExecutionARN][k] = true
		if c.ExecutionARN == throttledArn && c.Op == "DescribeExecution" {
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
		if got := pipelinetest.Counter(t, m.Throttled, "stepfunctions", "DescribeExecution"); int(got) != throttled {
			t.Errorf("throttled calls counted %v, want %d", got, throttled)
		}
	})
	t.Run("CallsWithinBudget", func(t *testing.T) {
		// The i-th call (from 0) goes no sooner than the budget's burst
		// (one second's worth) and rate allow since the first.
		for i, c := range calls {
			if allowed := math.Ceil(budget) + budget*c.At.Sub(calls[0].At).Seconds() + 1e-6; float64(i+1) > allowed {
				t.Fatalf("call %d (%s %s) at %v: more than the %.1f the budget allows", i, c.Op, arns[c.ExecutionARN], c.At.Sub(start), allowed)
			}
		}
	})
	t.Run("EveryExecutionPolledEachInterval", func(t *testing.T) {
		for arn, tenant := range arns {
			for k := range int(until.Sub(from) / r.Every) {
				if !polled[arn][k] {
					t.Errorf("%s was not polled in interval %d of the window (%v)", tenant, k, polled[arn])
				}
			}
		}
	})
	t.Run("CaughtUp", func(t *testing.T) {
		p.Settle(t)
		v := p.Tenant(t, "acme-a")
		if v.WorkflowRetryCount != 1 || v.WorkflowSubState != substate.StateRunning {
			t.Fatalf("acme-a = %s, retries %d; want running with the retry the window held", v.WorkflowSubState, v.WorkflowRetryCount)
		}
		if got := logs.Count("the poller backs off it"); got != 1 {
			t.Errorf("%d log lines say the API is throttled, want 1", got)
		}
		if got := logs.Count(answersAgain); inWindowLines != 0 || got != 1 {
			t.Errorf("%q logged %d times in the window and %d in all; want once, after it", answersAgain, inWindowLines, got)
		}
		if got := testutil.ToFloat64(m.Backoff.WithLabelValues("stepfunctions", "DescribeExecution")); got != 0 {
			t.Errorf("backoff = %v s after the API answered", got)
		}
	})
	if t.Failed() {
		for _, c := range calls {
			fmt.Printf("%6.1fs %-20s %s %s\n", c.At.Sub(start).Seconds(), c.Op, arns[c.ExecutionARN], c.Failed)
		}
	}
}
