package substate

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
)

// CloudEvents attributes of every canonical event.
const (
	CloudEventsSpecVersion = "1.0"
	EventContentType       = "application/json"
	// CloudEventsMediaType is the Content-Type header of a structured CloudEvent.
	CloudEventsMediaType = "application/cloudevents+json"
)

// EventData is the canonical sub-state event: the data of the CloudEvent that
// substate publishes on substate.events.<tenant>.
type EventData struct {
	TenantID    string   `json:"tenantId"`
	Provider    Provider `json:"provider"`
	ExecutionID string   `json:"executionId"`
	Workflow    string   `json:"workflow"`
	SubState    SubState `json:"subState"`
	Verb        Verb     `json:"verb"`
	Status      Status   `json:"status"`

	// RetryCount is the number of retries (not attempts) of the execution.
	// RetryCountKnown tells whether the provider reported it; when it did not,
	// the projector infers retries from error/backing-off → running transitions.
	RetryCount      int  `json:"retryCount"`
	RetryCountKnown bool `json:"retryCountKnown"`
	// NextRetryAt is when the provider retries next, on a backing-off
	// event whose provider reports it (the engine's NextRetryAt, a Restate
	// row's next_retry_at); absent otherwise, and always from Step
	// Functions, whose retries run inside a task state.
	NextRetryAt time.Time `json:"nextRetryAt,omitzero"`

	ErrorMessage string `json:"errorMessage"`
	ErrorType    string `json:"errorType"`
	// ErrorFingerprint groups the events one fault produced:
	// "provider/errorType/template of the message" (mapping.Fingerprint),
	// absent when the event has no error message.
	ErrorFingerprint string `json:"errorFingerprint,omitempty"`
	ProviderState    string `json:"providerState"`
	// Step is the workflow state the execution is in (engine: the state
	// name; Step Functions: the newest entered state in a polled history),
	// absent when the provider's event does not say.
	Step string `json:"step,omitempty"`

	OccurredAt         time.Time `json:"occurredAt"`
	ExecutionStartedAt time.Time `json:"executionStartedAt"`

	// Revision orders events of one execution; see Revision.
	Revision Revision `json:"revision"`
	// MappingVersion is the version of the mapping that produced the event.
	// An event re-normalized with a corrected mapping has the same revision
	// and a higher version, and replaces the event it corrects.
	MappingVersion int  `json:"mappingVersion,omitzero"`
	Terminal       bool `json:"terminal"`
}

// Validate reports the first missing or invalid field: the tenant id as
// ValidateTenantID does, anything else as an EINVALID error.
func (d *EventData) Validate() error {
	if err := ValidateTenantID(d.TenantID); err != nil {
		return err
	}
	switch {
	case d.ExecutionID == "":
		return Errorf(EINVALID, "event has no execution id")
	case !d.SubState.Valid():
		return Errorf(EINVALID, "event has invalid sub-state %q", d.SubState)
	}
	if _, err := ParseProvider(string(d.Provider)); err != nil {
		return err
	}
	return nil
}

// Normalize fills Verb, Status and Terminal from SubState when they are unset.
func (d *EventData) Normalize() {
	if d.Verb == "" {
		d.Verb = d.SubState.Verb()
	}
	if d.Status == "" {
		d.Status = d.SubState.Status()
	}
	d.Terminal = d.SubState.Terminal()
}

// Event is a canonical event: a CloudEvents 1.0 structured-mode envelope
// around EventData.
type Event struct {
	CloudEvent[EventData]

	// Raw names the raw message the event was mapped from. It travels in
	// the HeaderRawSeq and HeaderRawID message headers, not in the JSON.
	Raw RawRef `json:"-"`
	// Hop is the trace context of the event's own message when tracing
	// is on (the span that publishes it, its creation context): the
	// message's traceparent header carries it, and TraceParent keeps the
	// trace as it began. Empty, the header carries TraceParent.
	Hop string `json:"-"`
}

// NewEvent wraps data in a CloudEvent with the given id. The source names the
// provider, the type the sub-state, the subject is the tenant id and the
// time is when it occurred.
func NewEvent(id string, data EventData) Event {
	return Event{CloudEvent: CloudEvent[EventData]{
		SpecVersion:     CloudEventsSpecVersion,
		ID:              id,
		Source:          eventSource(data.Provider),
		Type:            EventTypeFor(data.SubState),
		Subject:         data.TenantID,
		Time:            Timestamp{data.OccurredAt},
		DataContentType: EventContentType,
		Data:            data,
	}}
}

// sourcePrefix starts every event's source: /substate/<provider>.
const sourcePrefix = "/substate/"

// eventSource is the source of an event of provider p, the same string
// for every event of a known provider (not one made for each).
func eventSource(p Provider) string {
	if i := slices.Index(Providers, p); i >= 0 {
		return knownSources[i]
	}
	return sourcePrefix + string(p)
}

// MarshalEvent encodes e as structured CloudEvents JSON.
//
// The event codec is JSON v2 (encoding/json/v2 as a module): it encodes
// and decodes several times faster than encoding/json with a fraction of
// the allocations, which counts twice per event on the hot path (the
// normalizer encodes, the projector decodes). It reads member names
// exactly as they are written and rejects a name given twice.
//
// It writes the JSON field by field, the bytes json.Marshal writes (a
// table test and a fuzz target hold the two equal): the normalizer
// encodes every canonical event. An event json.Marshal would refuse is
// left to it, so the error stays its own.
func MarshalEvent(e Event) ([]byte, error) { return AppendEvent(nil, &e) }

// AppendEvent appends to b what MarshalEvent returns for *e, so that a
// publisher sending one event at a time writes each into the buffer of
// the one before it.
func AppendEvent(b []byte, e *Event) ([]byte, error) {
	if out, ok := e.appendJSON(slices.Grow(b, eventJSONRoom(e))); ok {
		return out, nil
	}
	refused := *e // a copy escapes, so *e stays where it is
	return appendMarshal(b, &refused)
}

// appendMarshal appends json.Marshal's encoding of v to b, or returns its
// error.
func appendMarshal(b []byte, v any) ([]byte, error) {
	out, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(b, out...), nil
}

// UnmarshalEvent decodes structured CloudEvents JSON and checks that it is a
// canonical substate event. It decodes as json.Unmarshal into an Event
// does (see decodeEvent), at a fraction of its cost.
func UnmarshalEvent(b []byte) (Event, error) {
	e, err := decodeEvent(b)
	if err != nil {
		return Event{}, WrapError(EINVALID, err, "decode cloudevent")
	}
	if e.SpecVersion != CloudEventsSpecVersion || !strings.HasPrefix(e.Type, EventTypePrefix) {
		return Event{}, Errorf(EINVALID, "not a substate event (specversion %q, type %q)", e.SpecVersion, e.Type)
	}
	if err := e.Data.Validate(); err != nil {
		return Event{}, err
	}
	if !eventTypeOK(e.Type, e.Data.SubState) {
		return Event{}, Errorf(EINVALID, "event type %q does not match its sub-state %q", e.Type, e.Data.SubState)
	}
	return e, nil
}

// Mapper turns one raw event into canonical events. Its errors are permanent:
// an EINVALID or ENOTENANT error sends the raw event to the dead-letter stream.
type Mapper interface {
	Map(ev RawEvent) ([]EventData, error)
}

// EventPublisher publishes canonical events and returns once each is durable.
type EventPublisher interface {
	PublishEvents(ctx context.Context, events []Event) error
}
