package state_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

// reversePopulation applies n tenants with many ties in every order: three
// providers, retry counts 0 to 4, two error templates, two workflow types,
// a step on some, three event times
// (so equal updatedAt and equal time in sub-state), and after an hour the
// tenants past their deadline stuck. It returns a fingerprint they share.
func reversePopulation(t *testing.T, n int) (*state.DB, string) {
	t.Helper()
	db, c := deadlineDB(t)
	s := newStream(t, db)
	providers := []substate.Provider{substate.ProviderEngine, substate.ProviderRestate, substate.ProviderStepFunctions}
	var evs []substate.EventData
	for i := range n {
		st := substate.SubStates[i%len(substate.SubStates)]
		opts := []evOpt{provider(providers[i%3]), at(t0.Add(time.Duration(i%3) * time.Minute))}
		if st != succeeded {
			opts = append(opts, retries((i*7)%5))
		}
		if st == errored || st == backingOff || st == failed {
			tmpl := []string{"timeout after", "quota exceeded:"}[i%2]
			opts = append(opts, failure(fmt.Sprintf("%s %d", tmpl, i)), func(e *substate.EventData) { e.ErrorFingerprint = "x/TaskFailed/" + tmpl + " <n>" })
		}
		if i%4 == 0 {
			opts = append(opts, workflow("billing"))
		}
		if i%5 == 0 {
			opts = append(opts, step("charge"))
		}
		evs = append(evs, ev(tenantID(i), "x", st, 1, opts...))
	}
	s.apply(evs...)
	c.now = t0.Add(time.Hour)
	if len(expire(t, db)) == 0 {
		t.Fatal("no tenant became stuck")
	}
	fp := mustTenant(t, db, tenantID(3)).WorkflowErrorFingerprint
	if fp == "" {
		t.Fatal("no fingerprint")
	}
	return db, fp
}

// walk pages through f, limit a page, and returns every tenant; unlike
// pageAll it accepts short pages (a page cut by the scan limit).
func walk(tb testing.TB, db *state.DB, f substate.TenantFilter, limit int) []string {
	tb.Helper()
	var all []string
	f.Limit = limit
	for pages := 0; ; pages++ {
		page, err := db.Tenants(context.Background(), f)
		if err != nil {
			tb.Fatalf("%+v, page %d: %v", f, pages, err)
		}
		all = append(all, ids(page.Tenants)...)
		if page.NextPageToken == "" {
			return all
		}
		if page.NextPageToken == f.PageToken || pages > 10000 {
			tb.Fatalf("page %d: the page token does not advance", pages)
		}
		f.PageToken = page.NextPageToken
	}
}

