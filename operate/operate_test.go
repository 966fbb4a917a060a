package operate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/operate"
)

// The service's collaborators are small fakes here: these tests check the
// service's own rules (what it refuses before any provider call, what it
// records). Every provider's operator runs the contract of
// testkit/operatortest against the real provider, and the whole service
// over the real pipeline is tested beside each provider
// (TestOperateEngine, TestOperateStepFunctions, TestOperateRestate).

type views map[string]substate.TenantView

func (v views) Tenant(_ context.Context, id string) (substate.TenantView, error) {
	if t, ok := v[id]; ok {
		return t, nil
	}
	return substate.TenantView{}, substate.Errorf(substate.ENOTFOUND, "tenant %q not found", id)
}

type operator struct {
	info   substate.ExecutionInfo
	calls  []string
	fail   error
	onCall func() // called as a call reaches the provider
}

func (o *operator) DescribeExecution(context.Context, string) (substate.ExecutionInfo, error) {
	return o.info, nil
}

func (o *operator) StopExecution(ctx context.Context, _ string, opts substate.StopOptions) error {
	o.calls = append(o.calls, "stop:"+opts.Cause)
	if o.onCall != nil {
		o.onCall()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return o.fail
}

func (o *operator) RetryExecution(context.Context, string) error {
	o.calls = append(o.calls, "retry")
	return o.fail
}

func (o *operator) RestartExecution(context.Context, string) (string, error) {
	o.calls = append(o.calls, "restart")
	return "x2", o.fail
}

type audit []substate.AuditEvent

// PublishAudit records ev; as a JetStream publish, not on a done context.
func (a *audit) PublishAudit(ctx context.Context, ev substate.AuditEvent) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	*a = append(*a, ev)
	return nil
}

func newService(info substate.ExecutionInfo) (*operate.Service, *operator, *audit) {
	op := &operator{info: info}
	a := &audit{}
	return &operate.Service{
		Views: views{
			"t1":   {TenantID: "t1", Provider: substate.ProviderEngine, WorkflowExecutionID: "x1"},
			"done": {TenantID: "done", Provider: substate.ProviderEngine, WorkflowSubState: substate.StateSucceeded},
			"sfn":  {TenantID: "sfn", Provider: substate.ProviderStepFunctions, WorkflowExecutionID: "arn:x"},
		},
		Operators: map[substate.Provider]substate.ExecutionOperator{substate.ProviderEngine: op},
		Audit:     a,
	}, op, a
}

func TestActRefusals(t *testing.T) {
	running := substate.ExecutionInfo{ExecutionID: "x1", ProviderState: "running", RetryRefusal: "the execution is still running"}
	ended := substate.ExecutionInfo{ExecutionID: "x1", ProviderState: "succeeded", Ended: true, RetryRefusal: "the execution succeeded"}
	for _, tc := range []struct {
		name string
		info substate.ExecutionInfo
		req  substate.ExecutionRequest
		code string
		msg  string
	}{
		{"UnknownAction", running, substate.ExecutionRequest{TenantID: "t1", Action: "pause", Who: "ops"}, substate.EINVALID, "unknown execution action"},
		{"DescribeIsNoAction", running, substate.ExecutionRequest{TenantID: "t1", Action: substate.ActionDescribe, Who: "ops"}, substate.EINVALID, "unknown execution action"},
		{"KillOnRetry", ended, substate.ExecutionRequest{TenantID: "t1", Action: substate.ActionRetry, Kill: true, Who: "ops"}, substate.EINVALID, "kill applies to stop only"},
		{"LongReason", running, substate.ExecutionRequest{TenantID: "t1", Action: substate.ActionStop, Reason: strings.Repeat("x", operate.MaxReason+1), Who: "ops"}, substate.EINVALID, "at most"},
		{"BadUTF8Reason", running, substate.ExecutionRequest{TenantID: "t1", Action: substate.ActionStop, Reason: "\xff", Who: "ops"}, substate.EINVALID, "UTF-8"},
		{"NoWho", running, substate.ExecutionRequest{TenantID: "t1", Action: substate.ActionStop}, substate.EINVALID, "who"},
		{"BadTenant", running, substate.ExecutionRequest{TenantID: "", Action: substate.ActionStop, Who: "ops"}, substate.EINVALID, ""},
		{"UnknownTenant", running, substate.ExecutionRequest{TenantID: "nobody", Action: substate.ActionStop, Who: "ops"}, substate.ENOTFOUND, "not found"},
		{"NoExecution", running, substate.ExecutionRequest{TenantID: "done", Action: substate.ActionRestart, Who: "ops"}, substate.ENOTFOUND, "no execution to act on"},
		{"NoOperator", running, substate.ExecutionRequest{TenantID: "sfn", Action: substate.ActionStop, Who: "ops"}, substate.EUNAVAILABLE, "--aws-region"},
		{"StopEnded", ended, substate.ExecutionRequest{TenantID: "t1", Action: substate.ActionStop, Who: "ops"}, substate.ECONFLICT, "already ended"},
		{"RetryRunning", running, substate.ExecutionRequest{TenantID: "t1", Action: substate.ActionRetry, Who: "ops"}, substate.ECONFLICT, "still running"},
		{"RetrySucceeded", ended, substate.ExecutionRequest{TenantID: "t1", Action: substate.ActionRetry, Who: "ops"}, substate.ECONFLICT, "succeeded"},
		{"RestartRunning", running, substate.ExecutionRequest{TenantID: "t1", Action: substate.ActionRestart, Who: "ops"}, substate.ECONFLICT, "stop it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, op, a := newService(tc.info)
			_, err := s.Act(context.Background(), tc.req)
			if got := substate.ErrorCode(err); got != tc.code || !strings.Contains(substate.ErrorMessage(err), tc.msg) {
				t.Fatalf("err %v (%s), want %s with %q", err, got, tc.code, tc.msg)
			}
			if len(op.calls) != 0 || len(*a) != 0 {
				t.Errorf("a refused request reached the provider %v or the audit %v", op.calls, *a)
			}
		})
	}
}

