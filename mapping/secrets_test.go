package mapping_test

import (
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
)

// A secret in a provider's error text (a Step Functions cause, a Restate
// failure, an engine task's error) leaves the canonical event redacted,
// whatever the provider; the rest of the message stays.
func TestErrorTextRedacted(t *testing.T) {
	m := mapping.New(mapping.Config{})
	failedEngine := mustJSON(t, substate.EngineEvent{
		ID: "acme-1/4", TenantID: "acme", ExecutionID: "acme-1", Workflow: "provision", Seq: 4,
		Status: "failed", State: "CreateDatabase", Error: "connect: password hunter2 rejected",
	})
	for _, tc := range []struct {
		name string
		raw  substate.RawEvent
	}{
		{"StepFunctionsCause", substate.RawEvent{Kind: substate.RawEventBridge, ID: "ev-1", Body: sfnEvent(t, "FAILED", map[string]any{
			"error": "DbError", "cause": `{"errorMessage":"connect: password hunter2 rejected","errorType":"DbError"}`})}},
		{"RestateLastFailure", substate.RawEvent{Kind: substate.RawRestate, ID: "wh-1", Body: restateRow(t, "backing-off", map[string]any{
			"retry_count": 2, "last_failure": "[500] connect: password hunter2 rejected"})}},
		{"RestateCompletionFailure", substate.RawEvent{Kind: substate.RawRestate, ID: "wh-2", Body: restateRow(t, "completed", map[string]any{
			"completion_result": "failure", "completion_failure": "[500] connect: password hunter2 rejected"})}},
		{"Engine", substate.RawEvent{Kind: substate.RawEngine, ID: "acme-1/4", Body: failedEngine}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := mapOne(t, m, tc.raw)
			if strings.Contains(ev.ErrorMessage, "hunter2") || !strings.Contains(ev.ErrorMessage, "password [redacted] rejected") {
				t.Fatalf("error message %q, want the password redacted and the rest kept", ev.ErrorMessage)
			}
		})
	}
}
