package operatortest

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/substatehq/substate"
)

// stopCause is the cause the suite stops executions with.
const stopCause = "contract: wrong plan"

// stopped checks an execution a stop (or kill) returned nil for: the next
// describe shows it ended unless pending (the provider only accepted the
// stop); it ends, with the cause where the provider keeps one, and can
// then be retried as a failed execution can.
func (s *suite) stopped(t *testing.T, id string, pending bool) {
	t.Helper()
	if info := s.describe(t, id); !info.Ended && !pending {
		t.Errorf("the stop returned, but the execution is still %s: the operator reports more than the provider did", info.ProviderState)
	}
	info := s.await(t, id, "ended", ended)
	if info.StoppedAt.IsZero() {
		t.Errorf("stopped execution without a stop time: %+v", info)
	}
	if !info.Stopped {
		t.Errorf("stopped execution not described as stopped: a read-back cannot tell the stop took effect: %+v", info)
	}
	if got := info.Error + " " + info.Cause; s.f.StopCause && !strings.Contains(got, stopCause) {
		t.Errorf("stopped execution's error and cause %q do not hold the cause %q", got, stopCause)
	}
	wantRetryable(t, info, s.f.RetryFailed)
}

func (s *suite) stop(t *testing.T) {
	id := s.p.Running(t)
	if err := s.p.Operator.StopExecution(context.Background(), id, substate.StopOptions{Cause: stopCause}); err != nil {
		t.Fatalf("stop: %v", err)
	}
	s.stopped(t, id, s.f.StopPending)
}

// stopOutcome stops a running execution through operate.Service, as the
// worker does, and checks its outcome against the provider's state: done
// only when a describe shows the execution stopped, pending only while it
// does not, and the audit event says the same.
func (s *suite) stopOutcome(t *testing.T) {
	id := s.p.Running(t)
	svc, audit := s.service(id)
	svc.Settle = 0
	res, err := svc.Act(context.Background(), substate.ExecutionRequest{TenantID: "contract", Action: substate.ActionStop, Reason: stopCause, Who: "contract"})
	if err != nil {
		t.Fatalf("stop: %v", err)
	}
	info := s.describe(t, id)
	switch res.Outcome {
	case substate.AuditDone:
		if !info.Ended || !info.Stopped {
			t.Errorf("the stop is reported done, but the execution is %s (ended %v, stopped %v): an over-claim", info.ProviderState, info.Ended, info.Stopped)
		}
	case substate.AuditPending:
		if !s.f.StopPending {
			t.Errorf("the stop is pending, but the provider stops at once")
		}
		if res.Next == "" {
			t.Errorf("a pending stop does not say what happens next")
		}
	default:
		t.Errorf("stop outcome %q, want done or pending", res.Outcome)
	}
	if ev := audit.last(t); ev.Outcome != res.Outcome || ev.ID != res.AuditID {
		t.Errorf("audit event %+v does not record the outcome %s", ev, res.Outcome)
	}
	svc.Close()
	s.await(t, id, "ended", ended)
}

func (s *suite) kill(t *testing.T) {
	id := s.p.Running(t)
	if info := s.describe(t, id); (info.KillRefusal == "") != s.f.Kill {
		t.Errorf("describe's kill refusal %q: a kill is taken: %v", info.KillRefusal, s.f.Kill)
	}
	// A dry run tells the provider's truth: refused where the kill is.
	svc, _ := s.service(id)
	_, err := svc.Act(context.Background(), substate.ExecutionRequest{TenantID: "contract", Action: substate.ActionStop, Kill: true, DryRun: true, Who: "contract"})
	if want := map[bool]string{true: "", false: substate.EINVALID}[s.f.Kill]; substate.ErrorCode(err) != want {
		t.Errorf("dry run of a kill: %v, want code %q as the real kill", err, want)
	}
	svc.Close()
	err = s.p.Operator.StopExecution(context.Background(), id, substate.StopOptions{Cause: stopCause, Kill: true})
	if !s.f.Kill {
		wantCode(t, "kill", err, substate.EINVALID)
		if info := s.describe(t, id); info.Ended {
			t.Errorf("a refused kill ended the execution: %+v", info)
		}
		return
	}
	if err != nil {
		t.Fatalf("kill: %v", err)
	}
	s.stopped(t, id, false)
}

