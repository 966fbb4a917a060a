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
	// Seq is the sequence in SUBSTATE_EVENTS of the event that made the
	// view's last change; 0 in records written before the view kept it.
	// A stuck tenant's message on the change feed carries it.
	Seq uint64
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
	// Changed: something the dirty check looks at changed; the record
	// must be written.
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
	v.WorkflowVerb = verbOf(ev)
	v.WorkflowStatus = ev.Status
	if v.WorkflowStatus == "" {
		v.WorkflowStatus = ev.SubState.Status()
	}
	if prev.WorkflowSubState != ev.SubState { // a new execution starts with none
		v.WorkflowSubStateSince = subStateSince(ev)
	}
	v.WorkflowExecutionID = ev.ExecutionID
	v.WorkflowRetryCount = retryCount(&prev, ev)
	v.WorkflowNextRetryAt = nextRetryAt(&prev, &v, ev)
	v.WorkflowErrorMessage, v.WorkflowErrorType, v.WorkflowErrorFingerprint = errorOf(&prev, ev)
	if ev.Step != "" {
		v.WorkflowStep = substate.Truncate(ev.Step, MaxStep)
	}
	if ev.Workflow != "" {
		v.WorkflowType = substate.Truncate(ev.Workflow, MaxWorkflowType)
	}
	v.Provider, v.ProviderState = ev.Provider, ev.ProviderState
	v.LastEventAt = utc(ev.OccurredAt)
	if ev.SubState == substate.StateSucceeded {
		v.WorkflowExecutionID, v.WorkflowRetryCount = "", 0
		v.WorkflowErrorMessage, v.WorkflowErrorType, v.WorkflowErrorFingerprint = "", "", ""
		v.WorkflowStep = ""
	}
	next := Record{View: v, ExecutionID: ev.ExecutionID, StartedAt: base.StartedAt, Revision: ev.Revision, Mapping: ev.MappingVersion, Seq: base.Seq}
	if next.StartedAt.IsZero() {
		next.StartedAt = utc(ev.ExecutionStartedAt)
	}
	return next
}

// verbOf is the verb form the view shows: the event's when it is one of
// its sub-state's forms, else the sub-state's default, so that a verb
// names one sub-state (cancelled and failed both name failed).
func verbOf(ev *substate.EventData) substate.Verb {
	if ev.Verb.SubState() == ev.SubState {
		return ev.Verb
	}
	return ev.SubState.Verb()
}

// subStateSince is when ev says its sub-state began: when it occurred at
// the provider, else when its execution started. It comes from the
// event, never from a clock, so a rebuild from the stream finds it again.
func subStateSince(ev *substate.EventData) time.Time {
	if !ev.OccurredAt.IsZero() {
		return utc(ev.OccurredAt)
	}
	return utc(ev.ExecutionStartedAt)
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

// nextRetryAt is when the provider retries next after ev: kept only while
// the tenant is backing-off. A backing-off event that says sets it; one
// that does not keeps the view's while it waits for the same retry (the
// retry count did not move), since the wait it describes is the same;
// any other sub-state, a new retry or a new execution (prev is empty)
// clears it.
func nextRetryAt(prev, next *substate.TenantView, ev *substate.EventData) time.Time {
	switch {
	case ev.SubState != substate.StateBackingOff:
		return time.Time{}
	case !ev.NextRetryAt.IsZero():
		return utc(ev.NextRetryAt)
	case prev.WorkflowSubState == substate.StateBackingOff && prev.WorkflowRetryCount == next.WorkflowRetryCount:
		return prev.WorkflowNextRetryAt
	}
	return time.Time{}
}

// errorOf returns the view's error after ev: its message, type and
// fingerprint, which move together. Running and succeeded have no current
// error (a Restate row keeps its last failure while the next attempt runs:
// that is history). Waiting shows the event's own error. Error,
// backing-off and failed take the event's error and keep the previous one
// when the event carries no message, so failed preserves it.
func errorOf(prev *substate.TenantView, ev *substate.EventData) (msg, typ, fp string) {
	switch ev.SubState {
	case substate.StateRunning, substate.StateSucceeded:
		return "", "", ""
	case substate.StateWaiting:
		if ev.ErrorMessage == "" {
			return "", "", ""
		}
	}
	if ev.ErrorMessage != "" {
		return ev.ErrorMessage, substate.Truncate(ev.ErrorType, MaxErrorType), substate.Truncate(ev.ErrorFingerprint, MaxFingerprint)
	}
	return prev.WorkflowErrorMessage, prev.WorkflowErrorType, prev.WorkflowErrorFingerprint
}

// dirty reports whether next differs from old in what the view is written
// for: sub-state (with its verb form and since when), retry count, error
// (message, type, fingerprint), step, workflow type, provider, or
// execution (the view's, or the followed one that succeeded hides). Every
// field an index or a group counter holds is among them, so a record an
// unchanged event moved keeps its index keys. The next retry time is not:
// like the provider state and the last event time it moves with an
// unchanged event, so a provider that only moves its retry time costs no
// write and no message on the change feed. It is set and cleared with a
// change of sub-state or retry count, which is a change.
func dirty(old, next *Record) bool {
	o, n := &old.View, &next.View
	return o.WorkflowSubState != n.WorkflowSubState ||
		o.WorkflowVerb != n.WorkflowVerb ||
		!o.WorkflowSubStateSince.Equal(n.WorkflowSubStateSince) ||
		o.WorkflowRetryCount != n.WorkflowRetryCount ||
		o.WorkflowErrorMessage != n.WorkflowErrorMessage ||
		o.WorkflowErrorType != n.WorkflowErrorType ||
		o.WorkflowErrorFingerprint != n.WorkflowErrorFingerprint ||
		o.WorkflowStep != n.WorkflowStep ||
		o.WorkflowType != n.WorkflowType ||
		o.Provider != n.Provider ||
		o.WorkflowExecutionID != n.WorkflowExecutionID ||
		old.ExecutionID != next.ExecutionID
}

// Bounds of the view's strings that come from providers, in bytes; a
// longer one is cut at a character boundary.
const (
	MaxStep         = substate.MaxStepBytes         // the step
	MaxWorkflowType = substate.MaxWorkflowTypeBytes // the workflow type
	MaxErrorType    = 256                           // the error type
	MaxFingerprint  = substate.MaxFingerprintBytes  // the error fingerprint (what mapping.Fingerprint makes fits)
)

// utc drops the monotonic reading and the location so that times compare
// equal after a round trip through storage.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Round(0)
}
