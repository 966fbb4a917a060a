package httpapi_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
)

// Paging a scoped listing with any page size yields every tenant under the
// prefix once, and no other.
func TestScopedViewsPaging(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var ids []string
	for i := range 300 {
		ids = append(ids, fmt.Sprintf("%c%c-%03d", 'a'+rng.IntN(3), 'a'+rng.IntN(3), i))
	}
	db := openView(t, ids...)
	ctx := context.Background()
	for _, prefix := range []string{"a", "ab", "cc-", "b", "zz", "ab-007"} {
		for _, limit := range []int{0, 1, 2, 7, 100, 5000} {
			for _, f := range []substate.TenantFilter{{}, {HasError: true}, {SubState: substate.StateRunning}} {
				f.Limit = limit
				var got []string
				views := httpapi.ScopedViews(db, prefix)
				for pages := 0; ; pages++ {
					page, err := views.Tenants(ctx, f)
					if err != nil {
						t.Fatalf("prefix %q limit %d: %v", prefix, limit, err)
					}
					if n := max(limit, 0); n > 0 && len(page.Tenants) > n {
						t.Fatalf("prefix %q: a page of %d, limit %d", prefix, len(page.Tenants), limit)
					}
					for _, v := range page.Tenants {
						got = append(got, v.TenantID)
					}
					if page.NextPageToken == "" || pages > 400 {
						break
					}
					f.PageToken = page.NextPageToken
				}
				f.PageToken = ""
				want := expectIDs(t, db, prefix, f)
				slices.Sort(got)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("prefix %q limit %d filter %+v:\n got %v\nwant %v", prefix, limit, f, got, want)
				}
			}
		}
	}
	t.Run("ErrForeignToken", func(t *testing.T) {
		for _, tok := range []string{"AQE", "p1.%%", "p1.e30", "p1.eyJzIjotMSwibCI6MX0"} {
			if _, err := httpapi.ScopedViews(db, "a").Tenants(ctx, substate.TenantFilter{PageToken: tok}); substate.ErrorCode(err) != substate.EINVALID {
				t.Errorf("token %q: %v, want EINVALID", tok, err)
			}
		}
	})
}

// expectIDs lists the whole view with f's filter and keeps the prefix.
func expectIDs(tb testing.TB, db substate.ViewStore, prefix string, f substate.TenantFilter) []string {
	tb.Helper()
	f.Limit, f.PageToken = 1000, ""
	var out []string
	for {
		page, err := db.Tenants(context.Background(), f)
		if err != nil {
			tb.Fatal(err)
		}
		for _, v := range page.Tenants {
			out = append(out, v.TenantID)
		}
		if page.NextPageToken == "" {
			return filterIDs(out, prefix)
		}
		f.PageToken = page.NextPageToken
	}
}
