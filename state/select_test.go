package state_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/substatehq/substate"
)

// TestSelect: a selection holds exactly the tenants a listing of the same
// filter pages through, in tenant-id order, with the applied sequence
// (unchanged events held in memory included) as its position; a set
// larger than the bound is refused, never cut.
func TestSelect(t *testing.T) {
	db := openDB(t)
	s := newStream(t, db)
	for i := range 40 {
		id := fmt.Sprintf("t%02d", i)
		st, opts := substate.StateRunning, []evOpt{}
		if i%3 == 0 {
			fp := fmt.Sprintf("engine/TaskFailed/payment provider returned http %d", 500+i%2)
			st, opts = substate.StateFailed, []evOpt{failure(fmt.Sprintf("payment provider returned HTTP %d", 500+i%2)),
				func(e *substate.EventData) { e.ErrorFingerprint = fp }}
		}
		if i%4 == 0 {
			opts = append(opts, provider(substate.ProviderRestate))
		}
		s.apply(ev(id, "x-"+id, st, 1, opts...))
	}
	s.apply(ev("t00", "x-t00", substate.StateFailed, 2, failure("payment provider returned HTTP 500"), // unchanged, held in memory
		func(e *substate.EventData) {
			e.ErrorFingerprint = "engine/TaskFailed/payment provider returned http 500"
		}))
	ctx := context.Background()
	cases := []substate.TenantFilter{
		{}, {SubState: substate.StateFailed}, {Provider: substate.ProviderRestate, SubState: substate.StateFailed},
		{TenantPrefix: "t1"}, {HasError: true, TenantPrefix: "t2"}, {Fingerprint: "no/such/fingerprint"},
	}
	for _, f := range cases {
		t.Run(fmt.Sprintf("%+v", f), func(t *testing.T) {
			sel, err := db.Select(ctx, f, 1000)
			if err != nil {
				t.Fatal(err)
			}
			var got, want []string
			for _, v := range sel.Tenants {
				got = append(got, v.TenantID)
			}
			f.Limit = 7
			for {
				page, err := db.Tenants(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range page.Tenants {
					want = append(want, v.TenantID)
				}
				if f.PageToken = page.NextPageToken; f.PageToken == "" {
					break
				}
			}
			slices.Sort(want)
			if !slices.Equal(got, want) || sel.Position != 41 {
				t.Errorf("selected %v at %d\nlisted %v at 41", got, sel.Position, want)
			}
		})
	}
	t.Run("Fingerprint", func(t *testing.T) {
		all, _ := db.Select(ctx, substate.TenantFilter{SubState: substate.StateFailed}, 1000)
		fp := all.Tenants[0].WorkflowErrorFingerprint
		sel, err := db.Select(ctx, substate.TenantFilter{Fingerprint: fp}, 1000)
		if err != nil || fp == "" || len(sel.Tenants) == 0 || len(sel.Tenants) == len(all.Tenants) {
			t.Fatalf("fingerprint %q selected %d of %d failed: %v", fp, len(sel.Tenants), len(all.Tenants), err)
		}
	})
	t.Run("TooMany", func(t *testing.T) {
		if _, err := db.Select(ctx, substate.TenantFilter{}, 39); substate.ErrorCode(err) != substate.EINVALID {
			t.Errorf("40 tenants selected under a bound of 39: %v", err)
		}
	})
}
