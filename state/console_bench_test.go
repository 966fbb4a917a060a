package state_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

// BenchmarkConsoleFirstPage reads the first page (50 tenants) of the
// console's table from a view of 1,000,000 tenants, for each filter and
// order the console offers, and the sub-state counts. Every listing is a
// walk of one index from where the filter starts; a filter no index serves
// (provider) reads at most ScanLimit keys.
func BenchmarkConsoleFirstPage(b *testing.B) {
	const tenants = 1_000_000
	db := openDB(b, func(db *state.DB) { db.NoSync = true })
	c := &clock{now: t0}
	db.Now = c.Now
	s := newStream(b, db)
	providers := []substate.Provider{substate.ProviderEngine, substate.ProviderStepFunctions, substate.ProviderRestate}
	start := time.Now()
	batch := make([]substate.EventData, 0, 10000)
	for i := range tenants {
		st := substate.SubStates[i%len(substate.SubStates)]
		opts := []evOpt{provider(providers[i%97%3])}
		if st == backingOff || st == errored || st == failed {
			opts = append(opts, retries(i%7+1), failure("boom"))
		}
		batch = append(batch, ev(fmt.Sprintf("tenant-%07d", i), "x", st, 1, opts...))
		if len(batch) == cap(batch) {
			c.now = c.now.Add(time.Second)
			s.apply(batch...)
			batch = batch[:0]
		}
	}
	b.Logf("built a view of %d tenants in %s", tenants, time.Since(start).Round(time.Second))
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		f    substate.TenantFilter
	}{
		{"All", substate.TenantFilter{}},
		{"SubState", substate.TenantFilter{SubState: errored}},
		{"HasError", substate.TenantFilter{HasError: true}},
		{"MinRetries", substate.TenantFilter{MinRetryCount: 5}},
		{"SortRetry", substate.TenantFilter{SortRetryDesc: true}},
		{"SortUpdated", substate.TenantFilter{SortUpdatedDesc: true}},
		{"Prefix", substate.TenantFilter{TenantPrefix: "tenant-05"}},
		{"SubStatePrefix", substate.TenantFilter{SubState: failed, TenantPrefix: "tenant-09"}},
		{"Provider", substate.TenantFilter{Provider: substate.ProviderRestate}},
		{"ProviderSortUpdated", substate.TenantFilter{Provider: substate.ProviderRestate, SortUpdatedDesc: true}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tc.f.Limit = 50
			b.ReportAllocs()
			for b.Loop() {
				page, err := db.Tenants(ctx, tc.f)
				if err != nil || len(page.Tenants) != 50 {
					b.Fatalf("%d tenants, err %v", len(page.Tenants), err)
				}
			}
		})
	}
	b.Run("Counts", func(b *testing.B) {
		for b.Loop() {
			n, err := db.Counts(ctx)
			if err != nil || n[running] != tenants/6+1 {
				b.Fatalf("counts %v, err %v", n, err)
			}
		}
	})
}
