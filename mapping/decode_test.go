package mapping_test

import (
	"strings"
	"testing"

	"github.com/substatehq/substate"
)

// Provider payloads are decoded as leniently as real ones may need, and no
// more: a member given twice takes its last value; invalid UTF-8 and
// unpaired surrogate escapes are refused (providers send valid UTF-8, and
// replacing them would merge distinct values); member names match exactly,
// as every provider writes them.
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
	t.Run("ErrInvalidUTF8", func(t *testing.T) {
		_, err := eventbridge(strings.Replace(body, `"UpstreamUnavailable"`, "\"Upstream\xffUnavailable\"", 1))
		if substate.ErrorCode(err) != substate.EINVALID || !strings.Contains(err.Error(), "not valid UTF-8 (byte 0xFF at offset") ||
			!strings.Contains(err.Error(), "providers send only UTF-8 JSON") {
			t.Fatalf("got %v, want the event refused for its invalid UTF-8", err)
		}
	})
	t.Run("ErrUnpairedSurrogate", func(t *testing.T) {
		_, err := eventbridge(strings.Replace(body, `"UpstreamUnavailable"`, `"Upstream\udcffUnavailable"`, 1))
		if substate.ErrorCode(err) != substate.EINVALID || !strings.Contains(err.Error(), "invalid surrogate pair") {
			t.Fatalf("got %v, want the event refused for its unpaired surrogate", err)
		}
	})
	t.Run("EscapedReplacementCharIsKept", func(t *testing.T) {
		got, err := eventbridge(strings.Replace(body, `"UpstreamUnavailable"`, `"Upstream\ufffdUnavailable"`, 1))
		if err != nil || got.ErrorType != "Upstream\uFFFDUnavailable" {
			t.Fatalf("error type %q, %v; want the escaped U+FFFD kept", got.ErrorType, err)
		}
	})
	t.Run("ErrNamesMatchExactly", func(t *testing.T) {
		_, err := eventbridge(strings.Replace(body, `"detail-type"`, `"Detail-Type"`, 1))
		if substate.ErrorCode(err) != substate.EINVALID {
			t.Fatalf("got %v, want the event refused: it has no detail-type", err)
		}
	})
}
