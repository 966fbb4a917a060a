package mapping_test

import (
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
)

func TestGolden(t *testing.T) {
	m := newMapper(t)
	cases := map[string]substate.RawKind{}
	for _, n := range fixtureNames(t, "sfn-status-*.json") {
		cases[n] = substate.RawEventBridge
	}
	for _, n := range fixtureNames(t, "restate-invocation-*.json") {
		cases[n] = substate.RawRestate
	}
	if len(cases) < 9 {
		t.Fatalf("found %d fixtures, want the 5 sfn-status and 4 restate-invocation ones", len(cases))
	}
	for name, kind := range cases {
		t.Run(name, func(t *testing.T) {
			golden(t, name, mustMap(t, m, kind, fixture(t, name)))
		})
	}
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
