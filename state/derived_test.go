package state_test

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

// pageShort pages through f like pageAll, accepting short pages with a
// token: a listing bounded by ScanLimit ends a page early.
func pageShort(tb testing.TB, db *state.DB, f substate.TenantFilter, limit int) []substate.TenantView {
	tb.Helper()
	var all []substate.TenantView
	f.Limit = limit
	for pages := 0; ; pages++ {
		page, err := db.Tenants(context.Background(), f)
		if err != nil {
			tb.Fatalf("page %d: %v", pages, err)
		}
		all = append(all, page.Tenants...)
		if page.NextPageToken == "" {
			return all
		}
		if page.NextPageToken == f.PageToken || pages > 100000 {
			tb.Fatalf("page %d: the page token does not advance", pages)
		}
		f.PageToken = page.NextPageToken
	}
}

// providerOf gives tenant i a provider, so the provider filter has work.
func providerOf(i int) substate.Provider {
	return []substate.Provider{substate.ProviderEngine, substate.ProviderStepFunctions, substate.ProviderRestate}[i%3]
}

func TestTenantsConsoleFilters(t *testing.T) {
	c := &clock{now: t0}
	db := openDB(t, func(db *state.DB) { db.Now, db.ScanLimit = c.Now, 17 })
	s := newStream(t, db)
	var views []substate.TenantView
	for i := range 90 {
		c.now = t0.Add(time.Duration((i*37)%90) * time.Second)
		st := substate.SubStates[i%len(substate.SubStates)]
		e := ev(tenantID(i), "x", st, 1, provider(providerOf(i)), retries(i%4))
		if i%5 == 0 {
			e = ev("acme-"+tenantID(i), "x", st, 1, provider(providerOf(i)), retries(i%4))
		}
		s.apply(e)
		views = append(views, mustTenant(t, db, e.TenantID))
	}
	byUpdated := func(a, b substate.TenantView) int {
		return cmp.Or(b.UpdatedAt.Compare(a.UpdatedAt), strings.Compare(b.TenantID, a.TenantID))
	}
	for _, tc := range []struct {
		name string
		f    substate.TenantFilter
	}{
		{"Provider", substate.TenantFilter{Provider: substate.ProviderRestate}},
		{"Prefix", substate.TenantFilter{TenantPrefix: "acme-"}},
		{"PrefixSubState", substate.TenantFilter{TenantPrefix: "acme-", SubState: running}},
		{"SortUpdated", substate.TenantFilter{SortUpdatedDesc: true}},
		{"SortUpdatedProviderMin", substate.TenantFilter{SortUpdatedDesc: true, Provider: substate.ProviderEngine, MinRetryCount: 2}},
		{"SortRetryPrefix", substate.TenantFilter{SortRetryDesc: true, TenantPrefix: "tenant-0001"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []substate.TenantView
			for _, v := range views {
				if (tc.f.SubState == "" || v.WorkflowSubState == tc.f.SubState) && v.WorkflowRetryCount >= tc.f.MinRetryCount &&
					(tc.f.Provider == "" || v.Provider == tc.f.Provider) && strings.HasPrefix(v.TenantID, tc.f.TenantPrefix) {
					want = append(want, v)
				}
			}
			switch {
			case tc.f.SortUpdatedDesc:
				slices.SortFunc(want, byUpdated)
			case tc.f.SortRetryDesc:
				slices.SortFunc(want, func(a, b substate.TenantView) int {
					return cmp.Or(cmp.Compare(b.WorkflowRetryCount, a.WorkflowRetryCount), strings.Compare(b.TenantID, a.TenantID))
				})
			default:
				slices.SortFunc(want, func(a, b substate.TenantView) int { return strings.Compare(a.TenantID, b.TenantID) })
			}
			for _, limit := range []int{1, 4, 100} {
				if got := ids(pageShort(t, db, tc.f, limit)); !slices.Equal(got, ids(want)) {
					t.Errorf("limit %d: got %v, want %v", limit, got, ids(want))
				}
			}
		})
	}
	t.Run("ErrBothSorts", func(t *testing.T) {
		_, err := db.Tenants(context.Background(), substate.TenantFilter{SortRetryDesc: true, SortUpdatedDesc: true})
		if substate.ErrorCode(err) != substate.EINVALID {
			t.Fatalf("err = %v, want EINVALID", err)
		}
	})
	t.Run("TokenOfAnotherQuery", func(t *testing.T) {
		page, err := db.Tenants(context.Background(), substate.TenantFilter{Provider: substate.ProviderEngine, Limit: 1})
		if err != nil || page.NextPageToken == "" {
			t.Fatalf("page %v, err %v", page, err)
		}
		_, err = db.Tenants(context.Background(), substate.TenantFilter{Provider: substate.ProviderRestate, PageToken: page.NextPageToken})
		if substate.ErrorCode(err) != substate.EINVALID {
			t.Fatalf("err = %v, want EINVALID", err)
		}
	})
}

func TestCounts(t *testing.T) {
	db := openDB(t)
	s := newStream(t, db)
	want := map[substate.SubState]int64{}
	check := func(when string) {
		t.Helper()
		got, err := db.Counts(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range substate.SubStates {
			if got[st] != want[st] {
				t.Errorf("%s: %s = %d, want %d", when, st, got[st], want[st])
			}
		}
	}
	for i := range 30 {
		s.apply(ev(tenantID(i), "x", running, 1))
	}
	want[running] = 30
	check("all running")
	for i := range 10 {
		s.apply(ev(tenantID(i), "x", backingOff, 2, retries(1), failure("boom")))
	}
	for i := range 4 {
		s.apply(ev(tenantID(i), "x", succeeded, 3))
	}
	s.apply(ev(tenantID(29), "x", running, 5)) // unchanged
	want[running], want[backingOff], want[succeeded] = 20, 6, 4
	check("after moves")
	reopen(t, db)
	check("reopened")

	// A file from before the counters and the by-updated index gets them
	// when it is opened.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	stripDerived(t, db.Path)
	if err := db.Open(); err != nil {
		t.Fatal(err)
	}
	check("rebuilt")
	page, err := db.Tenants(context.Background(), substate.TenantFilter{SortUpdatedDesc: true, Limit: 100})
	if err != nil || len(page.Tenants) != 30 {
		t.Fatalf("sorted by update after rebuild: %d tenants, err %v", len(page.Tenants), err)
	}
}

// stripDerived removes the console's index and counters from a closed file.
func stripDerived(t *testing.T, path string) {
	t.Helper()
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket([]byte("by-updated")); err != nil {
			return err
		}
		return tx.Bucket([]byte("meta")).Delete([]byte("counts"))
	})
	if err != nil {
		t.Fatal(err)
	}
}
