// Package operatortest is the contract every substate.ExecutionOperator
// keeps, as one suite each provider runs against its real dependency: the
// engine in process and through its control endpoints, Step Functions
// through the AWS SDK against testkit/awstest, Restate against the real
// server of testkit/restatetest.
//
// Run describes executions the provider put in each state (running,
// succeeded, failed, waiting for a retry), stops, kills, retries and
// restarts them, and checks the refusals (an unknown id is ENOTFOUND, an
// execution in the wrong state ECONFLICT) and what the operator reports:
// an action that returns nil has taken effect by the next describe, unless
// Features say the provider only accepted it. Features say what a provider
// cannot do, or does otherwise; a provider's own rules (Step Functions'
// permissions, the engine's redrive from a caught error) stay in its own
// tests.
package operatortest

import (
	"context"
	"testing"
	"time"

	"github.com/substatehq/substate"
)

// Features says where an operator's provider differs from the others.
type Features struct {
	// Provider is the provider the operator names in its descriptions.
	Provider substate.Provider
	// Kill: a stop with Kill ends the execution (Restate kills it; the
	// engine stops it as ever). Without it, a kill is refused with
	// EINVALID and the execution runs on (Step Functions has no kill).
	Kill bool
	// StopCause: the provider keeps a stop's cause, and a describe shows
	// it as the execution's error or cause (Restate's cancel and kill take
	// none).
	StopCause bool
	// StopEndedAnswered: a stop of an execution that already ended is
	// answered as done, and changes nothing (Step Functions'
	// StopExecution). Without it, it is refused with ECONFLICT.
	StopEndedAnswered bool
	// RetryFailed: an execution that failed or was stopped can be retried
	// (the engine's and Step Functions' redrive). Without it, such an
	// execution is final and a retry is refused with ECONFLICT (Restate
	// resumes only invocations that have not completed).
	RetryFailed bool
	// RetryRunning: a running execution is retryable, and a retry of it
	// is taken (Restate resumes a suspended invocation at once). Without
	// it, it is refused with ECONFLICT.
	RetryRunning bool
	// RestartRunning: a restart of a running execution starts a new one
	// beside it (the engine, Step Functions). Without it, it is refused
	// with ECONFLICT (Restate restarts only completed invocations).
	RestartRunning bool
	// Input: a describe shows the execution's input, and a restart keeps
	// it (Restate's sys_invocation has no input).
	Input bool
	// StopPending: a stop returns once the provider accepted it, before a
	// describe shows the execution ended (Restate answers a cancel with
	// 202 Accepted and completes the invocation once its handler has run
	// its compensations): operate.Service may then report it pending,
	// never done. Without it, the next describe shows it ended. A kill
	// always ends the execution before it returns.
	StopPending bool
	// RetryPending: a retry returns once the provider accepted it, before
	// a describe shows the execution taken up. Without it, the next
	// describe shows it so.
	RetryPending bool
}

// Provider is the operator under test and the means to put executions of
// its provider in each state. Each function starts a new execution and
// returns its id once the provider describes it in that state.
type Provider struct {
	Operator substate.ExecutionOperator
	// Rules are the provider's rules, which the worker gives
	// operate.Service; zero when it has none.
	Rules substate.ProviderRules
	// Running returns an execution that runs (or waits) until stopped.
	Running func(t *testing.T) string
	// Succeeded returns an execution that ended successfully.
	Succeeded func(t *testing.T) string
	// Failed returns an execution that ended in a failure.
	Failed func(t *testing.T) string
	// Retryable returns an execution a retry takes up, whose failure has
	// gone: one that failed (the engine, Step Functions) or paused
	// (Restate), and then succeeds or runs on when retried.
	Retryable func(t *testing.T) string
	// Expired, when set, returns a failed execution whose provider no
	// longer lets it be retried (Step Functions' 14-day redrive window).
	Expired func(t *testing.T) string
	// UnknownID is a well-formed id of no execution.
	UnknownID string
	// InvalidID, when set, is an id the operator refuses with EINVALID
	// without asking the provider.
	InvalidID string
	// RunningStep is the step a describe of a Running execution names; ""
	// when the provider cannot tell.
	RunningStep string
}

// Settle bounds how long the suite waits for an execution to reach a
// state, and Poll is how often it describes it meanwhile.
const (
	Settle = time.Minute
	Poll   = 20 * time.Millisecond
)

// Run runs the contract against the operator open returns, with the
// features of its provider.
func Run(t *testing.T, f Features, open func(t *testing.T) Provider) {
	s := &suite{f: f, p: open(t)}
	for _, tc := range []struct {
		name string
		test func(t *testing.T)
	}{
		{"DescribeRunning", s.describeRunning},
		{"DescribeSucceeded", s.describeSucceeded},
		{"DescribeFailed", s.describeFailed},
		{"ErrNotFound", s.notFound},
		{"ErrInvalid", s.invalid},
		{"Stop", s.stop},
		{"StopOutcome", s.stopOutcome},
		{"Kill", s.kill},
		{"StopEnded", s.stopEnded},
		{"Retry", s.retry},
		{"RetryRefused", s.retryRefused},
		{"RetryWindow", s.retryWindow},
		{"Restart", s.restart},
		{"RestartRunning", s.restartRunning},
	} {
		t.Run(tc.name, tc.test)
	}
}

// suite is one run of the contract.
type suite struct {
	f Features
	p Provider
}

// describe describes an execution, failing the test on error.
func (s *suite) describe(t *testing.T, id string) substate.ExecutionInfo {
	t.Helper()
	info, err := s.p.Operator.DescribeExecution(context.Background(), id)
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	return info
}

// await describes an execution until ok accepts the description, and
// returns it.
func (s *suite) await(t *testing.T, id, what string, ok func(substate.ExecutionInfo) bool) substate.ExecutionInfo {
	t.Helper()
	deadline := time.Now().Add(Settle)
	for {
		info := s.describe(t, id)
		if ok(info) {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s not %s within %s: %+v", id, what, Settle, info)
		}
		time.Sleep(Poll)
	}
}

func ended(info substate.ExecutionInfo) bool { return info.Ended }

// wantCode reports, and marks the test failed, unless err carries the
// error code.
func wantCode(t *testing.T, what string, err error, code string) bool {
	t.Helper()
	if got := substate.ErrorCode(err); got != code {
		t.Errorf("%s: error code %q, want %q (err: %v)", what, got, code, err)
		return false
	}
	return true
}
