package contract_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/contract"
)

// The audit events substate publishes validate against the payload that
// asyncapi.json gives SUBSTATE_AUDIT, whose properties are closed: a field
// the code adds without the document fails here, and so does an outcome
// the document does not list.
func TestAuditEventPayload(t *testing.T) {
	doc, err := contract.Document("asyncapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Components struct {
			Messages map[string]struct {
				Payload json.RawMessage `json:"payload"`
			} `json:"messages"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	schema := compile(t, d.Components.Messages["audit"].Payload)
	at := time.Date(2026, 11, 24, 5, 20, 0, 0, time.UTC)
	for _, ev := range []substate.AuditEvent{
		{ID: "audit-1", Time: at, Action: substate.ActionStop, Who: "ops", Reason: "customer left", Kill: true,
			TenantID: "beta", Provider: substate.ProviderRestate, ExecutionID: "inv_1", Outcome: substate.AuditDone},
		{ID: "audit-2", Time: at, Action: substate.ActionRestart, Who: "loopback", TenantID: "beta",
			Provider: substate.ProviderStepFunctions, ExecutionID: "arn:1", NewExecutionID: "arn:2", Outcome: substate.AuditDone},
		{ID: "audit-3", Time: at, Action: substate.ActionRetry, Who: "ops", TenantID: "beta", Provider: substate.ProviderEngine,
			ExecutionID: "x1", Outcome: substate.AuditOutcome(substate.Errorf(substate.ECONFLICT, "not retryable")),
			ErrorCode: substate.ECONFLICT, Error: "not retryable"},
		{ID: "audit-4", Time: at, Action: substate.ActionStop, Who: "ops", TenantID: "beta", Provider: substate.ProviderRestate,
			ExecutionID: "inv_2", Outcome: substate.AuditOutcome(substate.Errorf(substate.EUNAVAILABLE, "unreachable")),
			ErrorCode: substate.EUNAVAILABLE, Error: "unreachable"},
		{ID: "job-1.7", Time: at, Action: substate.ActionRetry, Who: "ops", TenantID: "beta", Provider: substate.ProviderStepFunctions,
			ExecutionID: "arn:3", Outcome: substate.AuditSkipped, Detail: "changed: the tenant is now running, not failed", Job: "job-1", Member: 7},
		{ID: "job-1.8.settled", Time: at, Action: substate.ActionStop, Who: "ops", TenantID: "beta", Provider: substate.ProviderRestate,
			ExecutionID: "inv_3", Outcome: substate.AuditDone, Settles: "job-1.8", Job: "job-1", Member: 8},
		{ID: "job-2.1", Time: at, Action: substate.ActionRequeue, Who: "ops", TenantID: "", Outcome: substate.AuditDone,
			Detail: "mapped again: 1 events published", Job: "job-2", Member: 1, DeadLetter: 42},
	} {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(v); err != nil {
			t.Errorf("audit event %s does not match asyncapi.json: %v", b, err)
		}
	}
}

// compile compiles one JSON Schema given inline.
func compile(t *testing.T, raw json.RawMessage) *jsonschema.Schema {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("audit.json", v); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("audit.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
