package substate

import (
	"context"
	"strings"
	"unicode/utf8"
)

// RawKind names the shape of a raw provider payload; it is the part of the
// raw subject after "substate.raw." and tells the normalizer which decoder to use.
type RawKind string

// The raw payload kinds.
const (
	// RawEventBridge is one EventBridge "Step Functions Execution Status Change" event.
	RawEventBridge RawKind = "stepfunctions.eventbridge"
	// RawStepFunctionsPoll is a DescribeExecution result with recent history,
	// read by the reconciler.
	RawStepFunctionsPoll RawKind = "stepfunctions.poll"
	// RawRestate is one sys_invocation row (webhook or admin-API poll).
	RawRestate RawKind = "restate.invocation"
	// RawEngine is one status event of the built-in engine (EngineEvent).
	RawEngine RawKind = "engine.status"
)

// RawKinds lists every raw kind.
var RawKinds = []RawKind{RawEventBridge, RawStepFunctionsPoll, RawRestate, RawEngine}

// Provider returns the provider the kind belongs to.
func (k RawKind) Provider() Provider {
	switch k {
	case RawEventBridge, RawStepFunctionsPoll:
		return ProviderStepFunctions
	case RawRestate:
		return ProviderRestate
	case RawEngine:
		return ProviderEngine
	}
	return ""
}

// RawEvent is a provider payload as received, before mapping. Body keeps the
// provider's original bytes; ID is the provider's own event id and becomes
// the Nats-Msg-Id so a redelivered source event has no second effect.
type RawEvent struct {
	Kind   RawKind
	ID     string
	Body   []byte
	Header map[string]string // extra headers to keep as evidence (optional)
}

// MaxSourceIDBytes is the longest id a provider may give an event it
// pushes (an EventBridge event's id, a Standard Webhooks webhook-id). The
// id becomes the raw message's Nats-Msg-Id and a part of every canonical
// event id; providers send UUIDs and short tokens.
const MaxSourceIDBytes = 256

// ValidateSourceID reports, as an EINVALID error, why id cannot be the id
// of a pushed provider event: empty, longer than MaxSourceIDBytes, or
// holding anything but printable ASCII without spaces (a NATS header value
// and a log field stay one plain token).
func ValidateSourceID(id string) error {
	switch {
	case id == "":
		return Errorf(EINVALID, "the event id is empty")
	case len(id) > MaxSourceIDBytes:
		return Errorf(EINVALID, "the event id is %d bytes, longer than the maximum of %d", len(id), MaxSourceIDBytes)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' {
			return Errorf(EINVALID, "the event id holds byte 0x%02X at offset %d: only printable ASCII without spaces is allowed", c, i)
		}
	}
	return nil
}

// RawPublisher puts raw events on SUBSTATE_RAW and returns once JetStream
// acknowledged them (the effect is durable).
type RawPublisher interface {
	PublishRaw(ctx context.Context, ev RawEvent) error
}

// RawRef names the raw message a canonical event was mapped from. The zero
// RawRef names none (an event published before the link existed, or by
// another publisher).
type RawRef struct {
	Seq uint64 // stream sequence in SUBSTATE_RAW; 0 when unknown
	ID  string // the raw message's id; "" when unknown
}

// KeptRawHeaders returns the headers of a stored raw message that its
// mapping reads, keys in lower case, nil when there are none: the
// traceparent, the CloudEvents binary-mode attributes (ce-*) and the stop
// cause. The normalizer and the replay of the raw stream (evidence checks,
// re-normalization) read the same ones, so both map a message alike.
func KeptRawHeaders(h map[string][]string) map[string]string {
	var out map[string]string
	for k, vs := range h {
		if len(vs) == 0 || !keptRawHeader(k) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[strings.ToLower(k)] = vs[0]
	}
	return out
}

// keptRawHeader reports whether a raw message's header is one its
// mapping reads, in any case. An ASCII name is compared without being
// lower-cased (for ASCII, strings.EqualFold folds exactly as
// strings.ToLower lowers), so the headers every message has (its id,
// when it was received) cost nothing; any other name is lower-cased.
func keptRawHeader(k string) bool {
	for i := range len(k) {
		if k[i] >= utf8.RuneSelf {
			lk := strings.ToLower(k)
			return lk == HeaderTraceParent || lk == HeaderStopCause || strings.HasPrefix(lk, HeaderCEPrefix)
		}
	}
	return strings.EqualFold(k, HeaderTraceParent) || strings.EqualFold(k, HeaderStopCause) ||
		len(k) >= len(HeaderCEPrefix) && strings.EqualFold(k[:len(HeaderCEPrefix)], HeaderCEPrefix)
}
