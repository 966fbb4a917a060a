package actions_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/actions"
	"github.com/substatehq/substate/internal/timex"
	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// failSFN adds n failed Step Functions executions of tenants prefix-…, and
// waits until the view shows them failed.
func (f *fleet) failSFN(t *testing.T, srv *awstest.Server, p *stepfunctions.Provider, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	machine := srv.AddStateMachine("orders", `{"StartAt":"Charge","States":{"Charge":{"Type":"Pass","End":true}}}`, "arn:aws:iam::123456789012:role/sfn")
	now := time.Now().UTC()
	for i := range n {
		tenant := fmt.Sprintf("%s%04d", prefix, i)
		arn := awstest.ExecutionARN(machine, "run-"+tenant)
		srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: machine, Name: "run-" + tenant, Status: "FAILED",
			Input: `{"tenantId":"` + tenant + `"}`, StartDate: now.Add(-time.Minute), StopDate: now, Error: "States.TaskFailed", Cause: "card declined"})
		raw, err := p.Poll(ctx, arn, true)
		if err != nil {
			t.Fatal(err)
		}
		f.p.Publish(t, raw)
	}
	pipelinetest.WaitFor(t, "the executions to fail", func() bool {
		sel, err := f.p.View.Select(ctx, substate.TenantFilter{TenantPrefix: prefix, SubState: substate.StateFailed}, 1_000_000)
		return err == nil && len(sel.Tenants) == n
	})
}

// TestJobAbsorbsThrottling: Step Functions throttles the job's calls (its
// quotas here are far below the lane's limits); the job backs off and
// completes, no member is refused or unknown for it, and every execution
// was redriven once.
func TestJobAbsorbsThrottling(t *testing.T) {
	f := newFleet(t)
	srv := awstest.New(t)
	p := stepfunctions.New(srv.Config())
	f.failSFN(t, srv, p, "sfn-", 40)
	f.ops[substate.ProviderStepFunctions] = p
	f.limits["stepfunctions"] = actions.Limits{Concurrency: 8, APIs: map[string]actions.Bucket{
		"DescribeExecution": {Size: 1000, Rate: 1000}, "RedriveExecution": {Size: 1000, Rate: 1000}}}
	f.throttle = timex.Backoff{Base: 50 * time.Millisecond, Max: time.Second}
	f.start(t)
	f.svc.Lanes = append(f.svc.Lanes, "stepfunctions")
	srv.ResetCalls()
	srv.Quota("DescribeExecution", 5, 60)
	srv.Quota("GetExecutionHistory", 5, 60)
	srv.Quota("RedriveExecution", 3, 20)
	ctx := context.Background()
	j, err := f.svc.Create(ctx, request(substate.ActionRetry, substate.TenantFilter{TenantPrefix: "sfn-"}))
	if err != nil {
		t.Fatal(err)
	}
	j = f.waitJob(t, j.ID, 2*time.Minute)
	if j.State != substate.JobDone || j.Progress.Done != 40 {
		t.Fatalf("job %+v %+v", j.Progress, j.Reasons)
	}
	throttled, redrives := 0, map[string]int{}
	for _, c := range srv.Log() {
		switch {
		case c.Failed == "ThrottlingException":
			throttled++
		case c.Op == "RedriveExecution" && c.Failed == "":
			redrives[c.ExecutionARN]++
		}
	}
	if throttled == 0 {
		t.Error("Step Functions throttled nothing: the test shows nothing")
	}
	for arn, n := range redrives {
		if e, _ := srv.Execution(arn); n != 1 || e.RedriveCount != 1 {
			t.Errorf("%s: redriven %d times (%d calls)", arn, e.RedriveCount, n)
		}
	}
	if len(redrives) != 40 {
		t.Errorf("%d executions redriven, want 40", len(redrives))
	}
	t.Logf("%d calls throttled", throttled)
}
