package mapping_test

import (
	"encoding/json"
	"testing"

	"github.com/substatehq/substate"
)

// keylessRow is the completed row of an invocation of a keyless service
// recorded from a real Restate 1.7.12 server (no target_service_key; its
// idempotency_key is the ULID Restate fills in when the caller sends no
// key), with the members in set replaced (nil deletes one).
func keylessRow(tb testing.TB, set map[string]any) []byte {
	tb.Helper()
	var page struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(fixture(tb, "restate-keyless-completed.json"), &page); err != nil {
		tb.Fatal(err)
	}
	row := page.Rows[0]
	for k, v := range set {
		if v == nil {
			delete(row, k)
			continue
		}
		row[k] = v
	}
	return mustJSON(tb, row)
}

// An invocation of a keyless service has no target_service_key: the
// default rules resolve it from the input the poller attaches, name:
// rules match its idempotency_key.
func TestResolveTenantKeylessRestate(t *testing.T) {
	defaults := []string{"input:$.tenantId", "restate:key", "engine:tenant"}
	byKey := []string{"name:^(?P<tenant>[a-z0-9-]+)--"}
	tests := []struct {
		name  string
		rules []string
		set   map[string]any
		want  string
	}{
		{"InputObject", defaults, map[string]any{"input": map[string]any{"tenantId": "acme", "order": 7}}, "acme"},
		{"InputAsText", defaults, map[string]any{"input": `{"tenantId":"acme"}`}, "acme"},
		{"InputNested", []string{"input:$.customer.tenant"}, map[string]any{"input": map[string]any{"customer": map[string]any{"tenant": "acme"}}}, "acme"},
		{"IdempotencyKey", byKey, map[string]any{"idempotency_key": "acme--order-17"}, "acme"},
		{"InputBeforeIdempotencyKey", append(defaults, byKey...), map[string]any{"input": map[string]any{"tenantId": "acme"}, "idempotency_key": "beta--order-17"}, "acme"},
		{"IdempotencyKeyAfterInput", append(defaults, byKey...), map[string]any{"input": map[string]any{"other": 1}, "idempotency_key": "beta--order-17"}, "beta"},
		{"KeyedRowNameIsItsKey", byKey, map[string]any{"target_service_key": "gamma--1", "idempotency_key": "beta--order-17"}, "gamma"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := mustMap(t, mappingWithRules(t, tt.rules...), substate.RawRestate, keylessRow(t, tt.set))[0]
			if got, want := ev.TenantID, tt.want; got != want {
				t.Errorf("tenant = %q, want %q", got, want)
			}
			if got, want := ev.SubState, substate.StateSucceeded; got != want {
				t.Errorf("sub-state = %q, want %q", got, want)
			}
		})
	}
}
