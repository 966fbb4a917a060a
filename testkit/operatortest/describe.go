package operatortest

import (
	"context"
	"testing"

	"github.com/substatehq/substate"
)

// wantIdentity checks what every description names: the provider, the
// execution, its workflow, its start and the provider's own state.
func (s *suite) wantIdentity(t *testing.T, info substate.ExecutionInfo, id string) {
	t.Helper()
	if info.Provider != s.f.Provider || info.ExecutionID != id || info.Workflow == "" || info.StartedAt.IsZero() || info.ProviderState == "" {
		t.Errorf("described %+v; want provider %s, execution %s, a workflow, a start and the provider's state", info, s.f.Provider, id)
	}
}

// wantRetryable checks that a description says whether a retry may act,
// and why not when it may not.
func wantRetryable(t *testing.T, info substate.ExecutionInfo, want bool) {
	t.Helper()
	if info.Retryable != want {
		t.Errorf("%s execution: retryable %v, want %v (refusal %q)", info.ProviderState, info.Retryable, want, info.RetryRefusal)
	}
	if !info.Retryable && info.RetryRefusal == "" {
		t.Errorf("%s execution is not retryable and does not say why", info.ProviderState)
	}
}

func (s *suite) describeRunning(t *testing.T) {
	id := s.p.Running(t)
	info := s.describe(t, id)
	s.wantIdentity(t, info, id)
	if info.Ended || !info.StoppedAt.IsZero() || info.Error != "" {
		t.Errorf("running execution described as ended %v, stopped at %s, error %q", info.Ended, info.StoppedAt, info.Error)
	}
	wantRetryable(t, info, s.f.RetryRunning)
	if s.p.RunningStep != "" && info.Step != s.p.RunningStep {
		t.Errorf("step %q, want %q", info.Step, s.p.RunningStep)
	}
	if s.f.Input != (len(info.Input) > 0) {
		t.Errorf("input %s; want one: %v", info.Input, s.f.Input)
	}
}

func (s *suite) describeSucceeded(t *testing.T) {
	id := s.p.Succeeded(t)
	info := s.describe(t, id)
	s.wantIdentity(t, info, id)
	if !info.Ended || info.StoppedAt.IsZero() || info.Error != "" || info.Cause != "" {
		t.Errorf("succeeded execution described as ended %v, stopped at %s, error %q, cause %q", info.Ended, info.StoppedAt, info.Error, info.Cause)
	}
	wantRetryable(t, info, false)
}

func (s *suite) describeFailed(t *testing.T) {
	id := s.p.Failed(t)
	info := s.describe(t, id)
	s.wantIdentity(t, info, id)
	if !info.Ended || info.StoppedAt.IsZero() || info.Error == "" {
		t.Errorf("failed execution described as ended %v, stopped at %s, error %q", info.Ended, info.StoppedAt, info.Error)
	}
	wantRetryable(t, info, s.f.RetryFailed)
}

// calls are the operator's four calls on one id, by name.
func (s *suite) calls(id string) map[string]func() error {
	ctx, op := context.Background(), s.p.Operator
	return map[string]func() error{
		"describe": func() error { _, err := op.DescribeExecution(ctx, id); return err },
		"stop":     func() error { return op.StopExecution(ctx, id, substate.StopOptions{Cause: "contract"}) },
		"retry":    func() error { return op.RetryExecution(ctx, id) },
		"restart":  func() error { _, err := op.RestartExecution(ctx, id); return err },
	}
}

func (s *suite) notFound(t *testing.T) {
	for name, call := range s.calls(s.p.UnknownID) {
		wantCode(t, name+" of an unknown execution", call(), substate.ENOTFOUND)
	}
}

func (s *suite) invalid(t *testing.T) {
	if s.p.InvalidID == "" {
		t.Skip("every id is well-formed for this provider")
	}
	for name, call := range s.calls(s.p.InvalidID) {
		wantCode(t, name+" of "+s.p.InvalidID, call(), substate.EINVALID)
	}
}
