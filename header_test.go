package substate_test

import (
	"net/http"
	"testing"

	"github.com/substatehq/substate"
)

// TestHeaderSpelling pins every header name as it is written on the wire
// (NATS matches header names byte for byte, so a new casing would hide
// retained messages from readers) and holds the casing rule of header.go.
func TestHeaderSpelling(t *testing.T) {
	tests := []struct {
		got, want string
		canonical bool // a name substate defines: canonical MIME casing
	}{
		{substate.HeaderMsgID, "Nats-Msg-Id", true},
		{substate.HeaderContentType, "Content-Type", true},
		{substate.HeaderReceivedAt, "Substate-Received-At", true},
		{substate.HeaderIdempotencyKey, "Substate-Idempotency-Key", true},
		{substate.HeaderRawSeq, "Substate-Raw-Seq", true},
		{substate.HeaderRawID, "Substate-Raw-Id", true},
		{substate.HeaderDLQReason, "Substate-Dlq-Reason", true},
		{substate.HeaderDLQStage, "Substate-Dlq-Stage", true},
		{substate.HeaderDLQSubject, "Substate-Dlq-Subject", true},
		{substate.HeaderDLQSeq, "Substate-Dlq-Stream-Seq", true},
		{substate.HeaderOriginalMsgID, "Substate-Original-Msg-Id", true},
		{substate.HeaderAPIKey, "X-Api-Key", true},
		{substate.HeaderXRay, "X-Amzn-Trace-Id", true},
		// Spelled as their specifications spell them, or kept with a raw
		// event and so lower case.
		{substate.HeaderTraceParent, "traceparent", false},
		{substate.HeaderStopCause, "substate-stop-cause", false},
		{substate.HeaderCEPrefix, "ce-", false},
		{substate.HeaderCESpecVersion, "ce-specversion", false},
		{substate.HeaderCEID, "ce-id", false},
		{substate.HeaderCETime, "ce-time", false},
		{substate.HeaderCESubject, "ce-subject", false},
		{substate.HeaderWebhookID, "webhook-id", false},
		{substate.HeaderWebhookTimestamp, "webhook-timestamp", false},
		{substate.HeaderWebhookSignature, "webhook-signature", false},
		{substate.HeaderLastEventID, "Last-Event-ID", false},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("header %q, want %q as on the wire", tt.got, tt.want)
			}
			if canonical := http.CanonicalHeaderKey(tt.got) == tt.got; canonical != tt.canonical {
				t.Errorf("header %q: canonical MIME casing %v, want %v", tt.got, canonical, tt.canonical)
			}
		})
	}
}
