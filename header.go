package substate

// Header names: every NATS message header substate writes or reads, and
// every HTTP header of its own contract, in this one file.
//
// Casing. A constant is spelled exactly as substate writes the header on
// the wire, and that spelling is part of the contract, so none of them
// changes. NATS headers are case-sensitive: nats.go's Header.Get, Set and
// Values match keys byte for byte (net/http canonicalizes, nats.go keeps
// the case it reads), and the NATS server looks for Nats-Msg-Id byte for
// byte when it deduplicates. A retained message keeps the spelling of the
// version that wrote it, and other programs read SUBSTATE_EVENTS and
// SUBSTATE_DLQ with Get: a new casing would hide new messages from those
// readers, and old ones from new readers. One rule decides every
// spelling:
//
//   - a name substate defines is in canonical MIME form, as
//     http.CanonicalHeaderKey gives it: Substate-Raw-Seq, Substate-Dlq-Reason;
//   - a name another specification defines keeps that specification's
//     spelling: Nats-Msg-Id (JetStream), Content-Type, traceparent (W3C
//     Trace Context), the ce- attributes (the CloudEvents NATS binding),
//     webhook-id and its siblings (Standard Webhooks), X-Api-Key (what an
//     EventBridge connection sends), X-Amzn-Trace-Id (AWS X-Ray),
//     Last-Event-ID (the HTML standard's server-sent events);
//   - a header kept with a raw event (RawEvent.Header) is read through
//     KeptRawHeaders, which lowercases the names it finds so that a
//     sender's casing does not matter; those names are therefore written
//     in lower case, and so is substate-stop-cause, the one such header
//     substate sets itself (it is a key of that map before it is a header
//     on SUBSTATE_RAW).
//
// Over HTTP case does not matter: net/http canonicalizes on Get and Set.
// Standard HTTP headers that are no part of the contract (Authorization,
// Cache-Control, the console's security headers) are spelled where they
// are used.

// Headers of substate's own NATS messages.
const (
	// HeaderMsgID is JetStream's deduplication id: a message with an id the
	// stream has stored within its duplicate window is not stored again.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderContentType is the media type of a message's body.
	HeaderContentType = "Content-Type"
	// HeaderReceivedAt is when substate received a raw event.
	HeaderReceivedAt = "Substate-Received-At"
	// HeaderIdempotencyKey is the key of an engine task request: a task
	// service that sees it again does not act twice.
	HeaderIdempotencyKey = "Substate-Idempotency-Key"
)

// Headers that link a canonical event on SUBSTATE_EVENTS to the raw message
// on SUBSTATE_RAW it was mapped from. They are NATS message headers, not
// CloudEvent attributes: the CloudEvent body stays as §3.4 describes it.
const (
	HeaderRawSeq = "Substate-Raw-Seq" // stream sequence of the raw message
	HeaderRawID  = "Substate-Raw-Id"  // Nats-Msg-Id of the raw message (the provider's event id)
)

// Headers of a dead letter on SUBSTATE_DLQ, beside the original message's
// own headers.
const (
	HeaderDLQReason  = "Substate-Dlq-Reason"
	HeaderDLQStage   = "Substate-Dlq-Stage"
	HeaderDLQSubject = "Substate-Dlq-Subject"
	HeaderDLQSeq     = "Substate-Dlq-Stream-Seq"
	// HeaderOriginalMsgID keeps the original message's Nats-Msg-Id, which
	// the dead letter cannot carry under that name without SUBSTATE_DLQ
	// deduplicating on it.
	HeaderOriginalMsgID = "Substate-Original-Msg-Id"
)

// HeaderTraceParent is the W3C Trace Context header an ingress request
// carries, the message header substate keeps it in, and the CloudEvents
// distributed-tracing extension attribute.
const HeaderTraceParent = "traceparent"

// HeaderStopCause is the header of a raw provider status that substate
// itself published after it stopped the execution: the cause the operator
// gave. A provider that keeps no cause (Restate's cancel and kill take
// none) reports its own "canceled"/"killed"; the mapping puts this cause
// in the view's error instead, and the evidence keeps both.
const HeaderStopCause = "substate-stop-cause"

// HeaderXRay is the HTTP header AWS services carry an X-Ray trace in; an
// ingest request's span is linked to the trace it names.
const HeaderXRay = "X-Amzn-Trace-Id"

// HeaderCEPrefix starts the headers of a CloudEvent in binary mode on
// NATS: its attributes, one header each.
const HeaderCEPrefix = "ce-"

// The CloudEvents attributes the engine's binary-mode events are read by.
const (
	HeaderCESpecVersion = HeaderCEPrefix + "specversion"
	HeaderCEID          = HeaderCEPrefix + "id"
	HeaderCETime        = HeaderCEPrefix + "time"
	HeaderCESubject     = HeaderCEPrefix + "subject"
)

// HTTP headers of the ingest routes.
const (
	// HeaderAPIKey carries the ingest API key of EventBridge deliveries:
	// the header an EventBridge connection with API-key authorization
	// sends. The read API takes a read key in it too, for clients that
	// cannot send "Authorization: Bearer".
	HeaderAPIKey = "X-Api-Key"
	// HeaderWebhookID, HeaderWebhookTimestamp and HeaderWebhookSignature
	// are the Standard Webhooks headers of a Restate delivery: the message
	// id (the raw event's id), the Unix time it was signed at, and the
	// signatures.
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// HeaderLastEventID is the header a server-sent events client sends when it
// reconnects: the id of the last event it read. The event streams and the
// console's change stream resume after it.
const HeaderLastEventID = "Last-Event-ID"
