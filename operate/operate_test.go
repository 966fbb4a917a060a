package operate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/operate"
	"github.com/substatehq/substate/providers/restate"
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
	mu     sync.Mutex
	info   substate.ExecutionInfo
	calls  []string
	fail   error
	onCall func() // called as a call reaches the provider
	// afterStop, when set, is what a stop that returns nil leaves the
	// execution as; nil: stopped at once.
	afterStop *substate.ExecutionInfo
	// unknown is an id DescribeExecution does not find (a new execution
	// the provider does not describe yet).
	unknown string
}

func (o *operator) DescribeExecution(_ context.Context, id string) (substate.ExecutionInfo, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if id == o.unknown {
		return substate.ExecutionInfo{}, substate.Errorf(substate.ENOTFOUND, "execution %s not found", id)
	}
	return o.info, nil
}

// set changes what the provider describes.
func (o *operator) set(info substate.ExecutionInfo) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.info = info
}

func (o *operator) StopExecution(ctx context.Context, _ string, opts substate.StopOptions) error {
	o.calls = append(o.calls, "stop:"+opts.Cause)
	if o.onCall != nil {
		o.onCall()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.fail == nil {
		after := o.info
		after.Ended, after.Stopped, after.ProviderState = true, true, "stopped"
		if o.afterStop != nil {
			after = *o.afterStop
		}
		o.set(after)
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

var auditMu sync.Mutex

// PublishAudit records ev; as a JetStream publish, not on a done context.
func (a *audit) PublishAudit(ctx context.Context, ev substate.AuditEvent) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	auditMu.Lock()
	defer auditMu.Unlock()
	*a = append(*a, ev)
	return nil
}

// events returns the events recorded so far.
func (a *audit) events() []substate.AuditEvent {
	auditMu.Lock()
	defer auditMu.Unlock()
	return append([]substate.AuditEvent(nil), *a...)
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
		Hints:     map[substate.Provider]string{substate.ProviderStepFunctions: "configure an AWS region (--aws-region or AWS_REGION)"},
		Audit:     a, Settle: 50 * time.Millisecond, Every: 10 * time.Millisecond,
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

// TestActReadsBack: an action is done only when the provider's state read
// back shows it; a stop the provider accepted without effect is pending,
// says what happens next, and its outcome is recorded once known by a
// follow-up audit event; a stop that found the execution ended meanwhile
// is refused.
func TestActReadsBack(t *testing.T) {
	running := substate.ExecutionInfo{ExecutionID: "x1", Provider: substate.ProviderEngine, ProviderState: "running"}
	stop := substate.ExecutionRequest{TenantID: "t1", Action: substate.ActionStop, Reason: "r", Who: "ops"}
	t.Run("Pending", func(t *testing.T) {
		s, op, a := newService(running)
		defer s.Close()
		op.afterStop = &running
		res, err := s.Act(context.Background(), stop)
		if err != nil || res.Outcome != substate.AuditPending || !strings.Contains(res.Next, "follow-up audit event") {
			t.Fatalf("stop without effect: %+v, %v; want pending, saying what happens next", res, err)
		}
		if ev := a.events(); len(ev) != 1 || ev[0].Outcome != substate.AuditPending || ev[0].Detail != res.Next {
			t.Fatalf("audit %+v", ev)
		}
		op.set(substate.ExecutionInfo{ExecutionID: "x1", Provider: substate.ProviderEngine, ProviderState: "stopped", Ended: true, Stopped: true})
		pipelineWait(t, "the follow-up audit event", func() bool { return len(a.events()) == 2 })
		if ev := a.events()[1]; ev.Outcome != substate.AuditDone || ev.Settles != res.AuditID || ev.Who != "ops" || ev.Reason != "r" {
			t.Fatalf("follow-up %+v, want done settling %s", ev, res.AuditID)
		}
	})
	t.Run("OvertakenByKill", func(t *testing.T) {
		// A cancel still pending when a kill (another action) ended the
		// execution changed nothing: its follow-up says so, never done.
		s, op, a := newService(running)
		defer s.Close()
		op.afterStop = &running
		res, err := s.Act(context.Background(), stop)
		if err != nil || res.Outcome != substate.AuditPending {
			t.Fatalf("stop without effect: %+v, %v; want pending", res, err)
		}
		op.set(substate.ExecutionInfo{ExecutionID: "x1", Provider: substate.ProviderEngine, ProviderState: "completed: failure", Ended: true, Stopped: true, Killed: true})
		pipelineWait(t, "the follow-up audit event", func() bool { return len(a.events()) == 2 })
		if ev := a.events()[1]; ev.Outcome != substate.AuditRefused || ev.ErrorCode != substate.ECONFLICT || ev.Settles != res.AuditID || !strings.Contains(ev.Error, "killed before the cancel") {
			t.Fatalf("follow-up %+v, want refused settling %s", ev, res.AuditID)
		}
	})
	t.Run("EndedMeanwhile", func(t *testing.T) {
		s, op, a := newService(running)
		op.afterStop = &substate.ExecutionInfo{ExecutionID: "x1", Provider: substate.ProviderEngine, ProviderState: "succeeded", Ended: true}
		res, err := s.Act(context.Background(), stop)
		if substate.ErrorCode(err) != substate.ECONFLICT || res.Outcome != substate.AuditRefused || !strings.Contains(substate.ErrorMessage(err), "changed nothing") {
			t.Fatalf("stop of an execution that ended meanwhile: %+v, %v; want refused", res, err)
		}
		if ev := a.events(); len(ev) != 1 || ev[0].Outcome != substate.AuditRefused || ev[0].ErrorCode != substate.ECONFLICT {
			t.Fatalf("audit %+v", ev)
		}
	})
	t.Run("Recheck", func(t *testing.T) {
		s, op, a := newService(running)
		s.Watch = time.Nanosecond // the background check gives up at once
		op.afterStop = &running
		res, _ := s.Act(context.Background(), stop)
		s.Close()
		op.set(substate.ExecutionInfo{ExecutionID: "x1", Provider: substate.ProviderEngine, Ended: true, Stopped: true})
		got, err := s.Recheck(context.Background(), res, stop)
		if err != nil || got.Outcome != substate.AuditDone {
			t.Fatalf("recheck %+v, %v", got, err)
		}
		ev := a.events()
		if last := ev[len(ev)-1]; last.Outcome != substate.AuditDone || last.Settles != res.AuditID || last.ID != got.AuditID {
			t.Fatalf("audit %+v", ev)
		}
	})
	t.Run("Skipped", func(t *testing.T) {
		s, op, a := newService(running)
		req := stop
		req.ExecutionID = "x0"
		res, err := s.Act(context.Background(), req)
		if err != nil || res.Outcome != substate.AuditSkipped || len(op.calls) != 0 {
			t.Fatalf("skip %+v, %v, calls %v", res, err, op.calls)
		}
		if ev := a.events(); len(ev) != 1 || ev[0].Outcome != substate.AuditSkipped || !strings.Contains(ev[0].Detail, "changed") {
			t.Fatalf("audit %+v", ev)
		}
	})
}

// pipelineWait waits up to 10 s for cond.
func pipelineWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10 s", what)
		}
	}
}

