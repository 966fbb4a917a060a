package mapping

import (
	"bytes"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/substatehq/substate"
)

// engineEnvelope is an engine event sent as a structured CloudEvent.
type engineEnvelope struct {
	SpecVersion string         `json:"specversion"`
	ID          string         `json:"id"`
	Subject     string         `json:"subject"`
	Time        string         `json:"time"`
	Data        jsontext.Value `json:"data"`
}

// mapEngineRaw maps an engine status event that arrives as a plain
// EngineEvent, as a CloudEvent in binary mode (ce-* headers, the
// EngineEvent as the body) or as a structured CloudEvent (the EngineEvent
// as its data). The event's own id, tenant and time win; the CloudEvent's
// id, subject and time fill those it leaves out.
func (m *Mapper) mapEngineRaw(raw substate.RawEvent) (substate.EventData, error) {
	attrs := ceAttrs{}
	body := raw.Body
	switch {
	case raw.Header[substate.HeaderCESpecVersion] != "":
		attrs = ceAttrs{spec: raw.Header[substate.HeaderCESpecVersion], id: raw.Header[substate.HeaderCEID],
			subject: raw.Header[substate.HeaderCESubject], time: raw.Header[substate.HeaderCETime]}
	case structuredCE(body):
		var env engineEnvelope
		if err := decode(body, &env); err != nil {
			return substate.EventData{}, substate.WrapError(substate.EINVALID, err, "decode engine cloudevent")
		}
		attrs = ceAttrs{spec: env.SpecVersion, id: env.ID, subject: env.Subject, time: env.Time}
		body = env.Data
	default:
		return m.MapEngine(body)
	}
	if attrs.spec != substate.CloudEventsSpecVersion {
		return substate.EventData{}, substate.Errorf(substate.EINVALID, "engine cloudevent has specversion %q, want %q", attrs.spec, substate.CloudEventsSpecVersion)
	}
	var ev substate.EngineEvent
	if err := decode(body, &ev); err != nil {
		return substate.EventData{}, substate.WrapError(substate.EINVALID, err, "decode engine event")
	}
	if err := attrs.fill(&ev); err != nil {
		return substate.EventData{}, err
	}
	return m.MapEngineEvent(ev)
}

// ceAttrs are the CloudEvents attributes an engine event can take from
// its envelope.
type ceAttrs struct{ spec, id, subject, time string }

func (a ceAttrs) fill(ev *substate.EngineEvent) error {
	if ev.ID == "" {
		ev.ID = a.id
	}
	if ev.TenantID == "" {
		ev.TenantID = a.subject
	}
	if ev.Time.IsZero() && a.time != "" {
		t, err := time.Parse(time.RFC3339Nano, a.time)
		if err != nil {
			return substate.WrapError(substate.EINVALID, err, "engine cloudevent time")
		}
		ev.Time = t.UTC()
	}
	return nil
}

// structuredCE reports whether body is a JSON object with a specversion
// member at its top level: a structured CloudEvent rather than a plain
// engine event (which has none).
func structuredCE(body []byte) bool {
	if !bytes.Contains(body, []byte(`"specversion"`)) {
		return false
	}
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return false
		}
		if name.String() == "specversion" {
			return true
		}
		if err := dec.SkipValue(); err != nil {
			return false
		}
	}
	return false
}