func TestActRecords(t *testing.T) {
	running := substate.ExecutionInfo{ExecutionID: "x1", Provider: substate.ProviderEngine, ProviderState: "running"}
	t.Run("DryRun", func(t *testing.T) {
		s, op, a := newService(running)
		res, err := s.Act(context.Background(), substate.ExecutionRequest{TenantID: "t1", Action: substate.ActionStop, DryRun: true, Who: "ops"})
		if err != nil || !res.DryRun || len(op.calls) != 0 || len(*a) != 0 {
			t.Fatalf("dry run %+v %v, calls %v, audit %v", res, err, op.calls, *a)
		}
	})
	t.Run("StopDefaultCause", func(t *testing.T) {
		s, op, a := newService(running)
		res, err := s.Act(context.Background(), substate.ExecutionRequest{TenantID: "t1", Action: substate.ActionStop, Who: "loopback"})
		if err != nil || len(op.calls) != 1 || op.calls[0] != "stop:stopped by loopback" {
			t.Fatalf("stop %+v %v, calls %v", res, err, op.calls)
		}
		if len(*a) != 1 || (*a)[0].ID != res.AuditID || (*a)[0].Outcome != substate.AuditDone || (*a)[0].Who != "loopback" {
			t.Fatalf("audit %+v for %+v", *a, res)
		}
	})
	t.Run("Refused", func(t *testing.T) {
		s, op, a := newService(running)
		op.fail = substate.Errorf(substate.EFORBIDDEN, "the credentials lack states:StopExecution")
		_, err := s.Act(context.Background(), substate.ExecutionRequest{TenantID: "t1", Action: substate.ActionStop, Reason: "r", Who: "ops"})
		if !errors.Is(err, op.fail) || len(*a) != 1 {
			t.Fatalf("err %v, audit %v", err, *a)
		}
		if ev := (*a)[0]; ev.Outcome != substate.AuditRefused || ev.ErrorCode != substate.EFORBIDDEN || !strings.Contains(ev.Error, "states:StopExecution") || ev.Reason != "r" {
			t.Fatalf("audit %+v", ev)
		}
	})
	t.Run("Unknown", func(t *testing.T) {
		// A call that failed without the provider's answer may have acted:
		// the audit event says the outcome is unknown, not refused.
		for _, fail := range []error{
			substate.Errorf(substate.EUNAVAILABLE, "restate admin api unreachable"),
			fmt.Errorf("stop: %w", context.DeadlineExceeded),
		} {
			s, op, a := newService(running)
			op.fail = fail
			if _, err := s.Act(context.Background(), substate.ExecutionRequest{TenantID: "t1", Action: substate.ActionStop, Who: "ops"}); !errors.Is(err, fail) || len(*a) != 1 {
				t.Fatalf("err %v, audit %v", err, *a)
			}
			if ev := (*a)[0]; ev.Outcome != substate.AuditUnknown || ev.Error == "" {
				t.Errorf("audit of %v: %+v", fail, ev)
			}
		}
	})
	t.Run("CallerGone", func(t *testing.T) {
		// The caller hangs up while the provider acts: the action still
		// completes and is recorded.
		s, op, a := newService(running)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		op.onCall = cancel
		res, err := s.Act(ctx, substate.ExecutionRequest{TenantID: "t1", Action: substate.ActionStop, Reason: "r", Who: "ops"})
		if err != nil || len(op.calls) != 1 {
			t.Fatalf("stop %+v %v, calls %v", res, err, op.calls)
		}
		if len(*a) != 1 || (*a)[0].ID != res.AuditID || (*a)[0].Outcome != substate.AuditDone {
			t.Fatalf("audit %+v for %+v", *a, res)
		}
	})
}
