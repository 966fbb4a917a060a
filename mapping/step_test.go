package mapping_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/substatehq/substate"
)

// TestStep checks the step of each kind of event that carries one.
func TestStep(t *testing.T) {
	m := newMapper(t)
	t.Run("Engine", func(t *testing.T) {
		ev := mustMap(t, m, substate.RawEngine, engineEvent(t, substate.EngineRunning))[0]
		if ev.Step != "CreateDatabase" {
			t.Errorf("step %q, want the event's state CreateDatabase", ev.Step)
		}
	})
	t.Run("EventBridge", func(t *testing.T) {
		ev := mustMap(t, m, substate.RawEventBridge, fixture(t, "sfn-status-running.json"))[0]
		if ev.Step != "" {
			t.Errorf("step %q, want none: a status change does not name the state", ev.Step)
		}
	})
	describe := fixture(t, "sfn-describe-execution-failed.json")
	for _, tc := range []struct {
		name    string
		history []byte
		want    string
	}{
		// The recorded history, newest first as the reconciler reads it.
		{"PollNewestFirst", reversed(t, fixture(t, "sfn-history-retry.json")), "ChargeCard"},
		{"PollOldestFirst", fixture(t, "sfn-history-retry.json"), "ChargeCard"},
		{"PollNewestEntered", historyOf(
			`{"id":7,"type":"TaskStateExited","stateExitedEventDetails":{"name":"Charge"}}`,
			`{"id":8,"type":"WaitStateEntered","stateEnteredEventDetails":{"name":"Pause"}}`,
			`{"id":3,"type":"TaskStateEntered","stateEnteredEventDetails":{"name":"Charge"}}`,
			`{"id":9,"type":"WaitStateExited","stateExitedEventDetails":{"name":"Pause"}}`,
		), "Pause"},
		{"PollNoEnteredState", historyOf(`{"id":1,"type":"ExecutionStarted"}`), ""},
		{"PollWithoutHistory", historyOf(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := mustMap(t, m, substate.RawStepFunctionsPoll, pollPayload(t, describe, tc.history))[0]
			if ev.Step != tc.want {
				t.Errorf("step %q, want %q", ev.Step, tc.want)
			}
		})
	}
}

// reversed returns a GetExecutionHistory page with its events in reverse order.
func reversed(tb testing.TB, page []byte) []byte {
	tb.Helper()
	var p struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(page, &p); err != nil {
		tb.Fatal(err)
	}
	slices.Reverse(p.Events)
	return mustJSON(tb, p)
}

// historyOf returns a GetExecutionHistory page of the given events.
func historyOf(events ...string) []byte {
	return fmt.Appendf(nil, `{"events":[%s]}`, strings.Join(events, ","))
}
