package stepfunctions_test

import (
	"context"
	"slices"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/testkit/awstest"
)

func TestCheckPermissions(t *testing.T) {
	ctx := context.Background()
	every := []stepfunctions.Feature{stepfunctions.FeatureReconcile, stepfunctions.FeatureOperate}
	t.Run("AllGranted", func(t *testing.T) {
		srv, p := newProvider(t)
		missing, err := p.CheckPermissions(ctx, every...)
		if err != nil || len(missing) != 0 {
			t.Fatalf("missing %v, err %v", missing, err)
		}
		for _, op := range []string{"DescribeExecution", "GetExecutionHistory", "StopExecution", "RedriveExecution", "StartExecution"} {
			if srv.Calls(op) != 1 {
				t.Errorf("%s probed %d times, want once", op, srv.Calls(op))
			}
		}
		if _, ok := srv.Execution(awstest.ExecutionARN(awstest.StateMachineARN("substate-permission-probe"), "substate-permission-probe")); ok {
			t.Error("a probe started an execution")
		}
		if out, _ := p.Client().ListStateMachines(ctx, nil); len(out.StateMachines) != 0 {
			t.Error("a probe created a state machine")
		}
	})
	t.Run("Denied", func(t *testing.T) {
		srv, p := newProvider(t)
		srv.Deny("StopExecution", 1)
		srv.Deny("RedriveExecution", 1)
		missing, err := p.CheckPermissions(ctx, stepfunctions.FeatureReconcile, stepfunctions.FeatureOperate)
		if err != nil || !slices.Equal(missing, []string{"StopExecution", "RedriveExecution"}) {
			t.Fatalf("missing %v, err %v", missing, err)
		}
		if srv.Calls("StartExecution") != 1 || srv.Calls("GetExecutionHistory") != 1 {
			t.Errorf("probed StartExecution %d, GetExecutionHistory %d times, want each once", srv.Calls("StartExecution"), srv.Calls("GetExecutionHistory"))
		}
	})
	t.Run("AccountLearned", func(t *testing.T) {
		srv, p := newProvider(t)
		p.AccountID = ""
		srv.AddStateMachine("orders", definition, roleARN)
		if missing, err := p.CheckPermissions(ctx, stepfunctions.FeatureReconcile); err != nil || len(missing) != 0 {
			t.Fatalf("missing %v, err %v", missing, err)
		}
	})
	t.Run("ErrAccountUnknown", func(t *testing.T) {
		_, p := newProvider(t)
		p.AccountID = ""
		_, err := p.CheckPermissions(ctx, stepfunctions.FeatureReconcile)
		wantCode(t, err, substate.EUNAVAILABLE)
	})
}
