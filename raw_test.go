package substate_test

import (
	"maps"
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
