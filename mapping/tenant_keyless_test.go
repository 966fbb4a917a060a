package mapping_test

import (
	"encoding/json"
	"errors"
	"strings"
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

// A keyless invocation no rule resolves is refused with an error that
// names it, so the normalizer can dead-letter its first row only.
func TestResolveTenantKeylessUnresolved(t *testing.T) {
	tests := []struct {
		name  string
		rules []string
		set   map[string]any
		says  []string
	}{
		{"Defaults", []string{"input:$.tenantId", "restate:key", "engine:tenant"}, nil,
			[]string{"input:$.tenantId (no execution input)", "restate:key (no target_service_key)"}},
		{"InputWithoutTenant", []string{"input:$.tenantId"}, map[string]any{"input": map[string]any{"x": 1}},
			[]string{"input:$.tenantId (no match)"}},
		{"InputNull", []string{"input:$.tenantId"}, map[string]any{"input": json.RawMessage("null")},
			[]string{"input:$.tenantId (no execution input)"}},
		{"GeneratedIdempotencyKey", []string{"name:^(?P<tenant>[a-z0-9-]+)--"}, nil,
			[]string{`name:^(?P<tenant>[a-z0-9-]+)-- (no match in "01M859XX3TQKV6HKYVBWP6FVEB")`}},
		{"NoIdempotencyKey", []string{"name:^(?P<tenant>[a-z0-9-]+)--"}, map[string]any{"idempotency_key": nil},
			[]string{"no execution name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mappingWithRules(t, tt.rules...).Map(substate.RawEvent{Kind: substate.RawRestate, ID: "r", Body: keylessRow(t, tt.set)})
			wantCode(t, err, substate.ENOTENANT)
			var u *substate.UnresolvedTenant
			if !errors.As(err, &u) {
				t.Fatalf("error %v does not name the execution", err)
			}
			if got, want := u.Provider, substate.ProviderRestate; got != want {
				t.Errorf("provider = %q, want %q", got, want)
			}
			if got, want := u.ExecutionID, "inv_1bvqeCB2HiT82ZtXxTGwkPYWrcUNbkTLkx"; got != want {
				t.Errorf("execution = %q, want %q", got, want)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
	t.Run("SeveralRowsNameNoExecution", func(t *testing.T) {
		// A payload of several rows is dead-lettered whole: its other rows
		// must not be lost with the row of an execution already reported.
		body := []byte(`{"rows":[` + string(restateRow(t, "running", nil)) + `,` + string(keylessRow(t, nil)) + `]}`)
		_, err := newMapper(t).Map(substate.RawEvent{Kind: substate.RawRestate, ID: "r", Body: body})
		wantCode(t, err, substate.ENOTENANT)
		var u *substate.UnresolvedTenant
		if errors.As(err, &u) {
			t.Errorf("error of a payload of two rows names execution %q", u.ExecutionID)
		}
	})
	t.Run("StepFunctions", func(t *testing.T) {
		_, err := mappingWithRules(t, "input:$.tenantId").Map(substate.RawEvent{Kind: substate.RawEventBridge, ID: "e",
			Body: sfnEvent(t, "RUNNING", map[string]any{"input": `{"x":1}`})})
		var u *substate.UnresolvedTenant
		if !errors.As(err, &u) || u.Provider != substate.ProviderStepFunctions || !strings.Contains(u.ExecutionID, "acme--run-1") {
			t.Errorf("error %v (%+v): want one naming the Step Functions execution", err, u)
		}
	})
}
