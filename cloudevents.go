package substate

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// CloudEvent is a CloudEvents 1.0 structured-mode envelope around data of
// type T, as substate writes its canonical events (Event) and the changes
// on its feed (ChangeEvent).
type CloudEvent[T any] struct {
	SpecVersion     string    `json:"specversion"`
	ID              string    `json:"id"`
	Source          string    `json:"source"`
	Type            string    `json:"type"`
	Subject         string    `json:"subject"`
	Time            Timestamp `json:"time"`
	DataContentType string    `json:"datacontenttype"`
	// DataSchema is the URL of the JSON Schema of the data (SchemaURL),
	// when the publisher knows where the worker serves it.
	DataSchema string `json:"dataschema,omitempty"`
	// TraceParent is the W3C traceparent of the request that brought the
	// event in (the CloudEvents distributed-tracing extension).
	TraceParent string `json:"traceparent,omitempty"`
	Data        T      `json:"data"`
}

// Timestamp is the time of a CloudEvent substate writes: RFC 3339 in UTC
// with exactly three fractional digits (EventTimeLayout), whatever the
// precision of the time it holds. It reads any RFC 3339 time, so events
// written before the precision was fixed still decode.
type Timestamp struct{ time.Time }

// EventTimeLayout is the layout of every CloudEvents time substate writes.
const EventTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// MarshalJSONTo writes the time as a JSON string in EventTimeLayout.
func (t Timestamp) MarshalJSONTo(enc *jsontext.Encoder) error {
	var buf [32]byte
	return enc.WriteToken(jsontext.String(string(t.UTC().AppendFormat(buf[:0], EventTimeLayout))))
}

// UnmarshalJSONFrom reads an RFC 3339 time string.
func (t *Timestamp) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	if tok.Kind() != '"' {
		return Errorf(EINVALID, "cloudevent time is not a string")
	}
	v, err := time.Parse(time.RFC3339Nano, tok.String())
	if err != nil {
		return WrapError(EINVALID, err, "cloudevent time")
	}
	t.Time = v
	return nil
}

// Canonical event types: one per sub-state the event reports, so that a
// CloudEvents router can tell a failure from a retry without reading the
// data. EventType is the single type events had before; it still decodes.
const (
	EventTypePrefix = "io.substate.execution."
	EventTypeSuffix = ".v1"
	// EventType is the single type canonical events had before each
	// sub-state got its own (EventTypeFor); it still decodes.
	EventType = "io.substate.execution.substate.v1"
)

// EventTypeFor returns the CloudEvents type of a canonical event that
// reports sub-state s: io.substate.execution.<subState>.v1, made once for
// each sub-state (every event is typed, and decoded ones checked).
func EventTypeFor(s SubState) string {
	for i, k := range SubStates {
		if k == s {
			return eventTypes[i]
		}
	}
	return eventType(s)
}

func eventType(s SubState) string { return EventTypePrefix + string(s) + EventTypeSuffix }

// eventTypes are the types of SubStates, in their order.
var eventTypes = EventTypes()

// EventTypes are the CloudEvents types of canonical events, one per
// sub-state.
func EventTypes() []string {
	out := make([]string, 0, len(SubStates))
	for _, s := range SubStates {
		out = append(out, eventType(s))
	}
	return out
}

// eventTypeOK reports whether typ is a canonical event type for sub-state s
// (or the legacy single type).
func eventTypeOK(typ string, s SubState) bool {
	return typ == EventType || typ == EventTypeFor(s)
}

// JSON Schemas of the data of substate's CloudEvents; the worker serves
// them under SchemaPath.
const (
	SchemaPath   = "/v1/schemas/"
	EventSchema  = "event.json"
	ChangeSchema = "change.json"
)

// SchemaURL returns the dataschema of a CloudEvent: the schema named name
// as the worker at base (an absolute URL such as http://127.0.0.1:8080)
// serves it, or "" when base is empty.
func SchemaURL(base, name string) string {
	if base == "" {
		return ""
	}
	var memo *atomic.Pointer[schemaURL]
	switch name {
	case EventSchema:
		memo = &schemaURLs[0]
	case ChangeSchema:
		memo = &schemaURLs[1]
	default:
		return strings.TrimSuffix(base, "/") + SchemaPath + name
	}
	if u := memo.Load(); u != nil && u.base == base {
		return u.url
	}
	u := &schemaURL{base: base, url: strings.TrimSuffix(base, "/") + SchemaPath + name}
	memo.Store(u)
	return u.url
}

// schemaURL is the last URL SchemaURL made for a schema of every event
// and change, kept so that each one published does not build it anew.
type schemaURL struct{ base, url string }

var schemaURLs [2]atomic.Pointer[schemaURL] // EventSchema, ChangeSchema

// MaxTraceParent bounds the traceparent substate keeps (version 00 is 55
// bytes; a future version may append fields).
const MaxTraceParent = 512

// ValidTraceParent reports whether s looks like a W3C traceparent: four
// or more dash-separated lowercase hex fields, version 2, trace id 32,
// parent id 16, flags 2 digits, trace and parent ids not all zero. An
// invalid one is dropped rather than propagated.
func ValidTraceParent(s string) bool {
	if len(s) < 55 || len(s) > MaxTraceParent {
		return false
	}
	f := strings.Split(s, "-")
	if len(f) < 4 || len(f[0]) != 2 || len(f[1]) != 32 || len(f[2]) != 16 || len(f[3]) != 2 || f[0] == "ff" {
		return false
	}
	if f[0] == "00" && len(f) != 4 {
		return false
	}
	for _, x := range f[:4] {
		if !lowerHex(x) {
			return false
		}
	}
	return strings.Trim(f[1], "0") != "" && strings.Trim(f[2], "0") != ""
}

// TraceIDOf returns the trace id of a W3C traceparent (32 lowercase hex
// digits), or "" when it is not valid.
func TraceIDOf(tp string) string {
	if !ValidTraceParent(tp) {
		return ""
	}
	return tp[3:35]
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