// A pending retry or restart says what the provider may be doing, as its
// rules say: a Restate invocation resumed and failing again is back in its
// state, with more attempts; a restart's new execution is named.
func TestPendingNext(t *testing.T) {
	backingOff := substate.ExecutionInfo{ExecutionID: "inv_1", Provider: substate.ProviderRestate, ProviderState: "backing-off", Attempts: 2, Retryable: true}
	ended := substate.ExecutionInfo{ExecutionID: "x1", Provider: substate.ProviderEngine, ProviderState: "failed", Ended: true}
	tests := []struct {
		name string
		info substate.ExecutionInfo
		req  substate.ExecutionRequest
		says []string
	}{
		{"RestateRetry", backingOff, substate.ExecutionRequest{TenantID: "rs", Action: substate.ActionRetry, Who: "ops"},
			[]string{"backing-off again", "(2 before the retry)", "executions describe", "follow-up audit event"}},
		{"Restart", ended, substate.ExecutionRequest{TenantID: "t1", Action: substate.ActionRestart, Who: "ops"},
			[]string{"the new execution x2 is not described", "follow-up audit event"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, op, _ := newService(tt.info)
			defer s.Close()
			s.Views.(views)["rs"] = substate.TenantView{TenantID: "rs", Provider: substate.ProviderRestate, WorkflowExecutionID: "inv_1"}
			s.Operators[substate.ProviderRestate] = op
			s.Rules = map[substate.Provider]substate.ProviderRules{substate.ProviderRestate: restate.Rules()}
			op.unknown = "x2"
			res, err := s.Act(context.Background(), tt.req)
			if err != nil || res.Outcome != substate.AuditPending {
				t.Fatalf("%s: %+v, %v; want pending", tt.req.Action, res, err)
			}
			for _, want := range tt.says {
				if !strings.Contains(res.Next, want) {
					t.Errorf("next %q does not say %q", res.Next, want)
				}
			}
		})
	}
}
