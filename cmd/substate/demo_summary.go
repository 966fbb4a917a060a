package main

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/substatehq/substate"
)

// summary prints the final view of the demo's tenants and the count of
// tenants by sub-state, and says whether each settled as expected (or,
// when the demo was interrupted, how many had not settled yet).
func (d *demoRun) summary(ctx context.Context, interrupted bool) {
	var views []substate.TenantView
	bySubState := map[substate.SubState]int{}
	wrong := 0
	for _, t := range slices.Sorted(maps.Keys(d.expect)) {
		v, err := d.w.View.Tenant(ctx, t)
		if err != nil {
			v = substate.TenantView{TenantID: t}
		}
		views = append(views, v)
		bySubState[v.WorkflowSubState]++
		if string(v.WorkflowSubState) != d.expect[t] {
			wrong++
		}
	}
	d.printf("\nTenant view after %s:\n\n", time.Since(d.start).Round(100*time.Millisecond))
	d.mu.Lock()
	_ = printTenants(d.out, views)
	d.mu.Unlock()
	d.printf("\nBy sub-state:")
	for _, s := range substate.SubStates {
		if n := bySubState[s]; n > 0 {
			d.printf("  %s %d", s, n)
		}
	}
	if n := bySubState[""]; n > 0 {
		d.printf("  (no status yet) %d", n)
	}
	d.printf("\n")
	switch {
	case wrong == 0:
		d.printf("Every tenant settled as expected. Explore: substate tenants list --has-error, substate events tail --from-start\n")
	case interrupted:
		d.printf("Interrupted before %s settled as expected.\n", plural(wrong, "tenant"))
	default:
		d.printf("%s did not settle as expected.\n", plural(wrong, "tenant"))
	}
	d.printf("(The view, the streams and the worker log, demo.log, are kept under %s.)\n", d.w.Flags.DataDir)
}
