package state_test

import (
	"slices"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/state"
)

const (
	running    = substate.StateRunning
	waiting    = substate.StateWaiting
	backingOff = substate.StateBackingOff
	errored    = substate.StateError
	succeeded  = substate.StateSucceeded
	failed     = substate.StateFailed
)

const (
	stale     = state.Stale
	unchanged = state.Unchanged
	changed   = state.Changed
)

// ruleCase is a stream of one tenant's events in arrival order, the outcome
// of each, and the view's status at the end.
type ruleCase struct {
	name   string
	events []substate.EventData
	want   []state.Outcome
	status status
}

// sfn returns a Step Functions event with its real revision layout.
func sfn(exec string, s substate.SubState, redrive, rank int, opts ...evOpt) substate.EventData {
	rev := mapping.StepFunctionsRevision(redrive, rank, 0)
	e := ev("t", exec, s, rev, append([]evOpt{provider(substate.ProviderStepFunctions)}, opts...)...)
	e.OccurredAt = t0.Add(time.Duration(redrive*10+rank) * time.Second)
	return e
}

var ruleCases = []ruleCase{
	{name: "first event creates the view",
		events: []substate.EventData{ev("t", "a", running, 1)},
		want:   []state.Outcome{changed},
		status: status{running, "a", 0, ""}},
	{name: "late event is stale",
		events: []substate.EventData{ev("t", "a", running, 1), ev("t", "a", backingOff, 3, failure("boom")), ev("t", "a", errored, 2, failure("boom"))},
		want:   []state.Outcome{changed, changed, stale},
		status: status{backingOff, "a", 1, "boom"}},
	{name: "duplicate is stale",
		events: []substate.EventData{ev("t", "a", errored, 1, failure("boom")), ev("t", "a", errored, 1, failure("boom"))},
		want:   []state.Outcome{changed, stale},
		status: status{errored, "a", 0, "boom"}},
	{name: "the same revision from a corrected mapping replaces the event",
		events: []substate.EventData{ev("t", "a", failed, 2, failure("raw blob"), mapped(1)), ev("t", "a", failed, 2, failure("the real message"), mapped(2)),
			ev("t", "a", failed, 2, failure("raw blob"), mapped(1))},
		want:   []state.Outcome{changed, changed, stale},
		status: status{failed, "a", 0, "the real message"}},
	{name: "a corrected mapping of an older revision is stale",
		events: []substate.EventData{ev("t", "a", running, 3, mapped(1)), ev("t", "a", errored, 2, failure("x"), mapped(2))},
		want:   []state.Outcome{changed, stale},
		status: status{running, "a", 0, ""}},
	{name: "reordered events end on the newest revision",
		events: []substate.EventData{ev("t", "a", waiting, 4), ev("t", "a", running, 1), ev("t", "a", errored, 2, failure("x")), ev("t", "a", running, 3)},
		want:   []state.Outcome{changed, stale, stale, stale},
		status: status{waiting, "a", 0, ""}},
	{name: "redrive goes failed, running, succeeded",
		events: []substate.EventData{
			sfn("arn", running, 0, mapping.RankActive),
			sfn("arn", failed, 0, mapping.RankTerminal, failure("States.Timeout")),
			sfn("arn", waiting, 1, mapping.RankPending),
			sfn("arn", running, 1, mapping.RankActive),
			sfn("arn", succeeded, 1, mapping.RankTerminal)},
		want:   []state.Outcome{changed, changed, changed, changed, changed},
		status: status{succeeded, "", 0, ""}},
	{name: "late events of the first redrive epoch are stale",
		events: []substate.EventData{
			sfn("arn", running, 1, mapping.RankActive),
			sfn("arn", failed, 0, mapping.RankTerminal, failure("States.Timeout")),
			sfn("arn", running, 0, mapping.RankActive)},
		want:   []state.Outcome{changed, stale, stale},
		status: status{running, "arn", 0, ""}},
	{name: "newer execution replaces older",
		events: []substate.EventData{ev("t", "a", failed, 5, retries(3), failure("boom")), ev("t", "b", running, 1, started(t0.Add(time.Hour)))},
		want:   []state.Outcome{changed, changed},
		status: status{running, "b", 0, ""}},
	{name: "older execution never overwrites newer",
		events: []substate.EventData{ev("t", "b", running, 1, started(t0.Add(time.Hour))), ev("t", "a", failed, 9, failure("old"))},
		want:   []state.Outcome{changed, stale},
		status: status{running, "b", 0, ""}},
	{name: "equal start times: the larger execution id is newer",
		events: []substate.EventData{ev("t", "b", running, 1), ev("t", "a", errored, 9, failure("x")), ev("t", "c", waiting, 1)},
		want:   []state.Outcome{changed, stale, changed},
		status: status{waiting, "c", 0, ""}},
	{name: "error to running counts a retry the provider did not report and clears the error",
		events: []substate.EventData{ev("t", "a", running, 1), ev("t", "a", errored, 2, failure("boom")), ev("t", "a", running, 3)},
		want:   []state.Outcome{changed, changed, changed},
		status: status{running, "a", 1, ""}},
	{name: "backing-off after the first failure shows 1",
		events: []substate.EventData{ev("t", "a", running, 1), ev("t", "a", errored, 2, failure("x")), ev("t", "a", backingOff, 3, failure("x"))},
		want:   []state.Outcome{changed, changed, changed},
		status: status{backingOff, "a", 1, "x"}},
	{name: "a failure counts once: backing-off, then the retry running",
		events: []substate.EventData{ev("t", "a", errored, 1, failure("x")), ev("t", "a", backingOff, 2, failure("x")), ev("t", "a", running, 3),
			ev("t", "a", backingOff, 4, failure("y")), ev("t", "a", running, 5)},
		want:   []state.Outcome{changed, changed, changed, changed, changed},
		status: status{running, "a", 2, ""}},
	{name: "waiting to running is not a retry",
		events: []substate.EventData{ev("t", "a", waiting, 1), ev("t", "a", running, 2)},
		want:   []state.Outcome{changed, changed},
		status: status{running, "a", 0, ""}},
	{name: "a reported retry count is taken, not incremented",
		events: []substate.EventData{ev("t", "a", backingOff, 1, retries(2), failure("x")), ev("t", "a", running, 2, retries(3))},
		want:   []state.Outcome{changed, changed},
		status: status{running, "a", 3, ""}},
	{name: "a reported retry count never lowers the execution's",
		events: []substate.EventData{ev("t", "a", running, 1, retries(4)), ev("t", "a", running, 2, retries(0))},
		want:   []state.Outcome{changed, unchanged},
		status: status{running, "a", 4, ""}},
	{name: "a new execution starts its count again",
		events: []substate.EventData{ev("t", "a", running, 1, retries(4)), ev("t", "b", running, 1, retries(1), started(t0.Add(time.Hour)))},
		want:   []state.Outcome{changed, changed},
		status: status{running, "b", 1, ""}},
	{name: "an event without a count keeps the reported one",
		events: []substate.EventData{ev("t", "a", backingOff, 1, retries(4), failure("x")), ev("t", "a", errored, 2, failure("x"))},
		want:   []state.Outcome{changed, changed},
		status: status{errored, "a", 4, "x"}},
	{name: "succeeded clears execution, retry count and error",
		events: []substate.EventData{ev("t", "a", errored, 1, retries(2), failure("x")), ev("t", "a", succeeded, 2)},
		want:   []state.Outcome{changed, changed},
		status: status{succeeded, "", 0, ""}},
	{name: "failed preserves execution, retry count and error",
		events: []substate.EventData{ev("t", "a", backingOff, 1, retries(2), failure("x")), ev("t", "a", failed, 2)},
		want:   []state.Outcome{changed, changed},
		status: status{failed, "a", 2, "x"}},
	{name: "failed with its own message replaces the error",
		events: []substate.EventData{ev("t", "a", errored, 1, failure("attempt")), ev("t", "a", failed, 2, failure("final"))},
		want:   []state.Outcome{changed, changed},
		status: status{failed, "a", 0, "final"}},
	{name: "late event after succeeded does not resurrect",
		events: []substate.EventData{ev("t", "a", succeeded, 5), ev("t", "a", running, 3), ev("t", "a", errored, 4, failure("x"))},
		want:   []state.Outcome{changed, stale, stale},
		status: status{succeeded, "", 0, ""}},
	{name: "late event of an older execution after the newer succeeded",
		events: []substate.EventData{ev("t", "b", succeeded, 2, started(t0.Add(time.Hour))), ev("t", "a", errored, 9, failure("x"))},
		want:   []state.Outcome{changed, stale},
		status: status{succeeded, "", 0, ""}},
	{name: "a newer execution first seen succeeded is a change",
		events: []substate.EventData{ev("t", "a", succeeded, 2), ev("t", "b", succeeded, 2, started(t0.Add(time.Hour))), ev("t", "b", running, 1, started(t0.Add(time.Hour)))},
		want:   []state.Outcome{changed, changed, stale},
		status: status{succeeded, "", 0, ""}},
	{name: "a new provider state with the same sub-state is unchanged",
		events: []substate.EventData{ev("t", "a", running, 1, native("running")), ev("t", "a", running, 2, native("active"))},
		want:   []state.Outcome{changed, unchanged},
		status: status{running, "a", 0, ""}},
	{name: "cancelled is a change from failed",
		events: []substate.EventData{ev("t", "a", failed, 1, failure("x")), ev("t", "a", failed, 2, verb(substate.VerbCancelled))},
		want:   []state.Outcome{changed, changed},
		status: status{failed, "a", 0, "x"}},
	{name: "waiting shows its own message",
		events: []substate.EventData{ev("t", "a", errored, 1, failure("x")), ev("t", "a", waiting, 2), ev("t", "a", waiting, 3, failure("y"))},
		want:   []state.Outcome{changed, changed, changed},
		status: status{waiting, "a", 0, "y"}},
	{name: "running ignores the previous attempt's failure it carries",
		events: []substate.EventData{ev("t", "a", backingOff, 1, retries(0), failure("x")), ev("t", "a", running, 2, retries(1), failure("x"))},
		want:   []state.Outcome{changed, changed},
		status: status{running, "a", 1, ""}},
}

