package httpapi_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
)

// FuzzScopedViews checks a tenant-prefix key's view against its
// definition, for any prefix, page size and tenantPrefix of the query:
// paging a listing yields exactly the tenants whose id starts with both
// prefixes, each once, and a single read is refused exactly for the
// tenants outside the key's.
func FuzzScopedViews(f *testing.F) {
	ids := []string{"acme", "acme-1", "acme-2", "acme-10", "acm", "ac", "a", "b", "beta-1", "béta", "ß", "acme.eu *>", "z~1"}
	for i := range 40 {
		ids = append(ids, fmt.Sprintf("t-%02d", i))
	}
	db := openView(f, ids...)
	for _, s := range []string{"", "a", "acme-", "acme-1", "t-0", "t-", "b", "é", "z~", "zz", "\xff"} {
		f.Add(s, uint8(3), false, "")
	}
	for _, q := range []string{"a", "acme-1", "acme-10", "b", "t-1", "zz"} {
		f.Add("acme-", uint8(2), false, q)
	}
	f.Fuzz(func(t *testing.T, prefix string, limit uint8, hasError bool, query string) {
		ctx := context.Background()
		views := httpapi.ScopedViews(db, prefix)
		var want []string
		for _, id := range ids {
			if strings.HasPrefix(id, prefix) && strings.HasPrefix(id, query) {
				want = append(want, id)
			}
			_, err := views.Tenant(ctx, id)
			if strings.HasPrefix(id, prefix) != (err == nil) {
				t.Fatalf("prefix %q, tenant %q: %v", prefix, id, err)
			}
			if err != nil && substate.ErrorCode(err) != substate.EFORBIDDEN {
				t.Fatalf("prefix %q, tenant %q: %v, want forbidden", prefix, id, err)
			}
		}
		fl := substate.TenantFilter{Limit: int(limit), HasError: hasError, TenantPrefix: query}
		if hasError {
			want = filterIDs(expectIDs(t, db, prefix, substate.TenantFilter{HasError: true}), query)
		}
		var got []string
		for pages := 0; ; pages++ {
			page, err := views.Tenants(ctx, fl)
			if err != nil {
				t.Fatal(err)
			}
			if limit > 0 && len(page.Tenants) > int(limit) {
				t.Fatalf("page of %d, limit %d", len(page.Tenants), limit)
			}
			for _, v := range page.Tenants {
				got = append(got, v.TenantID)
			}
			if page.NextPageToken == "" {
				break
			}
			if pages > len(ids) {
				t.Fatalf("prefix %q limit %d: the listing does not end", prefix, limit)
			}
			fl.PageToken = page.NextPageToken
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("prefix %q limit %d hasError %v tenantPrefix %q:\n got %q\nwant %q", prefix, limit, hasError, query, got, want)
		}
	})
}
