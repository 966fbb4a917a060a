package state

import (
	"time"

	"github.com/substatehq/substate"
)

// Record is what the view stores for one tenant: the public view and the
// identity of the execution it follows, which outlives the view's fields
// so that late events of a finished execution stay recognizable.
type Record struct {
	// View is the tenant's public view.
	View substate.TenantView

	// ExecutionID is the execution the view follows. It equals
	// View.WorkflowExecutionID except after succeeded, which clears the
	// view's copy only.
	ExecutionID string
	// StartedAt is when that execution started; zero when no event said.
	StartedAt time.Time
	// Revision is the revision of the newest event applied for it.
	Revision substate.Revision
	// Mapping is the mapping version of that event.
	Mapping int
}

// Outcome says what one event did to a tenant's record.
type Outcome int

// The outcomes of ApplyEvent.
const (
	// Stale: the event is not newer than what the record holds (an older
	// revision of the same execution, a duplicate, or an older execution).
	Stale Outcome = iota
	// Unchanged: the event is newer but the dirty check finds nothing to
	// write; the record's revision, provider state and last event time move.
	Unchanged
	// Changed: the sub-state, verb, retry count, error message, step or
	// execution changed; the record must be written.
	Changed
)

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case Stale:
		return "stale"
	case Unchanged:
		return "unchanged"
	case Changed:
		return "changed"
	}
	return "unknown"
}

// ApplyEvent applies one event to a tenant's record with the projection
// rules and returns the next record and what happened. rec is the zero
// Record for a tenant never seen. now stamps UpdatedAt when the view
// changes. ApplyEvent is pure: the DB applies every event through it.
func ApplyEvent(rec Record, ev substate.EventData, now time.Time) (Record, Outcome) {
	base, ok := baseFor(rec, &ev)
	if !ok {
		return rec, Stale
	}
	next := advance(base, &ev)
	if !dirty(&rec, &next) {
		next.View.UpdatedAt = rec.View.UpdatedAt
		return next, Unchanged
	}
	next.View.UpdatedAt = utc(now)
	return next, Changed
}

// baseFor returns the record ev builds on: rec itself for a newer revision
// of its execution, an empty record for a newer execution, and false when
// ev is stale.
func baseFor(rec Record, ev *substate.EventData) (Record, bool) {
	switch {
	case rec.ExecutionID != "" && rec.ExecutionID == ev.ExecutionID:
		return rec, newer(ev, &rec)
	case rec.ExecutionID == "" || newerExecution(ev, &rec):
		fresh := Record{ExecutionID: ev.ExecutionID, StartedAt: utc(ev.ExecutionStartedAt)}
		fresh.View.TenantID = ev.TenantID
		return fresh, true
	}
	return rec, false
}

// newer reports whether ev is newer than the record's last event of the
// same execution: a greater revision, or the same revision mapped again
// with a corrected (higher) mapping version.
func newer(ev *substate.EventData, rec *Record) bool {
	if ev.Revision != rec.Revision {
		return ev.Revision > rec.Revision
	}
	return ev.MappingVersion > rec.Mapping
}

// newerExecution reports whether ev's execution started after rec's. Equal
// start times (or both unknown) are broken by the larger execution id in
// byte order, so every replica picks the same winner.
func newerExecution(ev *substate.EventData, rec *Record) bool {
	if c := ev.ExecutionStartedAt.Compare(rec.StartedAt); c != 0 {
		return c > 0
	}
	return ev.ExecutionID > rec.ExecutionID
}

// advance returns base moved forward by ev, a newer event of base's
// execution.
func advance(base Record, ev *substate.EventData) Record {
	prev := base.View
	v := prev
	v.TenantID = ev.TenantID
	v.WorkflowSubState = ev.SubState
	v.WorkflowVerb = ev.Verb
	if !v.WorkflowVerb.Valid() {
		v.WorkflowVerb = ev.SubState.Verb()
	}
	v.WorkflowStatus = ev.Status
	if v.WorkflowStatus == "" {
		v.WorkflowStatus = ev.SubState.Status()
	}
	v.WorkflowExecutionID = ev.ExecutionID
	v.WorkflowRetryCount = retryCount(&prev, ev)
	v.WorkflowErrorMessage = errorMessage(prev.WorkflowErrorMessage, ev)
	if ev.Step != "" {
		v.WorkflowStep = substate.Truncate(ev.Step, MaxStep)
	}
	v.Provider, v.ProviderState = ev.Provider, ev.ProviderState
	v.LastEventAt = utc(ev.OccurredAt)
	if ev.SubState == substate.StateSucceeded {
		v.WorkflowExecutionID, v.WorkflowRetryCount, v.WorkflowErrorMessage = "", 0, ""
		v.WorkflowStep = ""
	}
	next := Record{View: v, ExecutionID: ev.ExecutionID, StartedAt: base.StartedAt, Revision: ev.Revision, Mapping: ev.MappingVersion}
	if next.StartedAt.IsZero() {
		next.StartedAt = utc(ev.ExecutionStartedAt)
	}
	return next
}

// retryCount takes the provider's count when it reported one, but never
// lowers the count of the execution (Restate restarts its count after a
// resume, a later row may lack it). Otherwise a failure followed by a retry
// counts once: entering backing-off counts it, and so does running straight
// after an error; the retry's running after backing-off was already counted.
// prev is empty for a new execution.
func retryCount(prev *substate.TenantView, ev *substate.EventData) int {
	if ev.RetryCountKnown {
		return max(ev.RetryCount, prev.WorkflowRetryCount, 0)
	}
	switch {
	case ev.SubState == substate.StateBackingOff && prev.WorkflowSubState != substate.StateBackingOff,
		ev.SubState == substate.StateRunning && prev.WorkflowSubState == substate.StateError:
		return prev.WorkflowRetryCount + 1
	}
	return prev.WorkflowRetryCount
}

// errorMessage returns the view's error after ev. Running and succeeded
// have no current error (a Restate row keeps its last failure while the
// next attempt runs: that is history). Waiting shows the event's own
// message. Error, backing-off and failed take the event's message and keep
// the previous one when the event carries none, so failed preserves it.
func errorMessage(prev string, ev *substate.EventData) string {
	switch ev.SubState {
	case substate.StateRunning, substate.StateSucceeded:
		return ""
	case substate.StateWaiting:
		return ev.ErrorMessage
	}
	if ev.ErrorMessage != "" {
		return ev.ErrorMessage
	}
	return prev
}

// dirty reports whether next differs from old in what the view is written
// for: sub-state (with its verb form), retry count, error message, step, or
// execution (the view's, or the followed one that succeeded hides).
func dirty(old, next *Record) bool {
	o, n := &old.View, &next.View
	return o.WorkflowSubState != n.WorkflowSubState ||
		o.WorkflowVerb != n.WorkflowVerb ||
		o.WorkflowRetryCount != n.WorkflowRetryCount ||
		o.WorkflowErrorMessage != n.WorkflowErrorMessage ||
		o.WorkflowStep != n.WorkflowStep ||
		o.WorkflowExecutionID != n.WorkflowExecutionID ||
		old.ExecutionID != next.ExecutionID
}

// MaxStep is the longest step the view keeps, in bytes; a longer state
// name is cut at a character boundary.
const MaxStep = 256

// utc drops the monotonic reading and the location so that times compare
// equal after a round trip through storage.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Round(0)
}