// TestApplyEvent folds each case with the pure rule function.
func TestApplyEvent(t *testing.T) {
	for _, tc := range ruleCases {
		t.Run(tc.name, func(t *testing.T) {
			var rec state.Record
			var got []state.Outcome
			for _, e := range tc.events {
				var out state.Outcome
				rec, out = state.ApplyEvent(rec, e, t0)
				got = append(got, out)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("outcomes = %v, want %v", got, tc.want)
			}
			if got, want := statusOf(rec.View), tc.status; got != want {
				t.Errorf("status = %v, want %v", got, want)
			}
		})
	}
}

// TestApplyRules runs the same cases through a DB, one batch per event and
// then all in one batch, and checks the result counts.
func TestApplyRules(t *testing.T) {
	for _, tc := range ruleCases {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			s := newStream(t, db)
			var got []state.Outcome
			for _, e := range tc.events {
				got = append(got, outcomeOf(s.apply(e)))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("outcomes = %v, want %v", got, tc.want)
			}
			if got, want := statusOf(mustTenant(t, db, "t")), tc.status; got != want {
				t.Errorf("status = %v, want %v", got, want)
			}

			one := openDB(t)
			res := newStream(t, one).apply(tc.events...)
			if got, want := len(res.Changes)+res.Unchanged+res.Stale, len(tc.events); got != want {
				t.Errorf("one batch accounts for %d events, want %d", got, want)
			}
			if got, want := statusOf(mustTenant(t, one, "t")), tc.status; got != want {
				t.Errorf("one batch: status = %v, want %v", got, want)
			}
		})
	}
}

