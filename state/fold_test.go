package state_test

import (
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

// Fold tells each step of a tenant's history as the projector takes it: a
// stale event changes nothing, and a later execution is a new one.
func TestFold(t *testing.T) {
	stored := t0.Add(time.Hour)
	var rec state.Record
	for _, step := range []struct {
		data    substate.EventData
		outcome state.Outcome
		old     substate.SubState
		new     substate.SubState
		newExec bool
	}{
		{ev("t", "a", running, 1), changed, "", running, false},
		{ev("t", "a", backingOff, 3, failure("boom")), changed, running, backingOff, false},
		{ev("t", "a", errored, 2, failure("boom")), stale, backingOff, backingOff, false},
		{ev("t", "b", running, 1, func(e *substate.EventData) { e.ExecutionStartedAt = t0.Add(time.Minute) }), changed, backingOff, running, true},
	} {
		e := substate.NewEvent("id-"+step.data.ExecutionID, step.data)
		var got substate.Transition
		got, rec = state.Fold(rec, &e, stored)
		if got.Outcome != step.outcome.String() || got.Old.SubState != step.old || got.New.SubState != step.new || got.NewExecution != step.newExec {
			t.Errorf("%s %s: got %s %s -> %s new execution %t, want %s %s -> %s %t", step.data.ExecutionID, step.data.SubState,
				got.Outcome, got.Old.SubState, got.New.SubState, got.NewExecution, step.outcome, step.old, step.new, step.newExec)
		}
		if got.EventID != e.ID || got.ExecutionID != step.data.ExecutionID || got.Revision != step.data.Revision || !got.StoredAt.Equal(stored) {
			t.Errorf("transition %+v does not describe event %s", got, e.ID)
		}
	}
}
