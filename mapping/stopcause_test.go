package mapping_test

import (
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
)

// A Restate row substate published after its own stop carries the cause in
// a header: a cancelled or killed row shows it as the error, one step above
// the same row without it; any other row ignores it.
func TestRestateStopCause(t *testing.T) {
	m := newMapper(t)
	killed := map[string]any{"completion_result": "failure", "completion_failure": "[409] canceled"}
	tests := []struct {
		name      string
		row       []byte
		cause     string
		wantError string
		outranks  bool
	}{
		{"Cancelled", restateRow(t, "completed", killed), "customer closed the account\nticket 42", "Stopped: customer closed the account", true},
		{"Killed", restateRow(t, "completed", map[string]any{"completion_result": "failure", "completion_failure": "[409] killed"}), "stuck for good", "Stopped: stuck for good", true},
		{"NoCause", restateRow(t, "completed", killed), "  ", "canceled", false},
		{"FailedOtherwise", restateRow(t, "completed", map[string]any{"completion_result": "failure", "completion_failure": "[500] boom"}), "not needed", "boom", false},
		{"Succeeded", restateRow(t, "completed", map[string]any{"completion_result": "success"}), "not needed", "", false},
		{"StillRunning", restateRow(t, "running", nil), "not needed", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plain := mapOne(t, m, substate.RawEvent{Kind: substate.RawRestate, ID: "r", Body: tt.row})
			got := mapOne(t, m, substate.RawEvent{Kind: substate.RawRestate, ID: "r/stopped", Body: tt.row,
				Header: map[string]string{substate.HeaderStopCause: tt.cause}})
			if got.ErrorMessage != tt.wantError {
				t.Errorf("error %q, want %q", got.ErrorMessage, tt.wantError)
			}
			if outranks := got.Revision > plain.Revision; outranks != tt.outranks {
				t.Errorf("revision %d against %d without the cause: outranks %v, want %v", got.Revision, plain.Revision, outranks, tt.outranks)
			}
			if got.SubState != plain.SubState || got.Verb != plain.Verb || got.RetryCount != plain.RetryCount {
				t.Errorf("the cause changed more than the error: %+v against %+v", got, plain)
			}
			later := mapping.RestateRevision(plain.OccurredAt.Add(1e6), 0, mapping.RestateRankQueued)
			if got.Revision >= later {
				t.Errorf("revision %d is not below a row modified a millisecond later (%d)", got.Revision, later)
			}
		})
	}
}

// TestStopCauseReadsTheSame: a stop's cause is the same error message on
// every provider: Step Functions' ABORTED event (error Stopped, the cause),
// Restate's cancelled row that substate published with the cause, and the
// engine's stopped event.
func TestStopCauseReadsTheSame(t *testing.T) {
	m := newMapper(t)
	cause := "customer left\nticket 42"
	want := substate.StopMessage(cause)
	if want != "Stopped: customer left" {
		t.Fatalf("StopMessage = %q", want)
	}
	sfn := mapOne(t, m, substate.RawEvent{Kind: substate.RawEventBridge, ID: "e", Body: sfnEvent(t, "ABORTED", map[string]any{"error": substate.StopErrorType, "cause": cause})})
	rs := mapOne(t, m, substate.RawEvent{Kind: substate.RawRestate, ID: "r/stopped",
		Body:   restateRow(t, "completed", map[string]any{"completion_result": "failure", "completion_failure": "[409] canceled"}),
		Header: map[string]string{substate.HeaderStopCause: cause}})
	eng := mapOne(t, m, substate.RawEvent{Kind: substate.RawEngine, ID: "g", Body: mustJSON(t, substate.EngineEvent{
		ID: "acme-1/3", TenantID: "acme", ExecutionID: "acme-1", Seq: 3, Status: substate.EngineFailed,
		ErrorType: substate.StopErrorType, Error: cause, Stopped: true})})
	for name, ev := range map[string]substate.EventData{"stepfunctions": sfn, "restate": rs, "engine": eng} {
		if ev.ErrorMessage != want || ev.Verb != substate.VerbCancelled {
			t.Errorf("%s: error %q, verb %s; want %q, cancelled", name, ev.ErrorMessage, ev.Verb, want)
		}
	}
}

// mapOne maps a raw event to exactly one canonical event.
func mapOne(t *testing.T, m *mapping.Mapper, raw substate.RawEvent) substate.EventData {
	t.Helper()
	evs, err := m.Map(raw)
	if err != nil || len(evs) != 1 {
		t.Fatalf("map %s: %d events, %v", raw.ID, len(evs), err)
	}
	return evs[0]
}
