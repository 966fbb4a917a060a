package ingress

import (
	"github.com/substatehq/substate"
)

// withTraceParent adds the request's W3C traceparent to the headers of
// its raw events, so the normalizer can carry it into the canonical events
// (CloudEvents distributed tracing). An invalid traceparent is left out
// rather than propagated.
func withTraceParent(events []substate.RawEvent, traceParent string) {
	if !substate.ValidTraceParent(traceParent) {
		return
	}
	for i := range events {
		if events[i].Header == nil {
			events[i].Header = map[string]string{}
		}
		events[i].Header[substate.HeaderTraceParent] = traceParent
	}
}
