package mapping_test

import (
	"encoding/json"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/mapping"
)

// fixtureUse says what TestGolden does with each provider fixture, so that a
// new fixture cannot be left out unnoticed: the status events and invocation
// rows decode to a golden file, the rest say why they do not.
var fixtureUse = map[string]string{
	"eventbridge-api-destination-request.json":         "golden", // the body is a status event
	"eventbridge-putevents-request.json":               "a PutEvents request substate sends, not a status event",
	"eventbridge-putevents-response.json":              "a PutEvents response",
	"nats-consumer-config.json":                        "JetStream configuration",
	"nats-stream-config.json":                          "JetStream configuration",
	"restate-ingress-send-response.json":               "a Restate ingress response, no status",
	"restate-invocation-backing-off.json":              "golden",
	"restate-invocation-completed-failure.json":        "golden",
	"restate-invocation-completed-success.json":        "golden",
	"restate-invocation-running.json":                  "golden",
	"restate-invocation-completed-killed.json":         "golden",
	"restate-invocation-paused.json":                   "golden",
	"restate-invocation-pending.json":                  "golden",
	"restate-invocation-scheduled.json":                "golden",
	"restate-invocation-suspended.json":                "golden",
	"restate-keyless-completed.json":                   "a keyless service's row: no tenant, tested in TestMapRestate",
	"restate-query-error.json":                         "an admin API error body",
	"restate-query-request.json":                       "an admin API request",
	"sfn-describe-execution-failed.json":               "golden", // as sfn-poll-failed.json, with the history page
	"sfn-describe-execution-request.json":              "a Step Functions API request",
	"sfn-error-response-execution-does-not-exist.json": "a Step Functions API error body",
	"sfn-history-retry.json":                           "golden",
	"sfn-status-aborted.json":                          "golden",
	"sfn-status-failed.json":                           "golden",
	"sfn-status-running.json":                          "golden",
	"sfn-status-succeeded.json":                        "golden",
	"sfn-status-timed-out.json":                        "golden",
	"standard-webhook-test-vector.json":                "the Standard Webhooks signature vector",
}

func TestGolden(t *testing.T) {
	m := newMapper(t)
	for _, name := range fixtures.Providers("*.json") {
		if _, ok := fixtureUse[name]; !ok {
			t.Errorf("fixture %s is new: give it a golden file here or say in fixtureUse why it has none", name)
		}
	}
	cases := map[string]substate.RawKind{}
	for _, n := range fixtureNames(t, "sfn-status-*.json") {
		cases[n] = substate.RawEventBridge
	}
	for _, n := range fixtureNames(t, "restate-invocation-*.json") {
		cases[n] = substate.RawRestate
	}
	if len(cases) < 14 {
		t.Fatalf("found %d fixtures, want the 5 sfn-status and 9 restate-invocation ones", len(cases))
	}
	for name, kind := range cases {
		t.Run(name, func(t *testing.T) {
			golden(t, name, mustMap(t, m, kind, fixture(t, name)))
		})
	}
	t.Run("eventbridge-api-destination-request.json", func(t *testing.T) {
		var req struct {
			Body json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(fixture(t, "eventbridge-api-destination-request.json"), &req); err != nil {
			t.Fatal(err)
		}
		golden(t, "eventbridge-api-destination-request.json", mustMap(t, m, substate.RawEventBridge, req.Body))
	})
	t.Run("sfn-poll-failed.json", func(t *testing.T) {
		body := pollPayload(t, fixture(t, "sfn-describe-execution-failed.json"), fixture(t, "sfn-history-retry.json"))
		golden(t, "sfn-poll-failed.json", mustMap(t, m, substate.RawStepFunctionsPoll, body))
	})
	t.Run("sfn-history-retry.json", func(t *testing.T) {
		h, err := mapping.ParseHistory(fixture(t, "sfn-history-retry.json"))
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "sfn-history-retry.json", h)
	})
}
