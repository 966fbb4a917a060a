package stepfunctions_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/testkit/awstest"
)

func TestStart(t *testing.T) {
	ctx := context.Background()
	srv, p := newProvider(t)
	machine := ensure(t, p)
	start := func(input string) (engine.Execution, error) {
		return p.Start(ctx, engine.StartRequest{Workflow: machine, Name: "ord-1", TenantID: "t-1", Input: json.RawMessage(input)})
	}
	first, err := start(`{"orderId":"o-1","amount":4599}`)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("OK", func(t *testing.T) {
		if got, want := first.ID, awstest.ExecutionARN(machine, "ord-1"); got != want || first.Existing || first.StartedAt.IsZero() {
			t.Fatalf("execution = %+v, want new execution %s", first, want)
		}
		x, _ := srv.Execution(first.ID)
		var input map[string]any
		if err := json.Unmarshal([]byte(x.Input), &input); err != nil || input["tenantId"] != "t-1" || input["orderId"] != "o-1" {
			t.Fatalf("input = %s, want the request input with tenantId added", x.Input)
		}
	})
	t.Run("SameInput", func(t *testing.T) {
		again, err := start(` { "amount": 4599, "orderId": "o-1" }`)
		if err != nil {
			t.Fatal(err)
		}
		if !again.Existing || again.ID != first.ID || !again.StartedAt.Equal(first.StartedAt) || again.Workflow != machine {
			t.Fatalf("execution = %+v, want the existing %+v", again, first)
		}
		if got := srv.Calls("StartExecution"); got != 1 {
			t.Fatalf("StartExecution calls = %d, want 1", got)
		}
	})
	t.Run("ErrConflict", func(t *testing.T) {
		_, err := start(`{"orderId":"o-2"}`)
		wantCode(t, err, substate.ECONFLICT)
		if !strings.Contains(err.Error(), `"ord-1"`) {
			t.Fatalf("err = %v, want it to name the execution", err)
		}
	})
	t.Run("ClosedSameInput", func(t *testing.T) {
		if err := srv.SetStatus(first.ID, "SUCCEEDED", "", ""); err != nil {
			t.Fatal(err)
		}
		again, err := start(`{"orderId":"o-1","amount":4599}`)
		if err != nil || !again.Existing {
			t.Fatalf("execution = %+v, %v; want the closed execution, Existing", again, err)
		}
	})
	t.Run("StartedMeanwhile", func(t *testing.T) {
		// The execution appears between the look-up and the start: Step
		// Functions answers ExecutionAlreadyExists and Start compares again.
		srv.Fail("DescribeExecution", 1, http.StatusBadRequest, "ExecutionDoesNotExist", "injected")
		again, err := start(`{"orderId":"o-1","amount":4599}`)
		if err != nil || !again.Existing {
			t.Fatalf("execution = %+v, %v; want the existing execution", again, err)
		}
	})
	t.Run("ByName", func(t *testing.T) {
		x, err := p.Start(ctx, engine.StartRequest{Workflow: "orders", Name: "ord-2"})
		if err != nil || x.ID != awstest.ExecutionARN(machine, "ord-2") || x.Workflow != machine {
			t.Fatalf("execution = %+v, %v", x, err)
		}
	})
}

func TestStartInvalid(t *testing.T) {
	for _, tt := range []struct {
		name string
		req  engine.StartRequest
		code string
	}{
		{"ArrayInput", engine.StartRequest{Name: "a", Input: json.RawMessage(`[1]`)}, substate.EINVALID},
		{"NotJSON", engine.StartRequest{Name: "a", Input: json.RawMessage(`{`)}, substate.EINVALID},
		{"OtherTenant", engine.StartRequest{Name: "a", TenantID: "t-1", Input: json.RawMessage(`{"tenantId":"t-2"}`)}, substate.EINVALID},
		{"BadName", engine.StartRequest{Name: "a/b"}, substate.EINVALID},
		{"LongName", engine.StartRequest{Name: strings.Repeat("n", 81)}, substate.EINVALID},
		{"BadWorkflow", engine.StartRequest{Name: "a", Workflow: "arn:aws:states:us-east-1:123456789012:activity:x"}, substate.EINVALID},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, p := newProvider(t)
			if tt.req.Workflow == "" {
				tt.req.Workflow = awstest.StateMachineARN("orders")
			}
			_, err := p.Start(context.Background(), tt.req)
			wantCode(t, err, tt.code)
			if n := srv.TotalCalls(); n != 0 {
				t.Fatalf("%d calls made, want none", n)
			}
		})
	}
	t.Run("ErrNoStateMachine", func(t *testing.T) {
		_, p := newProvider(t)
		_, err := p.Start(context.Background(), engine.StartRequest{Workflow: awstest.StateMachineARN("nope"), Name: "a"})
		wantCode(t, err, substate.ENOTFOUND)
		_, err = p.Start(context.Background(), engine.StartRequest{Workflow: "nope", Name: "a"})
		wantCode(t, err, substate.ENOTFOUND)
	})
}

func TestStop(t *testing.T) {
	ctx := context.Background()
	srv, p := newProvider(t)
	x, err := p.Start(ctx, engine.StartRequest{Workflow: ensure(t, p), Name: "ord-1"})
	if err != nil {
		t.Fatal(err)
	}
	cause := strings.Repeat("é", 20000) // 40000 bytes, above the 32768 limit
	if err := p.Stop(ctx, x.ID, "OperatorCancelled", cause); err != nil {
		t.Fatal(err)
	}
	got, _ := srv.Execution(x.ID)
	if got.Status != "ABORTED" || got.Error != "OperatorCancelled" || len(got.Cause) != 32768 || got.StopDate.IsZero() {
		t.Fatalf("execution = %s %s, cause %d bytes, stopped %v", got.Status, got.Error, len(got.Cause), got.StopDate)
	}
	if err := p.Stop(ctx, x.ID, "Again", ""); err != nil {
		t.Fatalf("stopping a closed execution: %v", err)
	}
	wantCode(t, p.Stop(ctx, awstest.ExecutionARN(x.Workflow, "nope"), "E", ""), substate.ENOTFOUND)
}
