package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/testkit/awstest"
)

// TestStepFunctionsStep describes a Step Functions execution whose history
// (the recorded one, served by the local AWS server) entered a state: the
// mapped event names that state as its step.
func TestStepFunctionsStep(t *testing.T) {
	srv := awstest.New(t)
	p := stepfunctions.New(srv.Config())
	p.AccountID, p.RoleARN = awstest.AccountID, "arn:aws:iam::123456789012:role/substate-sfn"
	ctx := context.Background()
	ref, err := p.EnsureWorkflow(ctx, engine.Workflow{Name: "orders",
		Definition: []byte(`{"StartAt":"ChargeCard","States":{"ChargeCard":{"Type":"Wait","Seconds":3600,"End":true}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	x, err := p.Start(ctx, engine.StartRequest{Workflow: ref, Name: "s-1", TenantID: "t-1", Input: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if ev := describe(t, p, x.ID); ev.Step != "" {
		t.Fatalf("step %q before any state was entered, want none", ev.Step)
	}
	var page struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(fixtures.Provider("sfn-history-retry.json"), &page); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetHistory(x.ID, page.Events); err != nil {
		t.Fatal(err)
	}
	ev := describe(t, p, x.ID)
	if ev.Step != "ChargeCard" || ev.Provider != substate.ProviderStepFunctions {
		t.Errorf("step %q from %s, want ChargeCard from the history's newest entered state", ev.Step, ev.Provider)
	}
}
