package substate_test

import (
	"errors"
	"testing"

	"github.com/substatehq/substate"
)

func TestParseSubState(t *testing.T) {
	for _, s := range substate.SubStates {
		t.Run(string(s), func(t *testing.T) {
			got, err := substate.ParseSubState(" " + string(s) + " ")
			if err != nil || got != s {
				t.Fatalf("ParseSubState(%q) = %q, %v", s, got, err)
			}
		})
	}
	t.Run("ErrInvalid", func(t *testing.T) {
		_, err := substate.ParseSubState("paused")
		if got, want := substate.ErrorCode(err), substate.EINVALID; got != want {
			t.Fatalf("code = %q, want %q", got, want)
		}
	})
}

func TestSubStateTables(t *testing.T) {
	tests := []struct {
		s        substate.SubState
		verb     substate.Verb
		status   substate.Status
		terminal bool
	}{
		{substate.StateRunning, substate.VerbExecuting, substate.StatusRunning, false},
		{substate.StateWaiting, substate.VerbWaiting, substate.StatusPaused, false},
		{substate.StateBackingOff, substate.VerbRetrying, substate.StatusRunning, false},
		{substate.StateError, substate.VerbFailing, substate.StatusRunning, false},
		{substate.StateSucceeded, substate.VerbCompleted, substate.StatusCompleted, true},
		{substate.StateFailed, substate.VerbFailed, substate.StatusFailed, true},
	}
	for _, tt := range tests {
		if got := tt.s.Verb(); got != tt.verb {
			t.Errorf("%s.Verb() = %q, want %q", tt.s, got, tt.verb)
		}
		if got := tt.s.Status(); got != tt.status {
			t.Errorf("%s.Status() = %q, want %q", tt.s, got, tt.status)
		}
		if got := tt.s.Terminal(); got != tt.terminal {
			t.Errorf("%s.Terminal() = %v, want %v", tt.s, got, tt.terminal)
		}
	}
}

func TestAuditOutcome(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, substate.AuditDone},
		{substate.Errorf(substate.ECONFLICT, "already ended"), substate.AuditRefused},
		{substate.Errorf(substate.EFORBIDDEN, "lacks states:StopExecution"), substate.AuditRefused},
		{substate.Errorf(substate.ETHROTTLED, "slow down"), substate.AuditRefused},
		{substate.Errorf(substate.EUNAVAILABLE, "unreachable"), substate.AuditUnknown},
		{errors.New("context deadline exceeded"), substate.AuditUnknown},
	}
	for _, tt := range tests {
		if got := substate.AuditOutcome(tt.err); got != tt.want {
			t.Errorf("AuditOutcome(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
