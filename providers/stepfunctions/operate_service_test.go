package stepfunctions_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/operatortest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// TestOperateStepFunctions: stop, redrive, a redrive refused for a missing
// permission and a restart, against the fake Step Functions through the
// real SDK; the view after each and the audit events.
func TestOperateStepFunctions(t *testing.T) {
	ctx := context.Background()
	srv := awstest.New(t)
	sfn := stepfunctions.New(srv.Config())
	sfn.AccountID, sfn.RoleARN = awstest.AccountID, "arn:aws:iam::123456789012:role/substate-sfn"
	machine, err := sfn.EnsureWorkflow(ctx, engine.Workflow{Name: "orders", Definition: []byte(`{"StartAt":"Charge","States":{"Charge":{"Type":"Pass","End":true}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	x, err := sfn.Start(ctx, engine.StartRequest{Workflow: machine, Name: "order-1", TenantID: "t-sfn", Input: json.RawMessage(`{"orderId":"o-1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	p := pipelinetest.New(t)
	raw, err := sfn.Poll(ctx, x.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	p.Publish(t, raw)
	p.WaitTenant(t, "t-sfn", "running", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateRunning })
	s := operatortest.Service(t, p, substate.ProviderStepFunctions, sfn, sfn, stepfunctions.Rules(awstest.Region))

	if _, err := s.Act(ctx, substate.ExecutionRequest{TenantID: "t-sfn", Action: substate.ActionStop, Kill: true, Who: "ops"}); substate.ErrorCode(err) != substate.EINVALID {
		t.Errorf("kill on Step Functions: %v", err)
	}
	res := operatortest.Act(t, s, substate.ExecutionRequest{TenantID: "t-sfn", Action: substate.ActionStop, Reason: "customer left"})
	operatortest.WantStopped(t, p, "t-sfn", x.ID, "customer left")
	operatortest.WantAudit(t, p, res, substate.AuditDone)
	if _, err := s.Act(ctx, substate.ExecutionRequest{TenantID: "t-sfn", Action: substate.ActionStop, Who: "ops"}); substate.ErrorCode(err) != substate.ECONFLICT || !strings.Contains(err.Error(), "already ended") {
		t.Errorf("second stop: %v", err)
	}

	res = operatortest.Act(t, s, substate.ExecutionRequest{TenantID: "t-sfn", Action: substate.ActionRetry, Reason: "customer back"})
	p.WaitTenant(t, "t-sfn", "redriven", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateRunning })
	operatortest.WantAudit(t, p, res, substate.AuditDone)
	if e, _ := srv.Execution(x.ID); e.RedriveCount != 1 || e.Status != "RUNNING" {
		t.Fatalf("after retry %+v", e)
	}

	if err := srv.SetStatus(x.ID, "FAILED", "Boom", "card declined"); err != nil {
		t.Fatal(err)
	}
	srv.Deny("RedriveExecution", 1)
	_, err = s.Act(ctx, substate.ExecutionRequest{TenantID: "t-sfn", Action: substate.ActionRetry, Who: "ops"})
	if substate.ErrorCode(err) != substate.EFORBIDDEN || !strings.Contains(err.Error(), "states:RedriveExecution") {
		t.Fatalf("denied redrive: %v", err)
	}
	if ev := operatortest.LastAudit(t, p, substate.ActionRetry, "t-sfn"); ev.Outcome != substate.AuditRefused || !strings.Contains(ev.Error, "states:RedriveExecution") {
		t.Errorf("refused redrive audit %+v", ev)
	}

	res = operatortest.Act(t, s, substate.ExecutionRequest{TenantID: "t-sfn", Action: substate.ActionRestart, Reason: "start over"})
	p.WaitTenant(t, "t-sfn", "restarted", func(v substate.TenantView) bool {
		return v.WorkflowSubState == substate.StateRunning && v.WorkflowExecutionID == res.NewExecutionID
	})
	operatortest.WantAudit(t, p, res, substate.AuditDone)
}
