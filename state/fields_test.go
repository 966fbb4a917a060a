package state_test

import (
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

// fault sets an event's error with its type and fingerprint, as the
// mapping gives them.
func fault(msg, typ, fp string) evOpt {
	return func(e *substate.EventData) { e.ErrorMessage, e.ErrorType, e.ErrorFingerprint = msg, typ, fp }
}

func workflow(name string) evOpt { return func(e *substate.EventData) { e.Workflow = name } }

func at(t time.Time) evOpt { return func(e *substate.EventData) { e.OccurredAt = t } }

// errorFields is the view's error, for compact comparisons.
type errorFields struct{ msg, typ, fp string }

func errorOfView(v substate.TenantView) errorFields {
	return errorFields{v.WorkflowErrorMessage, v.WorkflowErrorType, v.WorkflowErrorFingerprint}
}

// TestErrorFields checks that the error type and fingerprint move with the
// error message, by the message's rules, and that a change of fingerprint
// alone is a change.
func TestErrorFields(t *testing.T) {
	timeout := fault("timed out after 3 s", "Timeout", "engine/timeout/timed out after <n> s")
	declined := fault("card declined", "Declined", "engine/declined/card declined")
	for _, tc := range []struct {
		name string
		evs  []substate.EventData
		want errorFields
		out  state.Outcome
	}{
		{"Set", []substate.EventData{ev("t", "a", errored, 1, timeout)}, errorFields{"timed out after 3 s", "Timeout", "engine/timeout/timed out after <n> s"}, changed},
		{"FailedWithoutMessageKeeps", []substate.EventData{ev("t", "a", backingOff, 1, timeout), ev("t", "a", failed, 2)},
			errorFields{"timed out after 3 s", "Timeout", "engine/timeout/timed out after <n> s"}, changed},
		{"AnotherFault", []substate.EventData{ev("t", "a", backingOff, 1, timeout), ev("t", "a", backingOff, 2, declined)},
			errorFields{"card declined", "Declined", "engine/declined/card declined"}, changed},
		{"FingerprintAloneChanges", []substate.EventData{ev("t", "a", errored, 1, timeout),
			ev("t", "a", errored, 2, fault("timed out after 3 s", "Timeout", "engine/timeout/other"))},
			errorFields{"timed out after 3 s", "Timeout", "engine/timeout/other"}, changed},
		{"SameErrorUnchanged", []substate.EventData{ev("t", "a", errored, 1, timeout), ev("t", "a", errored, 2, timeout)},
			errorFields{"timed out after 3 s", "Timeout", "engine/timeout/timed out after <n> s"}, unchanged},
		{"RunningClears", []substate.EventData{ev("t", "a", errored, 1, timeout), ev("t", "a", running, 2, timeout)}, errorFields{}, changed},
		{"WaitingShowsItsOwn", []substate.EventData{ev("t", "a", errored, 1, timeout), ev("t", "a", waiting, 2)}, errorFields{}, changed},
		{"SucceededClears", []substate.EventData{ev("t", "a", failed, 1, timeout), ev("t", "a", succeeded, 2)}, errorFields{}, changed},
		{"TypeWithoutMessageIsNoError", []substate.EventData{ev("t", "a", errored, 1, fault("", "Timeout", ""))}, errorFields{}, changed},
		{"EventWithoutFingerprint", []substate.EventData{ev("t", "a", errored, 1, failure("mapped before fingerprints"))},
			errorFields{"mapped before fingerprints", "TaskFailed", ""}, changed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec state.Record
			var out state.Outcome
			for _, e := range tc.evs {
				rec, out = state.ApplyEvent(rec, e, t0)
			}
			if got := errorOfView(rec.View); got != tc.want || out != tc.out {
				t.Errorf("error %+v (%s), want %+v (%s)", got, out, tc.want, tc.out)
			}
		})
	}
}

// TestWorkflowType checks that the view shows the workflow of the
// execution it follows, keeps it when an event names none and after
// success, and that a change of it is a change.
func TestWorkflowType(t *testing.T) {
	for _, tc := range []struct {
		name string
		evs  []substate.EventData
		want string
		out  state.Outcome
	}{
		{"Set", []substate.EventData{ev("t", "a", running, 1, workflow("billing"))}, "billing", changed},
		{"NoneKeeps", []substate.EventData{ev("t", "a", running, 1, workflow("billing")), ev("t", "a", running, 2, workflow(""))}, "billing", unchanged},
		{"NewExecution", []substate.EventData{ev("t", "a", running, 1, workflow("billing")),
			ev("t", "b", running, 1, workflow("refund"), started(t0.Add(time.Hour)))}, "refund", changed},
		{"NamedLaterChanges", []substate.EventData{ev("t", "a", running, 1, workflow("")), ev("t", "a", running, 2, workflow("billing"))}, "billing", changed},
		{"SucceededKeeps", []substate.EventData{ev("t", "a", running, 1, workflow("billing")), ev("t", "a", succeeded, 2, workflow(""))}, "billing", changed},
		{"LongCut", []substate.EventData{ev("t", "a", running, 1, workflow(strings.Repeat("ü", state.MaxWorkflowType)))},
			strings.Repeat("ü", state.MaxWorkflowType/2), changed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec state.Record
			var out state.Outcome
			for _, e := range tc.evs {
				rec, out = state.ApplyEvent(rec, e, t0)
			}
			if rec.View.WorkflowType != tc.want || out != tc.out {
				t.Errorf("workflow type %q (%s), want %q (%s)", rec.View.WorkflowType, out, tc.want, tc.out)
			}
		})
	}
}

