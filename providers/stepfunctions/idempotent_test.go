package stepfunctions_test

import (
	"context"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/testkit/awstest"
)

// TestIdempotencyKey: with the context's idempotency key, a redrive asked
// twice redrives once and a restart asked twice starts one execution, even
// after that execution ended; without a key every restart is new.
func TestIdempotencyKey(t *testing.T) {
	srv := awstest.New(t)
	p := stepfunctions.New(srv.Config())
	machine := srv.AddStateMachine("orders", `{"StartAt":"Done","States":{"Done":{"Type":"Succeed"}}}`, "arn:aws:iam::123456789012:role/sfn")
	arn := awstest.ExecutionARN(machine, "ord-1")
	srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: machine, Name: "ord-1", Status: "FAILED", Input: `{"n":1}`,
		StartDate: time.Now(), StopDate: time.Now()})
	ctx := substate.WithIdempotencyKey(context.Background(), "job-1/t-1/"+arn)
	for range 2 {
		if err := p.RetryExecution(ctx, arn); err != nil {
			t.Fatal(err)
		}
	}
	if e, _ := srv.Execution(arn); e.RedriveCount != 1 {
		t.Errorf("redrives %d, want 1", e.RedriveCount)
	}
	first, err := p.RestartExecution(ctx, arn)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetStatus(first, "SUCCEEDED", "", ""); err != nil {
		t.Fatal(err)
	}
	again, err := p.RestartExecution(ctx, arn)
	if err != nil || again != first {
		t.Errorf("restart asked again: %q, %v; want %q", again, err, first)
	}
	other, err := p.RestartExecution(context.Background(), arn)
	if err != nil || other == first {
		t.Errorf("restart without a key: %q, %v", other, err)
	}
	if !p.Idempotent(substate.ActionRetry) || !p.Idempotent(substate.ActionRestart) || p.Idempotent(substate.ActionStop) {
		t.Error("Idempotent")
	}
}
