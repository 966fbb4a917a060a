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

// FuzzKeptRawHeaders holds the header names kept to their definition:
// kept when the name, lower-cased, is the traceparent or the stop cause or
// starts with "ce-", whatever its case or its non-ASCII letters (the
// Kelvin sign lower-cases to k, the long s stays itself).
func FuzzKeptRawHeaders(f *testing.F) {
	for _, k := range []string{"Traceparent", "TRACEPARENT", "Nats-Msg-Id", "Substate-Received-At", "Substate-Stop-Cause",
		"CE-Type", "ce-", "Ce", "c\u212Ae-x", "\u017Fubstate-\u017Ftop-cause", "Ce-\xff", ""} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		lk := strings.ToLower(k)
		want := lk == substate.HeaderTraceParent || lk == substate.HeaderStopCause || strings.HasPrefix(lk, substate.HeaderCEPrefix)
		got := substate.KeptRawHeaders(map[string][]string{k: {"v"}})
		if (got != nil) != want || want && got[lk] != "v" {
			t.Fatalf("KeptRawHeaders of %q: %v, want kept %v as %q", k, got, want, lk)
		}
	})
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
