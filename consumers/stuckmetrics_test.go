package consumers_test

import (
	"maps"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/consumers"
)

// The workflow_type label takes the types with the most stuck tenants;
// the rest are summed as other, and no type is none.
func TestBoundStuck(t *testing.T) {
	bo, rs, sf := substate.StateBackingOff, substate.ProviderRestate, substate.ProviderStepFunctions
	counts := []substate.StuckCount{
		{SubState: bo, Provider: rs, WorkflowType: "billing", Count: 5},
		{SubState: bo, Provider: sf, WorkflowType: "billing", Count: 1},
		{SubState: bo, Provider: rs, WorkflowType: "ledger", Count: 4},
		{SubState: bo, Provider: rs, WorkflowType: "", Count: 7},
		{SubState: bo, Provider: rs, WorkflowType: "mail", Count: 2},
		{SubState: substate.StateError, Provider: rs, WorkflowType: "tax", Count: 1},
	}
	key := func(p substate.Provider, wt string, ss substate.SubState) substate.StuckCount {
		return substate.StuckCount{Provider: p, WorkflowType: wt, SubState: ss}
	}
	got := consumers.BoundStuck(counts, 2)
	want := map[substate.StuckCount]int64{
		key(rs, "none", bo): 7, key(rs, "billing", bo): 5, key(sf, "billing", bo): 1,
		key(rs, "other", bo): 6, key(rs, "other", substate.StateError): 1,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("BoundStuck = %v\nwant %v", got, want)
	}
}