func (s *suite) stopEnded(t *testing.T) {
	for name, start := range map[string]func(*testing.T) string{"succeeded": s.p.Succeeded, "failed": s.p.Failed} {
		id := start(t)
		before := s.describe(t, id)
		err := s.p.Operator.StopExecution(context.Background(), id, substate.StopOptions{Cause: stopCause})
		if !s.f.StopEndedAnswered {
			wantCode(t, "stop of a "+name+" execution", err, substate.ECONFLICT)
		} else if err != nil {
			t.Errorf("stop of a %s execution: %v, want it answered as done", name, err)
		}
		after := s.describe(t, id)
		if after.ProviderState != before.ProviderState || after.Error != before.Error || after.Cause != before.Cause {
			t.Errorf("stop of a %s execution changed it: %+v, before %+v", name, after, before)
		}
		if after.Stopped {
			t.Errorf("a %s execution a stop reached after it ended is described as stopped: a read-back would call the stop done: %+v", name, after)
		}
	}
}

// takenUp reports whether a retried execution has left the state it was
// retried in, and its failure with it.
func takenUp(before substate.ExecutionInfo) func(substate.ExecutionInfo) bool {
	return func(info substate.ExecutionInfo) bool {
		return info.ProviderState != before.ProviderState && info.Error == ""
	}
}

func (s *suite) retry(t *testing.T) {
	id := s.p.Retryable(t)
	before := s.describe(t, id)
	if !before.Retryable {
		t.Fatalf("the retryable execution is described as not retryable: %+v", before)
	}
	if err := s.p.Operator.RetryExecution(context.Background(), id); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if info := s.describe(t, id); !takenUp(before)(info) && !s.f.RetryPending {
		t.Errorf("the retry returned, but the execution is still %s (error %q): the operator reports more than the provider did", info.ProviderState, info.Error)
	}
	s.await(t, id, "taken up", takenUp(before))
}

func (s *suite) retryRefused(t *testing.T) {
	ctx := context.Background()
	wantCode(t, "retry of a succeeded execution", s.p.Operator.RetryExecution(ctx, s.p.Succeeded(t)), substate.ECONFLICT)
	if !s.f.RetryFailed {
		wantCode(t, "retry of a failed execution", s.p.Operator.RetryExecution(ctx, s.p.Failed(t)), substate.ECONFLICT)
	}
	id := s.p.Running(t)
	err := s.p.Operator.RetryExecution(ctx, id)
	if !s.f.RetryRunning {
		wantCode(t, "retry of a running execution", err, substate.ECONFLICT)
	} else if err != nil {
		t.Errorf("retry of a running execution: %v, want it taken", err)
	}
	if info := s.describe(t, id); info.Ended {
		t.Errorf("a retry ended a running execution: %+v", info)
	}
}

func (s *suite) retryWindow(t *testing.T) {
	if s.p.Expired == nil {
		t.Skip("the provider has no retry window")
	}
	id := s.p.Expired(t)
	info := s.describe(t, id)
	if !info.Ended {
		t.Errorf("expired execution not ended: %+v", info)
	}
	wantRetryable(t, info, false)
	wantCode(t, "retry after the window", s.p.Operator.RetryExecution(context.Background(), id), substate.ECONFLICT)
}

// wantRestarted checks the execution a restart of old started: a new id
// the provider describes, of the same workflow, with the same input where
// the provider shows it.
func (s *suite) wantRestarted(t *testing.T, old substate.ExecutionInfo, newID string) {
	t.Helper()
	if newID == "" || newID == old.ExecutionID {
		t.Fatalf("restart of %s reported the new execution %q", old.ExecutionID, newID)
	}
	info := s.describe(t, newID)
	s.wantIdentity(t, info, newID)
	if info.Workflow != old.Workflow {
		t.Errorf("restarted execution of %q, want %q", info.Workflow, old.Workflow)
	}
	if s.f.Input && !sameJSON(info.Input, old.Input) {
		t.Errorf("restarted with input %s, want %s", info.Input, old.Input)
	}
}

func (s *suite) restart(t *testing.T) {
	for name, start := range map[string]func(*testing.T) string{"succeeded": s.p.Succeeded, "failed": s.p.Failed} {
		id := start(t)
		old := s.describe(t, id)
		newID, err := s.p.Operator.RestartExecution(context.Background(), id)
		if err != nil {
			t.Fatalf("restart of a %s execution: %v", name, err)
		}
		s.wantRestarted(t, old, newID)
		if again := s.describe(t, id); again.ProviderState != old.ProviderState || !again.Ended {
			t.Errorf("the restart changed the %s execution: %+v", name, again)
		}
	}
}

func (s *suite) restartRunning(t *testing.T) {
	id := s.p.Running(t)
	old := s.describe(t, id)
	newID, err := s.p.Operator.RestartExecution(context.Background(), id)
	if !s.f.RestartRunning {
		wantCode(t, "restart of a running execution", err, substate.ECONFLICT)
	} else if err != nil {
		t.Fatalf("restart of a running execution: %v", err)
	} else {
		s.wantRestarted(t, old, newID)
	}
	if info := s.describe(t, id); info.Ended {
		t.Errorf("a restart ended the running execution: %+v", info)
	}
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}
