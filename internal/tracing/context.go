package tracing

import (
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/substatehq/substate"
)

// Parse returns the span context a W3C traceparent names, marked remote;
// the zero SpanContext (not valid) when tp is not a valid traceparent
// (substate.ValidTraceParent). A later version's extra fields are
// ignored, as Trace Context asks.
func Parse(tp string) trace.SpanContext {
	if !substate.ValidTraceParent(tp) {
		return trace.SpanContext{}
	}
	tid, err := trace.TraceIDFromHex(tp[3:35])
	if err != nil {
		return trace.SpanContext{}
	}
	sid, err := trace.SpanIDFromHex(tp[36:52])
	if err != nil {
		return trace.SpanContext{}
	}
	var flags trace.TraceFlags
	if unhex(tp[54])&1 == 1 { // the low bit of the flags byte: sampled
		flags = trace.FlagsSampled
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true})
}

func unhex(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}

// Format returns the traceparent of a span context (version 00), or ""
// when it is not valid.
func Format(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	var b [55]byte
	buf := append(b[:0], "00-"...)
	tid, sid := sc.TraceID(), sc.SpanID()
	buf = appendHex(buf, tid[:])
	buf = append(buf, '-')
	buf = appendHex(buf, sid[:])
	buf = append(buf, '-', '0', '0')
	if sc.IsSampled() {
		buf[54] = '1'
	}
	return string(buf)
}

func appendHex(dst, src []byte) []byte {
	const digits = "0123456789abcdef"
	for _, c := range src {
		dst = append(dst, digits[c>>4], digits[c&0xf])
	}
	return dst
}

// MaxXRayHeader bounds the X-Ray trace header substate reads (the header
// is about 100 bytes; a longer one is not read).
const MaxXRayHeader = 256

// XRay returns the span context an AWS X-Ray trace header names
// (Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1):
// the trace id is the root's epoch and unique parts together, the span id
// the parent. It is not valid when the header has no root or no parent,
// or is malformed.
func XRay(h string) trace.SpanContext {
	if len(h) > MaxXRayHeader {
		return trace.SpanContext{}
	}
	var root, parent string
	var sampled bool
	for part := range strings.SplitSeq(h, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Root":
			root = v
		case "Parent":
			parent = v
		case "Sampled":
			sampled = v == "1"
		}
	}
	// Root is 1-<8 hex digits of epoch seconds>-<24 hex digits>.
	if len(root) != 35 || root[:2] != "1-" || root[10] != '-' {
		return trace.SpanContext{}
	}
	tid, err := trace.TraceIDFromHex(strings.ToLower(root[2:10] + root[11:]))
	if err != nil {
		return trace.SpanContext{}
	}
	sid, err := trace.SpanIDFromHex(strings.ToLower(parent))
	if err != nil {
		return trace.SpanContext{}
	}
	var flags trace.TraceFlags
	if sampled {
		flags = trace.FlagsSampled
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true})
}
