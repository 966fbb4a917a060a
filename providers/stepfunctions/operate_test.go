package stepfunctions_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/testkit/awstest"
)

// startOrder starts an execution of "orders" and gives it a history that
// entered the Charge state and scheduled its task twice.
func startOrder(t *testing.T, srv *awstest.Server, p interface {
	Start(context.Context, engine.StartRequest) (engine.Execution, error)
}, machine, name string) string {
	t.Helper()
	x, err := p.Start(context.Background(), engine.StartRequest{Workflow: machine, Name: name, TenantID: "acme", Input: json.RawMessage(`{"orderId":"o-1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	err = srv.UpdateExecution(x.ID, func(e *awstest.Execution) {
		for _, ev := range []string{
			`{"id":2,"type":"TaskStateEntered","timestamp":1718791501,"stateEnteredEventDetails":{"name":"Charge"}}`,
			`{"id":3,"type":"TaskScheduled","timestamp":1718791502,"taskScheduledEventDetails":{"resource":"invoke","resourceType":"lambda","region":"us-east-1","parameters":"{}"}}`,
			`{"id":4,"type":"TaskFailed","timestamp":1718791503,"taskFailedEventDetails":{"error":"Boom","resource":"invoke","resourceType":"lambda"}}`,
			`{"id":5,"type":"TaskScheduled","timestamp":1718791504,"taskScheduledEventDetails":{"resource":"invoke","resourceType":"lambda","region":"us-east-1","parameters":"{}"}}`,
		} {
			e.History = append(e.History, json.RawMessage(ev))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return x.ID
}

// TestOperate checks what Step Functions' operator asks of the API and
// reads back from it: the state and attempts from the history, the stop's
// error and cause, the redrive count, the restart's name, the permission a
// refusal names. (What every operator does is in TestOperatorContract.)
func TestOperate(t *testing.T) {
	ctx := context.Background()
	srv, p := newProvider(t)
	machine := ensure(t, p)
	arn := startOrder(t, srv, p, machine, "order-1")

	t.Run("DescribeRunning", func(t *testing.T) {
		info, err := p.DescribeExecution(ctx, arn)
		if err != nil {
			t.Fatal(err)
		}
		if info.Step != "Charge" || info.Attempts != 2 || info.Ended || info.Retryable || info.ProviderState != "RUNNING" ||
			info.Workflow != machine || !strings.Contains(string(info.Input), `"orderId":"o-1"`) || info.StartedAt.IsZero() {
			t.Fatalf("describe %+v", info)
		}
		if !strings.Contains(info.RetryRefusal, "RUNNING") {
			t.Errorf("retry refusal %q does not say why", info.RetryRefusal)
		}
	})
	t.Run("Stop", func(t *testing.T) {
		if err := p.StopExecution(ctx, arn, substate.StopOptions{Cause: "customer left"}); err != nil {
			t.Fatal(err)
		}
		e, _ := srv.Execution(arn)
		if e.Status != "ABORTED" || e.Cause != "customer left" || e.Error != "Stopped" {
			t.Fatalf("after stop %+v", e)
		}
		info, err := p.DescribeExecution(ctx, arn)
		if err != nil || !info.Ended || !info.Retryable || info.Cause != "customer left" {
			t.Fatalf("describe stopped %+v %v", info, err)
		}
	})
	t.Run("Redrive", func(t *testing.T) {
		if err := p.RetryExecution(ctx, arn); err != nil {
			t.Fatal(err)
		}
		e, _ := srv.Execution(arn)
		if e.Status != "RUNNING" || e.RedriveCount != 1 {
			t.Fatalf("after redrive %+v", e)
		}
		if got := srv.Calls("RedriveExecution"); got != 1 {
			t.Errorf("%d RedriveExecution calls", got)
		}
	})
	t.Run("NotRedrivable", func(t *testing.T) {
		err := p.RetryExecution(ctx, arn) // running again
		wantCode(t, err, substate.ECONFLICT)
		if !strings.Contains(err.Error(), "not redrivable") {
			t.Errorf("error %q does not say why", err)
		}
	})
	t.Run("Restart", func(t *testing.T) {
		id, err := p.RestartExecution(ctx, arn)
		if err != nil {
			t.Fatal(err)
		}
		e, ok := srv.Execution(id)
		if !ok || id == arn || !strings.HasPrefix(e.Name, "order-1-r") || e.Input != `{"orderId":"o-1","tenantId":"acme"}` {
			t.Fatalf("restarted %q %+v", id, e)
		}
	})
	t.Run("AccessDenied", func(t *testing.T) {
		for _, tc := range []struct {
			op  string
			act func() error
		}{
			{"StopExecution", func() error { return p.StopExecution(ctx, arn, substate.StopOptions{}) }},
			{"RedriveExecution", func() error { return p.RetryExecution(ctx, arn) }},
			{"DescribeExecution", func() error { _, err := p.DescribeExecution(ctx, arn); return err }},
		} {
			srv.Deny(tc.op, 1)
			err := tc.act()
			wantCode(t, err, substate.EFORBIDDEN)
			if !strings.Contains(substate.ErrorMessage(err), "states:"+tc.op) {
				t.Errorf("%s: message %q does not name the action", tc.op, substate.ErrorMessage(err))
			}
		}
	})
}

// TestRedriveWindow: an execution that stopped more than 14 days ago, by
// the service's clock, is described as not retryable with Step Functions'
// reason, and its redrive is refused.
func TestRedriveWindow(t *testing.T) {
	ctx := context.Background()
	srv, p := newProvider(t)
	machine := ensure(t, p)
	arn := startOrder(t, srv, p, machine, "old")
	if err := srv.SetStatus(arn, "FAILED", "Boom", "it broke"); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(15 * 24 * time.Hour)
	srv.Now = func() time.Time { return later }
	info, err := p.DescribeExecution(ctx, arn)
	if err != nil || info.Retryable || info.RetryRefusal != "not redrivable: Execution redrivable period exceeded." {
		t.Fatalf("describe %+v %v", info, err)
	}
	wantCode(t, p.RetryExecution(ctx, arn), substate.ECONFLICT)
}
