package mapping_test

import (
	"strings"
	"testing"

	"github.com/substatehq/substate"
)

// Provider payloads are decoded as leniently as real ones may need: a
// member given twice takes its last value and invalid UTF-8 is replaced;
// member names match exactly, as every provider writes them.
func TestDecodeLeniency(t *testing.T) {
	m := newMapper(t)
	body := string(fixture(t, "sfn-status-failed.json"))
	eventbridge := func(body string) (substate.EventData, error) {
		evs, err := m.Map(substate.RawEvent{Kind: substate.RawEventBridge, ID: "x", Body: []byte(body)})
		if err != nil {
			return substate.EventData{}, err
		}
		return evs[0], nil
	}
	t.Run("RepeatedMemberTakesTheLast", func(t *testing.T) {
		got, err := eventbridge(strings.Replace(body, `"status": "FAILED"`, `"status": "RUNNING", "status": "FAILED"`, 1))
		if err != nil || got.ProviderState != "FAILED" {
			t.Fatalf("state %q, %v; want FAILED", got.ProviderState, err)
		}
	})
	t.Run("InvalidUTF8IsReplaced", func(t *testing.T) {
		got, err := eventbridge(strings.Replace(body, `"UpstreamUnavailable"`, "\"Upstream\xffUnavailable\"", 1))
		if err != nil || got.ErrorType != "Upstream\uFFFDUnavailable" {
			t.Fatalf("error type %q, %v; want the byte replaced", got.ErrorType, err)
		}
	})
	t.Run("ErrNamesMatchExactly", func(t *testing.T) {
		_, err := eventbridge(strings.Replace(body, `"detail-type"`, `"Detail-Type"`, 1))
		if substate.ErrorCode(err) != substate.EINVALID {
			t.Fatalf("got %v, want the event refused: it has no detail-type", err)
		}
	})
}
