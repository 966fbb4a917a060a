package substate

import (
	"context"
	"slices"
	"strconv"

	"github.com/go-json-experiment/json"
)

// StreamChanges is the durable change feed: one message for every real
// change of a tenant view, on ChangeSubject, deduplicated by the change's
// sequence.
const StreamChanges = "SUBSTATE_CHANGES"

// ChangesStreamSubject is the subject filter of StreamChanges:
// substate.changes.<subState>.<provider>.<tenant>.
const ChangesStreamSubject = SubjectChangesPrefix + "*.*.*"

// ChangeOutbox holds the changes a view committed that the change feed has
// not acknowledged yet. The view writes a change into it in the transaction
// that makes the change, so a crash between the commit and the publish
// loses none: the outbox is drained again after the restart.
type ChangeOutbox interface {
	// PendingChanges returns up to limit changes in sequence order, the
	// oldest first.
	PendingChanges(ctx context.Context, limit int) ([]Change, error)
	// RemoveChanges removes these changes (by sequence and kind), once
	// the feed acknowledged them.
	RemoveChanges(ctx context.Context, changes []Change) error
	// ChangesWaiting returns a channel that receives after a commit that
	// wrote changes into the outbox.
	ChangesWaiting() <-chan struct{}
}

// ChangeSubject returns the subject a change is published on:
// substate.changes.<subState>.<provider>.<tenant>, each token encoded with
// EncodeToken, so that a subscriber can select "every failed"
// (substate.changes.failed.>), "everything of tenant T"
// (substate.changes.*.*.<EncodeToken(T)>) or "backing-off of provider P"
// (substate.changes.backing-off.P.*) with a subject filter alone. The
// sub-state and provider are the view's after the change.
func ChangeSubject(c *Change) string {
	return SubjectChangesPrefix + EncodeToken(string(c.New.WorkflowSubState)) + "." +
		EncodeToken(string(c.New.Provider)) + "." + EncodeToken(c.TenantID)
}

// ChangeMsgID is the Nats-Msg-Id of a change on the feed, and its
// CloudEvent id: its sequence in SUBSTATE_EVENTS, the same in every
// projector replica and after a restart. A stuck or unstuck message adds
// its kind and the tenant (<seq>.stuck.<tenant>, as EncodeToken writes
// it): its sequence is that of the tenant's change it follows, which the
// feed carries under the bare sequence.
func ChangeMsgID(c *Change) string {
	seq := strconv.FormatUint(c.Seq, 10)
	switch c.Kind {
	case ChangeStuck:
		return seq + ".stuck." + EncodeToken(c.TenantID)
	case ChangeUnstuck:
		return seq + ".unstuck." + EncodeToken(c.TenantID)
	}
	return seq
}

// Change kinds: the CloudEvents type of a change on the feed says what
// kind of occurrence it is, the most significant first when several
// fields changed at once.
const (
	ChangeTypeSubState  = "io.substate.tenant.substate.changed.v1"
	ChangeTypeExecution = "io.substate.tenant.execution.changed.v1"
	ChangeTypeRetry     = "io.substate.tenant.retry.changed.v1"
	ChangeTypeError     = "io.substate.tenant.error.changed.v1"
	ChangeTypeStep      = "io.substate.tenant.step.changed.v1"
	// ChangeTypeStuck says a tenant's deadline passed with no change;
	// ChangeTypeUnstuck that a stuck tenant moved on. Neither is a
	// sub-state: stuck is a field of the view.
	ChangeTypeStuck   = "io.substate.tenant.stuck.v1"
	ChangeTypeUnstuck = "io.substate.tenant.unstuck.v1"
)

// ChangeTypes are every CloudEvents type of the change feed.
var ChangeTypes = []string{ChangeTypeSubState, ChangeTypeExecution, ChangeTypeRetry, ChangeTypeError, ChangeTypeStep,
	ChangeTypeStuck, ChangeTypeUnstuck}

