package state_test

import (
	"context"
	"errors"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

func TestTenantCounts(t *testing.T) {
	ctx := context.Background()
	t.Run("OK", func(t *testing.T) {
		c := &clock{now: t0}
		db := openDB(t, func(db *state.DB) { db.Now, db.PendingLimit = c.Now, 1<<20 })
		empty, err := db.TenantCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(empty), len(substate.SubStates)*len(substate.Providers); got != want {
			t.Fatalf("an empty view: %d counts, want %d (every sub-state and provider)", got, want)
		}
		views := faultPopulation(t, db, c, 400, 3)
		want := map[substate.TenantCount]int64{}
		for _, v := range views {
			want[substate.TenantCount{SubState: v.WorkflowSubState, Provider: v.Provider}]++
		}
		got, err := db.TenantCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for _, c := range got {
			key := substate.TenantCount{SubState: c.SubState, Provider: c.Provider}
			if c.Count != want[key] {
				t.Errorf("%s/%s: %d tenants, want %d", c.Provider, c.SubState, c.Count, want[key])
			}
			total += c.Count
		}
		if total != int64(len(views)) {
			t.Errorf("counted %d tenants, the view holds %d", total, len(views))
		}
	})
	t.Run("ErrClosed", func(t *testing.T) {
		db := openDB(t)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := db.TenantCounts(ctx); !errors.Is(err, state.ErrClosed) {
			t.Errorf("got %v, want ErrClosed", err)
		}
	})
}
