package substate

import (
	"bytes"
	"cmp"
	"errors"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/substatehq/substate/internal/jsonx"
)

// decodeEvent reads a canonical event's structured CloudEvents JSON: the
// projector, the evidence check, replay and rebuild decode every event.
//
// It walks the tokens with a pooled decoder and accepts and refuses what
// json.Unmarshal into an Event does (the fuzz target holds it to that,
// with json.Unmarshal as the oracle): names matched exactly, unknown
// members skipped, a name given twice, invalid UTF-8, a value not of its
// field's kind or anything after the event refused, null leaving a field
// zero. It allocates little: the values an event shares with others (the
// specversion, source and type, the provider, verb, status and sub-state)
// are the constants themselves, the workflow, error type, provider state
// and step come from the shared cache (package intern), and the rest
// (ids, tenant, error message, fingerprint) are parts of one string made
// for the event. By reflection the decode made a string per field.
func decodeEvent(b []byte) (Event, error) {
	x := eventDecoders.Get().(*eventDecoder)
	x.in = *bytes.NewBuffer(b)
	x.d.Reset(&x.in)
	x.text, x.n = x.text[:0], 0
	var e Event
	err := x.event(&e)
	x.in = bytes.Buffer{} // keep none of b in the pool
	x.d.Reset(&x.in)
	if cap(x.text) <= maxPooledText {
		eventDecoders.Put(x)
	}
	return e, err
}

// maxPooledText is the most text a pooled decoder keeps room for: an
// event with a longer error message does not pin its buffer.
const maxPooledText = 4 << 10

var eventDecoders = sync.Pool{New: func() any {
	x := new(eventDecoder)
	x.d = jsontext.NewDecoder(&x.in)
	return x
}}

// eventDecoder is one decode's state: the input, and the unique texts read
// so far (one after another in text), which become fields once the whole
// event has been read.
type eventDecoder struct {
	d       *jsontext.Decoder
	in      bytes.Buffer
	text    []byte
	pending [textFields]pendingText
	n       int
}

// pendingText is a unique text's place in eventDecoder.text and the field
// it becomes.
type pendingText struct {
	field      textField
	start, end int
}

// textField names an Event's string field.
type textField uint8

const (
	fieldSpecVersion textField = iota
	fieldID
	fieldSource
	fieldType
	fieldSubject
	fieldDataContentType
	fieldDataSchema
	fieldTraceParent
	fieldTenantID
	fieldProvider
	fieldExecutionID
	fieldVerb
	fieldStatus
	fieldErrorMessage
	fieldErrorFingerprint
	textFields
)

// textOf is the field f names in e. A pending text holds the field's name
// rather than a pointer to it, which would move every decoded event to the
// heap.
func textOf(e *Event, f textField) *string {
	d := &e.Data
	switch f {
	case fieldSpecVersion:
		return &e.SpecVersion
	case fieldID:
		return &e.ID
	case fieldSource:
		return &e.Source
	case fieldType:
		return &e.Type
	case fieldSubject:
		return &e.Subject
	case fieldDataContentType:
		return &e.DataContentType
	case fieldDataSchema:
		return &e.DataSchema
	case fieldTraceParent:
		return &e.TraceParent
	case fieldTenantID:
		return &d.TenantID
	case fieldProvider:
		return (*string)(&d.Provider)
	case fieldExecutionID:
		return &d.ExecutionID
	case fieldVerb:
		return (*string)(&d.Verb)
	case fieldStatus:
		return (*string)(&d.Status)
	case fieldErrorMessage:
		return &d.ErrorMessage
	}
	return &d.ErrorFingerprint
}

// Values an event shares with many others, which decode to these strings.
var (
	knownSpecVersions = []string{CloudEventsSpecVersion}
	knownContentTypes = []string{EventContentType}
	knownSources      = stringsOf(Providers, func(p Provider) string { return sourcePrefix + string(p) })
	knownProviders    = stringsOf(Providers, Provider.String)
	knownTypes        = append(EventTypes(), EventType)
	knownSubStates    = stringsOf(SubStates, func(s SubState) string { return string(s) })
	knownVerbs        = stringsOf(SubStates, func(s SubState) string { return string(s.Verb()) })
	knownStatuses     = stringsOf(SubStates, func(s SubState) string { return string(s.Status()) })
	errTrailingEvent  = errors.New("data after the event")
	errWantBool       = errors.New("want a JSON boolean")
	errTimeGrammar    = errors.New("not an RFC 3339 time")
)

func stringsOf[T any](vs []T, f func(T) string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = f(v)
	}
	return out
}

// event reads the envelope; nothing may follow it.
func (x *eventDecoder) event(e *Event) error {
	err := jsonx.ReadObject(x.d, func(name []byte) error {
		switch string(name) {
		case "specversion":
			return x.known(fieldSpecVersion, e, knownSpecVersions)
		case "id":
			return x.unique(fieldID)
		case "source":
			return x.known(fieldSource, e, knownSources)
		case "type":
			return x.known(fieldType, e, knownTypes)
		case "subject":
			return x.unique(fieldSubject)
		case "time":
			var err error
			e.Time, err = x.timestamp()
			return err
		case "datacontenttype":
			return x.known(fieldDataContentType, e, knownContentTypes)
		case "dataschema":
			return x.unique(fieldDataSchema)
		case "traceparent":
			return x.unique(fieldTraceParent)
		case "data":
			return jsonx.ReadObject(x.d, func(name []byte) error { return x.data(name, e) })
		}
		return x.d.SkipValue()
	})
	if err != nil {
		return err
	}
	if _, err := x.d.ReadToken(); err != io.EOF {
		return cmp.Or(err, errTrailingEvent)
	}
	if len(x.text) > 0 {
		all := string(x.text)
		for _, p := range x.pending[:x.n] {
			*textOf(e, p.field) = all[p.start:p.end]
		}
	}
	return nil
}

// data reads one member of the event's data.
func (x *eventDecoder) data(name []byte, e *Event) (err error) {
	d := &e.Data
	switch string(name) {
	case "tenantId":
		return x.unique(fieldTenantID)
	case "provider":
		return x.known(fieldProvider, e, knownProviders)
	case "executionId":
		return x.unique(fieldExecutionID)
	case "workflow":
		d.Workflow, err = x.shared()
	case "subState":
		err = x.subState(&d.SubState)
	case "verb":
		return x.known(fieldVerb, e, knownVerbs)
	case "status":
		return x.known(fieldStatus, e, knownStatuses)
	case "retryCount":
		d.RetryCount, err = x.readInt()
	case "retryCountKnown":
		d.RetryCountKnown, err = x.readBool()
	case "nextRetryAt":
		d.NextRetryAt, err = x.readTime()
	case "errorMessage":
		return x.unique(fieldErrorMessage)
	case "errorType":
		d.ErrorType, err = x.shared()
	case "errorFingerprint":
		return x.unique(fieldErrorFingerprint)
	case "providerState":
		d.ProviderState, err = x.shared()
	case "step":
		d.Step, err = x.shared()
	case "occurredAt":
		d.OccurredAt, err = x.readTime()
	case "executionStartedAt":
		d.ExecutionStartedAt, err = x.readTime()
	case "revision":
		var v uint64
		v, err = x.readUint()
		d.Revision = Revision(v)
	case "mappingVersion":
		d.MappingVersion, err = x.readInt()
	case "terminal":
		d.Terminal, err = x.readBool()
	default:
		err = x.d.SkipValue()
	}
	return err
}