// ChangeType returns the CloudEvents type of a change: stuck or unstuck
// by its kind; else a new sub-state (or verb), else a new execution, else
// a new retry count, else a new error (message, type or fingerprint),
// else a new step; any other change (the workflow type or provider of
// the same execution, the execution the view keeps internally) is an
// execution change.
func ChangeType(c *Change) string {
	switch c.Kind {
	case ChangeStuck:
		return ChangeTypeStuck
	case ChangeUnstuck:
		return ChangeTypeUnstuck
	}
	o, n := &c.Old, &c.New
	switch {
	case o.WorkflowSubState != n.WorkflowSubState || o.WorkflowVerb != n.WorkflowVerb:
		return ChangeTypeSubState
	case o.WorkflowExecutionID != n.WorkflowExecutionID:
		return ChangeTypeExecution
	case o.WorkflowRetryCount != n.WorkflowRetryCount:
		return ChangeTypeRetry
	case o.WorkflowErrorMessage != n.WorkflowErrorMessage || o.WorkflowErrorType != n.WorkflowErrorType ||
		o.WorkflowErrorFingerprint != n.WorkflowErrorFingerprint:
		return ChangeTypeError
	case o.WorkflowStep != n.WorkflowStep:
		return ChangeTypeStep
	}
	return ChangeTypeExecution
}

// ChangeSource is the CloudEvents source of the change feed.
const ChangeSource = "/substate/view"

// ChangeEvent is a change on the feed: a CloudEvents 1.0 structured-mode
// envelope around the Change.
type ChangeEvent = CloudEvent[Change]

// NewChangeEvent wraps a change in its CloudEvent: id = the change's
// sequence, subject = tenant, time = when the view changed, dataschema =
// the change schema at schemaBase (see SchemaURL), traceparent = the one
// the event that made the change carried.
func NewChangeEvent(c Change, schemaBase string) ChangeEvent {
	return ChangeEvent{
		SpecVersion: CloudEventsSpecVersion, ID: ChangeMsgID(&c), Source: ChangeSource,
		Type: ChangeType(&c), Subject: c.TenantID, Time: Timestamp{c.New.UpdatedAt},
		DataContentType: EventContentType, DataSchema: SchemaURL(schemaBase, ChangeSchema),
		TraceParent: c.TraceParent, Data: c,
	}
}

// MarshalChangeEvent encodes a change as structured CloudEvents JSON.
func MarshalChangeEvent(c Change, schemaBase string) ([]byte, error) {
	e := NewChangeEvent(c, schemaBase)
	return EncodeChangeEvent(&e)
}

// EncodeChangeEvent encodes a change's CloudEvent. When the change has
// its data encoded already (Change.Encoded), those bytes are the event's
// data as they are: the envelope is written alone, field by field as
// json.Marshal writes it, and the data appended, the same JSON without
// encoding the two views again.
func EncodeChangeEvent(e *ChangeEvent) ([]byte, error) { return AppendChangeEvent(nil, e) }

// AppendChangeEvent appends to b what EncodeChangeEvent returns for e, so
// that the change feed writes each message's body into the buffer of the
// one before it.
func AppendChangeEvent(b []byte, e *ChangeEvent) ([]byte, error) {
	data := e.Data.Encoded
	if data != nil {
		w := jsonWriter{b: slices.Grow(b, envelopeRoom+len(data)), ok: true}
		if envelope(&w, e); w.ok {
			return append(append(w.b, data...), '}'), nil
		}
	}
	refused := *e // a copy escapes, so *e stays where it is
	return appendMarshal(b, &refused)
}

// envelopeRoom is room enough for a change's envelope without its data.
const envelopeRoom = 512

// UnmarshalChangeEvent decodes a change-feed message.
func UnmarshalChangeEvent(b []byte) (ChangeEvent, error) {
	var e ChangeEvent
	if err := json.Unmarshal(b, &e); err != nil {
		return ChangeEvent{}, WrapError(EINVALID, err, "decode change event")
	}
	if e.SpecVersion != CloudEventsSpecVersion || e.Source != ChangeSource {
		return ChangeEvent{}, Errorf(EINVALID, "not a substate change (specversion %q, source %q)", e.SpecVersion, e.Source)
	}
	return e, nil
}