// TestSubStateSince checks when the view says a tenant entered its
// sub-state: the provider time of the event that moved it there, kept
// while the sub-state stays, set again by a newer execution, never from
// the clock.
func TestSubStateSince(t *testing.T) {
	t1, t2, t3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	for _, tc := range []struct {
		name string
		evs  []substate.EventData
		want time.Time
	}{
		{"First", []substate.EventData{ev("t", "a", running, 1, at(t1))}, t1},
		{"SameSubStateKeeps", []substate.EventData{ev("t", "a", backingOff, 1, at(t1), retries(1)), ev("t", "a", backingOff, 2, at(t2), retries(2))}, t1},
		{"StepKeeps", []substate.EventData{ev("t", "a", running, 1, at(t1), step("A")), ev("t", "a", running, 2, at(t2), step("B"))}, t1},
		{"Moves", []substate.EventData{ev("t", "a", running, 1, at(t1)), ev("t", "a", errored, 2, at(t2), failure("x"))}, t2},
		{"Back", []substate.EventData{ev("t", "a", running, 1, at(t1)), ev("t", "a", errored, 2, at(t2)), ev("t", "a", running, 3, at(t3))}, t3},
		{"NewExecutionSameSubState", []substate.EventData{ev("t", "a", running, 1, at(t1)), ev("t", "b", running, 1, at(t2), started(t1))}, t2},
		{"Cancelled", []substate.EventData{ev("t", "a", failed, 1, at(t1)), ev("t", "a", failed, 2, at(t2), verb(substate.VerbCancelled))}, t1},
		{"StaleIgnored", []substate.EventData{ev("t", "a", errored, 2, at(t2)), ev("t", "a", running, 1, at(t1))}, t2},
		{"NoTimeUsesStart", []substate.EventData{ev("t", "a", running, 1, at(time.Time{}), started(t1))}, t1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec state.Record
			for i, e := range tc.evs {
				rec, _ = state.ApplyEvent(rec, e, t0.Add(time.Duration(i)*time.Hour)) // the clock never shows
			}
			if got := rec.View.WorkflowSubStateSince; !got.Equal(tc.want) {
				t.Errorf("since %v, want %v", got, tc.want)
			}
		})
	}
}

// TestVerbOfItsSubState checks that the view's verb is always a form of
// its sub-state: an event's verb that is not falls back to the default.
func TestVerbOfItsSubState(t *testing.T) {
	rec, _ := state.ApplyEvent(state.Record{}, ev("t", "a", running, 1, verb(substate.VerbCancelled)), t0)
	if rec.View.WorkflowVerb != substate.VerbExecuting {
		t.Errorf("running with verb cancelled shows %q, want executing", rec.View.WorkflowVerb)
	}
	rec, _ = state.ApplyEvent(rec, ev("t", "a", failed, 2, verb(substate.VerbCancelled)), t0)
	if rec.View.WorkflowVerb != substate.VerbCancelled {
		t.Errorf("failed with verb cancelled shows %q", rec.View.WorkflowVerb)
	}
}

// TestRecordVersion1 decodes a record as the previous release wrote it:
// version 1, none of the new fields, and its last event time as the time
// it entered its sub-state.
func TestRecordVersion1(t *testing.T) {
	rec, _ := state.ApplyEvent(state.Record{}, ev("t", "a", failed, 3, failure("x"), step("Ship")), t0)
	rec.View.WorkflowType, rec.View.WorkflowErrorType, rec.View.WorkflowSubStateSince = "", "", time.Time{}
	b := state.EncodeRecord(rec)
	if b[0] != 2 {
		t.Fatalf("records are written as version %d, want 2", b[0])
	}
	v1 := append([]byte{1}, b[1:]...)
	got, err := state.DecodeRecord("t", v1)
	if err != nil {
		t.Fatal(err)
	}
	want := rec
	want.View.WorkflowSubStateSince = rec.View.LastEventAt
	if got != want {
		t.Errorf("version 1 record decodes to\n %+v\nwant\n %+v", got, want)
	}
	rec.View.WorkflowType = "billing"
	if _, err := state.DecodeRecord("t", append([]byte{1}, state.EncodeRecord(rec)[1:]...)); err == nil {
		t.Error("a version 1 record with a field version 2 added decodes")
	}
}
