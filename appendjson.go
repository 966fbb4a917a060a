package substate

import (
	"slices"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// EncodeChange returns the JSON of a change's data (Seq, TenantID, Old
// and New): the bytes json.Marshal writes for it, written field by field.
// The projector encodes every change it commits, inside the view's write
// transaction, and the reflective encoder spent about 4 % of the
// pipeline's CPU there. A change json.Marshal would refuse (a string that
// is not UTF-8, a time RFC 3339 cannot hold) is left to json.Marshal, so
// the error is its own.
func EncodeChange(c *Change) ([]byte, error) { return AppendChange(nil, c) }

// AppendChange appends to b what EncodeChange returns for c: the view's
// outbox writes the change's data inside the entry that holds it.
func AppendChange(b []byte, c *Change) ([]byte, error) {
	if out, ok := c.appendJSON(slices.Grow(b, ChangeJSONRoom(c))); ok {
		return out, nil
	}
	return appendMarshal(b, c)
}

// ChangeJSONRoom is about the length of a change's JSON, at least as long
// for most changes: room to make for it in a buffer that holds more.
func ChangeJSONRoom(c *Change) int {
	return 64 + len(c.TenantID) + viewJSONRoom(&c.Old) + viewJSONRoom(&c.New)
}

// viewJSONRoom is about the length of a view's JSON: its names and
// times, and its strings as they are.
func viewJSONRoom(v *TenantView) int {
	return 720 + len(v.TenantID) + len(v.WorkflowType) + len(v.WorkflowExecutionID) + len(v.WorkflowErrorMessage) +
		len(v.WorkflowErrorType) + len(v.WorkflowErrorFingerprint) + len(v.WorkflowStep) + len(v.ProviderState)
}

// appendJSON appends the JSON of the change's data; ok is false for a
// change json.Marshal would refuse.
func (c *Change) appendJSON(b []byte) (_ []byte, ok bool) {
	b = strconv.AppendUint(append(b, `{"seq":`...), c.Seq, 10)
	if b, ok = appendJSONString(append(b, `,"tenantId":`...), c.TenantID); !ok {
		return b, false
	}
	if b, ok = c.Old.appendJSON(append(b, `,"old":`...)); !ok {
		return b, false
	}
	if b, ok = c.New.appendJSON(append(b, `,"new":`...)); !ok {
		return b, false
	}
	return append(b, '}'), true
}

// appendJSON appends the JSON of the view, every field in the order of
// the struct as json.Marshal writes it; ok is false for a view it would
// refuse.
func (v *TenantView) appendJSON(b []byte) ([]byte, bool) {
	w := jsonWriter{b: append(b, '{'), ok: true}
	w.str(`"tenantId":`, v.TenantID)
	w.str(`,"workflowType":`, v.WorkflowType)
	w.str(`,"workflowSubState":`, string(v.WorkflowSubState))
	w.time(`,"workflowSubStateSince":`, v.WorkflowSubStateSince)
	w.str(`,"workflowVerb":`, string(v.WorkflowVerb))
	w.str(`,"workflowStatus":`, string(v.WorkflowStatus))
	w.str(`,"workflowExecutionId":`, v.WorkflowExecutionID)
	w.b = strconv.AppendInt(append(w.b, `,"workflowRetryCount":`...), int64(v.WorkflowRetryCount), 10)
	w.time(`,"workflowNextRetryAt":`, v.WorkflowNextRetryAt)
	w.str(`,"workflowErrorMessage":`, v.WorkflowErrorMessage)
	w.str(`,"workflowErrorType":`, v.WorkflowErrorType)
	w.str(`,"workflowErrorFingerprint":`, v.WorkflowErrorFingerprint)
	w.str(`,"workflowStep":`, v.WorkflowStep)
	w.str(`,"provider":`, string(v.Provider))
	w.str(`,"providerState":`, v.ProviderState)
	w.time(`,"updatedAt":`, v.UpdatedAt)
	w.time(`,"lastEventAt":`, v.LastEventAt)
	w.time(`,"deadline":`, v.Deadline)
	w.str(`,"deadlineSlo":`, string(v.DeadlineSLO))
	w.b = strconv.AppendBool(append(w.b, `,"stuck":`...), v.Stuck)
	w.time(`,"stuckSince":`, v.StuckSince)
	return append(w.b, '}'), w.ok
}

// jsonWriter appends members to b; ok turns false at the first value
// json.Marshal would refuse, and nothing more is written.
type jsonWriter struct {
	b  []byte
	ok bool
}

func (w *jsonWriter) str(name, s string) {
	if w.ok {
		w.b, w.ok = appendJSONString(append(w.b, name...), s)
	}
}

func (w *jsonWriter) time(name string, t time.Time) {
	if w.ok {
		w.b, w.ok = appendJSONTime(append(w.b, name...), t)
	}
}

// appendJSONString appends s quoted as the encoder quotes it (no HTML
// escaping, the shortest form of each character); ok is false when s is
// not valid UTF-8, which the encoder refuses.
func appendJSONString(b []byte, s string) ([]byte, bool) {
	b, err := jsontext.AppendQuote(b, s)
	return b, err == nil
}

// appendJSONTime appends t as the encoder writes a time.Time: quoted
// RFC 3339 with nanoseconds as needed. ok is false for a time RFC 3339
// cannot hold (a year outside 0–9999, a zone of 24 hours or more, or one
// with seconds), which the encoder refuses.
func appendJSONTime(b []byte, t time.Time) ([]byte, bool) {
	b = append(b, '"')
	n0 := len(b)
	b = t.AppendFormat(b, time.RFC3339Nano)
	s := b[n0:]
	if len(s) <= len("9999") || s[len("9999")] != '-' {
		return b, false
	}
	if s[len(s)-1] != 'Z' {
		c := s[len(s)-len("Z07:00")]
		hh := int(s[len(s)-len("07:00")]-'0')*10 + int(s[len(s)-len("7:00")]-'0')
		if ('0' <= c && c <= '9') || hh >= 24 {
			return b, false
		}
	}
	return append(b, '"'), true
}

// appendJSON appends the structured CloudEvent of e as json.Marshal
// writes it; ok is false for an event it would refuse.
func (e *Event) appendJSON(b []byte) ([]byte, bool) {
	w := jsonWriter{b: b, ok: true}
	envelope(&w, &e.CloudEvent)
	d := &e.Data
	w.str(`{"tenantId":`, d.TenantID)
	w.str(`,"provider":`, string(d.Provider))
	w.str(`,"executionId":`, d.ExecutionID)
	w.str(`,"workflow":`, d.Workflow)
	w.str(`,"subState":`, string(d.SubState))
	w.str(`,"verb":`, string(d.Verb))
	w.str(`,"status":`, string(d.Status))
	w.b = strconv.AppendInt(append(w.b, `,"retryCount":`...), int64(d.RetryCount), 10)
	w.b = strconv.AppendBool(append(w.b, `,"retryCountKnown":`...), d.RetryCountKnown)
	if !d.NextRetryAt.IsZero() {
		w.time(`,"nextRetryAt":`, d.NextRetryAt)
	}
	w.str(`,"errorMessage":`, d.ErrorMessage)
	w.str(`,"errorType":`, d.ErrorType)
	if d.ErrorFingerprint != "" {
		w.str(`,"errorFingerprint":`, d.ErrorFingerprint)
	}
	w.str(`,"providerState":`, d.ProviderState)
	if d.Step != "" {
		w.str(`,"step":`, d.Step)
	}
	w.time(`,"occurredAt":`, d.OccurredAt)
	w.time(`,"executionStartedAt":`, d.ExecutionStartedAt)
	w.b = strconv.AppendUint(append(w.b, `,"revision":`...), uint64(d.Revision), 10)
	if d.MappingVersion != 0 {
		w.b = strconv.AppendInt(append(w.b, `,"mappingVersion":`...), int64(d.MappingVersion), 10)
	}
	w.b = strconv.AppendBool(append(w.b, `,"terminal":`...), d.Terminal)
	return append(w.b, '}', '}'), w.ok
}

// eventJSONRoom is about the length of an event's JSON.
func eventJSONRoom(e *Event) int {
	d := &e.Data
	return 640 + len(e.ID) + len(e.Source) + len(e.Type) + len(e.Subject) + len(e.DataSchema) + len(e.TraceParent) +
		len(d.TenantID) + len(d.ExecutionID) + len(d.Workflow) + len(d.ErrorMessage) + len(d.ErrorType) +
		len(d.ErrorFingerprint) + len(d.ProviderState) + len(d.Step)
}

// appendTimestamp appends t quoted as Timestamp.MarshalJSONTo writes it:
// nothing in EventTimeLayout's output needs escaping.
func appendTimestamp(b []byte, t Timestamp) []byte {
	return append(t.UTC().AppendFormat(append(b, '"'), EventTimeLayout), '"')
}

// envelope appends a CloudEvent's members up to its data, from the
// opening brace to `"data":`, as json.Marshal writes them.
func envelope[T any](w *jsonWriter, e *CloudEvent[T]) {
	w.b = append(w.b, '{')
	w.str(`"specversion":`, e.SpecVersion)
	w.str(`,"id":`, e.ID)
	w.str(`,"source":`, e.Source)
	w.str(`,"type":`, e.Type)
	w.str(`,"subject":`, e.Subject)
	w.b = appendTimestamp(append(w.b, `,"time":`...), e.Time)
	w.str(`,"datacontenttype":`, e.DataContentType)
	if e.DataSchema != "" {
		w.str(`,"dataschema":`, e.DataSchema)
	}
	if e.TraceParent != "" {
		w.str(`,"traceparent":`, e.TraceParent)
	}
	w.b = append(w.b, `,"data":`...)
}
