package consumers

import (
	"bytes"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/tracing"
)

// rawHeaders returns the headers of a raw message the mapping and the
// normalizer read (substate.KeptRawHeaders).
func rawHeaders(msg jetstream.Msg) map[string]string {
	return substate.KeptRawHeaders(msg.Headers())
}

// traceParentOf returns the valid traceparent of a raw event, or "": from
// its headers (as the ingress keeps it, or as a CloudEvent in binary mode
// carries it), else from the body when that is a structured CloudEvent.
func traceParentOf(raw *substate.RawEvent) string {
	tp := raw.Header[substate.HeaderTraceParent]
	if tp == "" {
		tp = raw.Header[substate.HeaderCEPrefix+substate.HeaderTraceParent]
	}
	if tp == "" && bytes.Contains(raw.Body, []byte(`"traceparent"`)) {
		var env struct {
			SpecVersion string `json:"specversion"`
			TraceParent string `json:"traceparent"`
		}
		if json.Unmarshal(raw.Body, &env) == nil && env.SpecVersion != "" {
			tp = env.TraceParent
		}
	}
	if !substate.ValidTraceParent(tp) {
		return ""
	}
	return tp
}

// traceStage names a stage's consumer for its spans: the template of the
// subjects it reads and its durable name, the consumer group.
func traceStage(c jetstream.Consumer, template string) tracing.Stage {
	st := tracing.Stage{Template: template}
	if c != nil {
		if info := c.CachedInfo(); info != nil {
			st.Group = info.Name
		}
	}
	return st
}
