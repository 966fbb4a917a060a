package substate_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/substatehq/substate"
)

func TestEventRoundTrip(t *testing.T) {
	data := substate.EventData{
		TenantID:    "acme",
		Provider:    substate.ProviderRestate,
		ExecutionID: "inv_1",
		SubState:    substate.StateBackingOff,
		RetryCount:  3, RetryCountKnown: true,
		ErrorMessage: "[500] payment provider returned HTTP 503",
		OccurredAt:   time.Date(2024, 6, 19, 10, 0, 47, 0, time.UTC),
		Revision:     1718791247905,
	}
	data.Normalize()
	b, err := substate.MarshalEvent(substate.NewEvent("id-1", data))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"specversion", "id", "source", "type", "subject", "time", "datacontenttype", "data"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("cloudevent lacks %q", k)
		}
	}
	got, err := substate.UnmarshalEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Data != data {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got.Data, data)
	}
	if got.Data.Verb != substate.VerbRetrying || got.Data.Status != substate.StatusRunning || got.Data.Terminal {
		t.Fatalf("normalize: verb %q status %q terminal %v", got.Data.Verb, got.Data.Status, got.Data.Terminal)
	}
}

func TestUnmarshalEventErrors(t *testing.T) {
	tests := map[string]string{
		"NotJSON":     `{`,
		"WrongType":   `{"specversion":"1.0","type":"other","data":{}}`,
		"NoTenant":    `{"specversion":"1.0","type":"` + substate.EventType + `","data":{"executionId":"x","subState":"running","provider":"engine"}}`,
		"BadSubState": `{"specversion":"1.0","type":"` + substate.EventType + `","data":{"tenantId":"t","executionId":"x","subState":"paused","provider":"engine"}}`,
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := substate.UnmarshalEvent([]byte(in)); err == nil {
				t.Fatal("want error")
			}
		})
	}
}
