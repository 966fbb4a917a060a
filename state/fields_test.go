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

func nextRetry(at time.Time) evOpt { return func(e *substate.EventData) { e.NextRetryAt = at } }

// TestNextRetryAt checks that the view keeps the provider's next retry
// time while the tenant is backing-off, and clears it on every other
// sub-state and with a new retry or execution; and that a move of the
// time alone is not a change (it is not written for, as the provider
// state is not).
func TestNextRetryAt(t *testing.T) {
	r1, r2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	for _, tc := range []struct {
		name string
		evs  []substate.EventData
		want time.Time
		out  state.Outcome
	}{
		{"Set", []substate.EventData{ev("t", "a", backingOff, 1, retries(1), nextRetry(r1))}, r1, changed},
		{"NextRetry", []substate.EventData{ev("t", "a", backingOff, 1, retries(1), nextRetry(r1)),
			ev("t", "a", backingOff, 2, retries(2), nextRetry(r2))}, r2, changed},
		{"TimeAloneIsNoChange", []substate.EventData{ev("t", "a", backingOff, 1, retries(1), nextRetry(r1)),
			ev("t", "a", backingOff, 2, retries(1), nextRetry(r2))}, r2, unchanged},
		{"SameRetryWithoutTimeKeeps", []substate.EventData{ev("t", "a", backingOff, 1, retries(1), nextRetry(r1)),
			ev("t", "a", backingOff, 2, retries(1))}, r1, unchanged},
		{"NewRetryWithoutTimeClears", []substate.EventData{ev("t", "a", backingOff, 1, retries(1), nextRetry(r1)),
			ev("t", "a", backingOff, 2, retries(2))}, time.Time{}, changed},
		{"RunningClears", []substate.EventData{ev("t", "a", backingOff, 1, retries(1), nextRetry(r1)), ev("t", "a", running, 2, retries(1))}, time.Time{}, changed},
		{"ErrorClears", []substate.EventData{ev("t", "a", backingOff, 1, retries(1), nextRetry(r1)), ev("t", "a", errored, 2, retries(1), failure("x"))}, time.Time{}, changed},
		{"WaitingClears", []substate.EventData{ev("t", "a", backingOff, 1, retries(1), nextRetry(r1)), ev("t", "a", waiting, 2, retries(1))}, time.Time{}, changed},
		{"FailedClears", []substate.EventData{ev("t", "a", backingOff, 1, retries(1), nextRetry(r1)), ev("t", "a", failed, 2, retries(1))}, time.Time{}, changed},
		{"SucceededClears", []substate.EventData{ev("t", "a", backingOff, 1, retries(1), nextRetry(r1)), ev("t", "a", succeeded, 2)}, time.Time{}, changed},
		{"NotBackingOffIgnored", []substate.EventData{ev("t", "a", running, 1, nextRetry(r1))}, time.Time{}, changed},
		{"NewExecutionClears", []substate.EventData{ev("t", "a", backingOff, 1, retries(1), nextRetry(r1)),
			ev("t", "b", backingOff, 1, retries(1), started(t0.Add(time.Hour)))}, time.Time{}, changed},
		{"StaleIgnored", []substate.EventData{ev("t", "a", backingOff, 2, retries(2), nextRetry(r2)),
			ev("t", "a", backingOff, 1, retries(1), nextRetry(r1))}, r2, state.Stale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec state.Record
			var out state.Outcome
			for _, e := range tc.evs {
				rec, out = state.ApplyEvent(rec, e, t0)
			}
			if got := rec.View.WorkflowNextRetryAt; !got.Equal(tc.want) || out != tc.out {
				t.Errorf("next retry %v (%s), want %v (%s)", got, out, tc.want, tc.out)
			}
		})
	}
}

// TestNextRetryAtStored applies a backing-off tenant's events to a view:
// its next retry time is served and survives a reopen, a move of the time
// alone publishes no change and is still served and stored, and the
// running that follows clears it with a change.
func TestNextRetryAtStored(t *testing.T) {
	db := openDB(t)
	s := newStream(t, db)
	r1, r2 := t0.Add(time.Minute).Add(123*time.Millisecond), t0.Add(2*time.Minute)
	if res := s.apply(ev("t", "a", backingOff, 1, retries(1), failure("busy"), nextRetry(r1))); len(res.Changes) != 1 ||
		!res.Changes[0].New.WorkflowNextRetryAt.Equal(r1) {
		t.Fatalf("backing-off: changes %+v, want one with next retry %v", res.Changes, r1)
	}
	reopen(t, db)
	if got := mustTenant(t, db, "t").WorkflowNextRetryAt; !got.Equal(r1) {
		t.Fatalf("after reopen the next retry is %v, want %v", got, r1)
	}
	if res := s.apply(ev("t", "a", backingOff, 2, retries(1), failure("busy"), nextRetry(r2))); len(res.Changes) != 0 || res.Unchanged != 1 {
		t.Fatalf("a moved retry time alone: %d changes, %d unchanged; want none and 1", len(res.Changes), res.Unchanged)
	}
	if got := mustTenant(t, db, "t").WorkflowNextRetryAt; !got.Equal(r2) {
		t.Fatalf("the moved retry time is served as %v, want %v", got, r2)
	}
	reopen(t, db)
	if got := mustTenant(t, db, "t").WorkflowNextRetryAt; !got.Equal(r2) {
		t.Fatalf("after reopen the moved retry time is %v, want %v", got, r2)
	}
	res := s.apply(ev("t", "a", running, 3, retries(1)))
	if len(res.Changes) != 1 || !res.Changes[0].Old.WorkflowNextRetryAt.Equal(r2) || !res.Changes[0].New.WorkflowNextRetryAt.IsZero() {
		t.Fatalf("running: changes %+v, want one from next retry %v to none", res.Changes, r2)
	}
	reopen(t, db)
	if got := mustTenant(t, db, "t").WorkflowNextRetryAt; !got.IsZero() {
		t.Errorf("running keeps next retry %v", got)
	}
}

// TestRecordVersion3 checks the stored form of the next retry time: a
// record without one is written as version 2 as before, byte for byte; a
// record with one as version 3, with a second flags byte; and a version 3
// record whose second byte is empty or unknown is refused.
func TestRecordVersion3(t *testing.T) {
	rec, _ := state.ApplyEvent(state.Record{}, ev("t", "a", backingOff, 1, retries(1), failure("busy")), t0)
	if b := state.EncodeRecord(rec); b[0] != 2 {
		t.Fatalf("a record without a next retry is written as version %d, want 2", b[0])
	}
	rec, _ = state.ApplyEvent(rec, ev("t", "a", backingOff, 2, retries(1), nextRetry(t0.Add(time.Minute))), t0)
	b := state.EncodeRecord(rec)
	if b[0] != 3 || b[2] != 1 {
		t.Fatalf("a record with a next retry is written as version %d, flags %d, want 3 and 1", b[0], b[2])
	}
	if got, err := state.DecodeRecord("t", b); err != nil || got != rec {
		t.Fatalf("version 3 decodes to %+v, %v; want %+v", got, err, rec)
	}
	for _, flags2 := range []byte{0, 2, 1 << 7} {
		bad := append([]byte{3, b[1], flags2}, b[3:]...)
		if _, err := state.DecodeRecord("t", bad); err == nil {
			t.Errorf("a version 3 record with second flags %#x decodes", flags2)
		}
	}
}