func outcomeOf(r substate.ApplyResult) state.Outcome {
	switch {
	case len(r.Changes) > 0:
		return changed
	case r.Unchanged > 0:
		return unchanged
	}
	return stale
}

func TestApplyEventStampsUpdatedAt(t *testing.T) {
	rec, _ := state.ApplyEvent(state.Record{}, ev("t", "a", running, 1), t0)
	later := t0.Add(time.Minute)
	next, out := state.ApplyEvent(rec, ev("t", "a", running, 2, native("active")), later)
	if out != unchanged || !next.View.UpdatedAt.Equal(t0) {
		t.Errorf("unchanged event: outcome %v, updatedAt %v, want unchanged at %v", out, next.View.UpdatedAt, t0)
	}
	if got, want := next.View.LastEventAt, t0.Add(2*time.Second); !got.Equal(want) {
		t.Errorf("lastEventAt = %v, want %v", got, want)
	}
	if next.View.ProviderState != "active" {
		t.Errorf("providerState = %q, want active", next.View.ProviderState)
	}
	next, out = state.ApplyEvent(next, ev("t", "a", waiting, 3), later)
	if out != changed || !next.View.UpdatedAt.Equal(later) {
		t.Errorf("change: outcome %v, updatedAt %v, want changed at %v", out, next.View.UpdatedAt, later)
	}
}

func TestApplyEventKeepsExecutionIdentityAfterSucceeded(t *testing.T) {
	start := t0.Add(-time.Hour)
	rec, _ := state.ApplyEvent(state.Record{}, ev("t", "a", succeeded, 7, started(start)), t0)
	if rec.ExecutionID != "a" || !rec.StartedAt.Equal(start) || rec.Revision != 7 {
		t.Errorf("record = %+v, want execution a started %v at revision 7", rec, start)
	}
	if rec.View.WorkflowExecutionID != "" {
		t.Errorf("view execution = %q, want cleared", rec.View.WorkflowExecutionID)
	}
}
