package substate_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/substatehq/substate"
)

// The headers a raw message keeps for its mapping: the traceparent, the
// CloudEvents binary-mode attributes and the stop cause, keys in lower
// case; nothing else, and nil when none is there.
func TestKeptRawHeaders(t *testing.T) {
	tests := []struct {
		name string
		in   map[string][]string
		want map[string]string
	}{
		{"None", map[string][]string{"Nats-Msg-Id": {"x"}, "Content-Type": {"application/json"}}, nil},
		{"Kept", map[string][]string{
			"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, "Ce-Id": {"e-1", "e-2"},
			"Substate-Stop-Cause": {"not needed"}, "Nats-Msg-Id": {"x"}, "Ce-Empty": {},
		}, map[string]string{
			"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "ce-id": "e-1",
			substate.HeaderStopCause: "not needed",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := substate.KeptRawHeaders(tt.in)
			if !maps.Equal(got, tt.want) || (tt.want == nil) != (got == nil) {
				t.Fatalf("KeptRawHeaders = %v, want %v", got, tt.want)
			}
		})
	}
}

// A pushed event's id is bounded and plain: it becomes a Nats-Msg-Id.
func TestValidateSourceID(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   string
		ok   bool
	}{
		{"UUID", "c3d9b1e5-7f20-4a8c-2b6d-1e9f0a3c5d84", true},
		{"WebhookID", "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", true},
		{"Longest", strings.Repeat("a", substate.MaxSourceIDBytes), true},
		{"Empty", "", false},
		{"TooLong", strings.Repeat("a", substate.MaxSourceIDBytes+1), false},
		{"FiveThousand", strings.Repeat("x", 5000), false},
		{"Space", "msg 1", false},
		{"Newline", "msg\n1", false},
		{"DEL", "msg\x7f", false},
		{"NotASCII", "msg_é", false},
		{"Bidi", "msg_\u202e1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := substate.ValidateSourceID(tc.id)
			if got := err == nil; got != tc.ok {
				t.Fatalf("ValidateSourceID(%q) = %v, want ok %v", tc.id, err, tc.ok)
			}
			if err != nil && substate.ErrorCode(err) != substate.EINVALID {
				t.Fatalf("code %q, want %q", substate.ErrorCode(err), substate.EINVALID)
			}
		})
	}
}
