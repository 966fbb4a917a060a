package consumers_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/consumers"
)

func TestTenantsCollector(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		c := &consumers.TenantsCollector{Counts: func(context.Context) ([]substate.TenantCount, error) {
			return []substate.TenantCount{
				{SubState: substate.StateRunning, Provider: substate.ProviderRestate, Count: 3},
				{SubState: substate.StateFailed, Provider: substate.ProviderStepFunctions, Count: 0},
			}, nil
		}}
		want := `
# HELP substate_tenants Tenants in the view by sub-state and provider, from the counters the view keeps.
# TYPE substate_tenants gauge
substate_tenants{provider="restate",sub_state="running"} 3
substate_tenants{provider="stepfunctions",sub_state="failed"} 0
`
		if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
			t.Error(err)
		}
	})
	t.Run("ReadFails", func(t *testing.T) {
		c := &consumers.TenantsCollector{Counts: func(context.Context) ([]substate.TenantCount, error) {
			return nil, errors.New("view closed")
		}}
		if got := testutil.CollectAndCount(c); got != 0 {
			t.Errorf("%d series from a failed read, want none", got)
		}
	})
}
