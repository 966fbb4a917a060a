package consumers

import (
	"bytes"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// ceHeaderPrefix starts the headers of a CloudEvent in binary mode on
// NATS: its attributes, one header each.
const ceHeaderPrefix = "ce-"

// rawHeaders returns the headers of a raw message the mapping and the
// normalizer read: the traceparent and the CloudEvents binary-mode
// attributes (ce-*), keys in lower case; nil when there are none.
func rawHeaders(msg jetstream.Msg) map[string]string {
	var out map[string]string
	for k, vs := range msg.Headers() {
		lk := strings.ToLower(k)
		if len(vs) == 0 || (lk != substate.HeaderTraceParent && !strings.HasPrefix(lk, ceHeaderPrefix)) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[lk] = vs[0]
	}
	return out
}

// traceParentOf returns the valid traceparent of a raw event, or "": from
// its headers (as the ingress keeps it, or as a CloudEvent in binary mode
// carries it), else from the body when that is a structured CloudEvent.
func traceParentOf(raw *substate.RawEvent) string {
	tp := raw.Header[substate.HeaderTraceParent]
	if tp == "" {
		tp = raw.Header[ceHeaderPrefix+substate.HeaderTraceParent]
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
