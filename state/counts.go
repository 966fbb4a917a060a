package state

import (
	"context"

	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
)

// TenantCounts returns how many tenants the view holds by sub-state and
// provider: every pair of substate.SubStates and substate.Providers,
// in that order, zero counts included. It reads the group counters of
// the workflow type dimension, which count every tenant, in one read
// transaction: its cost is one read per counter cell (distinct workflow
// type × sub-state × provider × error flag), whatever the number of
// tenants, and the counts are exact, as committed (an event held in
// memory changes no sub-state; see the package doc).
func (d *DB) TenantCounts(ctx context.Context) ([]substate.TenantCount, error) {
	var sums [codeFailed + 1][lastProviderCode + 1]int64
	err := d.read(ctx, "count tenants", func(tx *bolt.Tx) error {
		return forCells(tx, dimType, &substate.TenantFilter{}, func(ref cellRef, n int64) {
			if int(ref.c.ss) < len(sums) && int(ref.c.prov) < len(sums[0]) {
				sums[ref.c.ss][ref.c.prov] += n
			}
		})
	})
	if err != nil {
		return nil, err
	}
	out := make([]substate.TenantCount, 0, len(substate.SubStates)*len(substate.Providers))
	for _, s := range substate.SubStates {
		for _, p := range substate.Providers {
			out = append(out, substate.TenantCount{SubState: s, Provider: p, Count: sums[subStateCode(s)][providerCode(p)]})
		}
	}
	return out, nil
}