// reversed returns a reversed copy of s.
func reversed(s []string) []string {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

// TestTenantsReverse: every listing order read with Reverse is exactly
// the forward order reversed, ties included, with filters the index
// serves and filters it checks, across pages of any size.
func TestTenantsReverse(t *testing.T) {
	db, fp := reversePopulation(t, 150)
	for _, tc := range []struct {
		name string
		f    substate.TenantFilter
	}{
		{"All", substate.TenantFilter{}},
		{"TenantPrefix", substate.TenantFilter{TenantPrefix: "tenant-000"}},
		{"SubState", substate.TenantFilter{SubState: backingOff}},
		{"SubStatePrefixProvider", substate.TenantFilter{SubState: failed, TenantPrefix: "tenant-001", Provider: substate.ProviderStepFunctions}},
		{"Verb", substate.TenantFilter{Verb: substate.VerbFailed}},
		{"HasError", substate.TenantFilter{HasError: true}},
		{"HasErrorProvider", substate.TenantFilter{HasError: true, Provider: substate.ProviderEngine}},
		{"MinRetryCount", substate.TenantFilter{MinRetryCount: 2}},
		{"SortRetryDesc", substate.TenantFilter{SortRetryDesc: true}},
		{"SortRetryDescMin", substate.TenantFilter{SortRetryDesc: true, MinRetryCount: 2}},
		{"SortRetryDescSubState", substate.TenantFilter{SortRetryDesc: true, SubState: errored}},
		{"SortUpdatedDesc", substate.TenantFilter{SortUpdatedDesc: true}},
		{"SortUpdatedDescProvider", substate.TenantFilter{SortUpdatedDesc: true, Provider: substate.ProviderStepFunctions}},
		{"Fingerprint", substate.TenantFilter{Fingerprint: fp}},
		{"FingerprintSubState", substate.TenantFilter{Fingerprint: fp, SubState: errored}},
		{"FingerprintSubStateProvider", substate.TenantFilter{Fingerprint: fp, SubState: failed, Provider: substate.ProviderStepFunctions}},
		{"Step", substate.TenantFilter{Step: "charge"}},
		{"WorkflowTypeSubState", substate.TenantFilter{WorkflowType: "billing", SubState: running}},
		{"WorkflowTypeSortUpdatedDesc", substate.TenantFilter{WorkflowType: "billing", SortUpdatedDesc: true}},
		{"Stuck", substate.TenantFilter{Stuck: true}},
		{"StuckProvider", substate.TenantFilter{Stuck: true, Provider: substate.ProviderEngine}},
		{"StuckSortRetryDesc", substate.TenantFilter{Stuck: true, SortRetryDesc: true}},
		{"InStateLongerThan", substate.TenantFilter{InStateLongerThan: 59 * time.Minute}},
		{"NoMatch", substate.TenantFilter{SubState: succeeded, HasError: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forward := walk(t, db, tc.f, 1000)
			if len(forward) < 2 && tc.name != "NoMatch" {
				t.Fatalf("the filter matches %d tenants: too few to tell an order", len(forward))
			}
			rev := tc.f
			rev.Reverse = true
			for _, limit := range []int{1, 4, 1000} {
				if got, want := walk(t, db, rev, limit), reversed(forward); !slices.Equal(got, want) {
					t.Errorf("reverse, limit %d:\n got %v\nwant %v", limit, got, want)
				}
			}
			checkLastPages(t, db, tc.f, forward, 7)
		})
	}
}

// checkLastPages reads the forward order's last two pages of size p the
// way the console does: the remainder from the reverse order, then a full
// page after its token.
func checkLastPages(t *testing.T, db *state.DB, f substate.TenantFilter, forward []string, p int) {
	t.Helper()
	n := len(forward)
	if n <= p {
		return
	}
	r := n - (n+p-1)/p*p + p // what the last page holds
	f.Reverse, f.Limit = true, r
	last, err := db.Tenants(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := reversed(ids(last.Tenants)), forward[n-r:]; !slices.Equal(got, want) {
		t.Fatalf("last page: got %v, want %v", got, want)
	}
	f.Limit, f.PageToken = p, last.NextPageToken
	before, err := db.Tenants(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := reversed(ids(before.Tenants)), forward[n-r-p:n-r]; !slices.Equal(got, want) {
		t.Fatalf("the page before the last: got %v, want %v", got, want)
	}
}

// TestTenantsReverseScanLimit: pages cut short by the scan limit resume
// where they stopped in either direction.
func TestTenantsReverseScanLimit(t *testing.T) {
	db, _ := reversePopulation(t, 90)
	db.ScanLimit = 5
	f := substate.TenantFilter{Provider: substate.ProviderRestate, SortUpdatedDesc: true}
	forward := walk(t, db, f, 3)
	if len(forward) != 30 {
		t.Fatalf("forward: %d tenants, want 30", len(forward))
	}
	f.Reverse = true
	if got := walk(t, db, f, 3); !slices.Equal(got, reversed(forward)) {
		t.Errorf("reverse:\n got %v\nwant %v", got, reversed(forward))
	}
}

// TestTenantsReverseToken: a page token is valid only for the direction
// that issued it.
func TestTenantsReverseToken(t *testing.T) {
	ctx := context.Background()
	db, fp := reversePopulation(t, 60)
	for _, f := range []substate.TenantFilter{
		{}, {SubState: running}, {SortRetryDesc: true}, {SortUpdatedDesc: true}, {MinRetryCount: 1}, {Fingerprint: fp}, {Stuck: true}, {Step: "charge"},
	} {
		for _, reverse := range []bool{false, true} {
			f.Reverse, f.Limit, f.PageToken = reverse, 2, ""
			page, err := db.Tenants(ctx, f)
			if err != nil || page.NextPageToken == "" {
				t.Fatalf("%+v: %v, token %q", f, err, page.NextPageToken)
			}
			f.Reverse, f.PageToken = !reverse, page.NextPageToken
			if _, err := db.Tenants(ctx, f); substate.ErrorCode(err) != substate.EINVALID {
				t.Errorf("%+v: a token of the other direction answered %v, want EINVALID", f, err)
			}
		}
	}
}
