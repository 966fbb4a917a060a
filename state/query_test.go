package state_test

import (
	"cmp"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

// population applies n generated tenants (a few of every sub-state, retry
// counts 0 to 9, errors on the failing ones) and returns their views.
func population(tb testing.TB, db *state.DB, n int) []substate.TenantView {
	tb.Helper()
	s := newStream(tb, db)
	var evs []substate.EventData
	for i := range n {
		st := substate.SubStates[i%len(substate.SubStates)]
		var opts []evOpt
		if st != succeeded {
			opts = append(opts, retries((i*7)%10))
		}
		if st == errored || st == backingOff || st == failed {
			opts = append(opts, failure("boom "+tenantID(i)))
		}
		evs = append(evs, ev(tenantID(i), "x", st, 1, opts...))
	}
	s.apply(evs...)
	views := make([]substate.TenantView, n)
	for i := range n {
		views[i] = mustTenant(tb, db, tenantID(i))
	}
	return views
}

// expect filters and orders views the way Tenants documents it.
func expect(views []substate.TenantView, f substate.TenantFilter) []substate.TenantView {
	var out []substate.TenantView
	for _, v := range views {
		if (f.SubState == "" || v.WorkflowSubState == f.SubState) &&
			(!f.HasError || v.WorkflowErrorMessage != "") && v.WorkflowRetryCount >= f.MinRetryCount {
			out = append(out, v)
		}
	}
	byRetry := func(a, b substate.TenantView) int {
		return cmp.Or(cmp.Compare(a.WorkflowRetryCount, b.WorkflowRetryCount), strings.Compare(a.TenantID, b.TenantID))
	}
	switch {
	case f.SortRetryDesc:
		slices.SortFunc(out, func(a, b substate.TenantView) int { return byRetry(b, a) })
	case f.SubState == "" && !f.HasError && f.MinRetryCount > 0:
		slices.SortFunc(out, byRetry)
	default:
		slices.SortFunc(out, func(a, b substate.TenantView) int { return strings.Compare(a.TenantID, b.TenantID) })
	}
	return out
}

// pageAll pages through f with page size limit and returns every tenant.
func pageAll(tb testing.TB, db *state.DB, f substate.TenantFilter, limit int) []substate.TenantView {
	tb.Helper()
	var all []substate.TenantView
	f.Limit = limit
	for pages := 0; ; pages++ {
		page, err := db.Tenants(context.Background(), f)
		if err != nil {
			tb.Fatalf("page %d: %v", pages, err)
		}
		if len(page.Tenants) > limit || (page.NextPageToken != "" && len(page.Tenants) != limit) {
			tb.Fatalf("page %d has %d tenants (limit %d, next %q)", pages, len(page.Tenants), limit, page.NextPageToken)
		}
		all = append(all, page.Tenants...)
		if page.NextPageToken == "" {
			return all
		}
		if page.NextPageToken == f.PageToken || pages > 10000 {
			tb.Fatalf("page %d: the page token does not advance", pages)
		}
		f.PageToken = page.NextPageToken
	}
}

func ids(views []substate.TenantView) []string {
	out := make([]string, len(views))
	for i, v := range views {
		out[i] = v.TenantID
	}
	return out
}

var filters = []struct {
	name string
	f    substate.TenantFilter
}{
	{"All", substate.TenantFilter{}},
	{"SubState", substate.TenantFilter{SubState: backingOff}},
	{"HasError", substate.TenantFilter{HasError: true}},
	{"MinRetryCount", substate.TenantFilter{MinRetryCount: 6}},
	{"SortRetryDesc", substate.TenantFilter{SortRetryDesc: true}},
	{"SortRetryDescMin", substate.TenantFilter{SortRetryDesc: true, MinRetryCount: 4}},
	{"SubStateHasErrorMin", substate.TenantFilter{SubState: failed, HasError: true, MinRetryCount: 3}},
	{"SortRetryDescSubState", substate.TenantFilter{SortRetryDesc: true, SubState: errored}},
	{"HasErrorMin", substate.TenantFilter{HasError: true, MinRetryCount: 8}},
	{"NoMatch", substate.TenantFilter{SubState: succeeded, HasError: true}},
}

func TestTenants(t *testing.T) {
	db := openDB(t, func(db *state.DB) { db.MaxLimit = 500 })
	views := population(t, db, 240)
	for _, tc := range filters {
		t.Run(tc.name, func(t *testing.T) {
			want := ids(expect(views, tc.f))
			for _, limit := range []int{1, 7, 500} {
				if got := ids(pageAll(t, db, tc.f, limit)); !slices.Equal(got, want) {
					t.Errorf("limit %d: got %d tenants %v…, want %d %v…", limit, len(got), head(got), len(want), head(want))
				}
			}
		})
	}
}

func head(s []string) []string { return s[:min(len(s), 5)] }

func TestTenantsResultsCarryErrorMessages(t *testing.T) {
	db := openDB(t)
	population(t, db, 12)
	page, err := db.Tenants(context.Background(), substate.TenantFilter{HasError: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range page.Tenants {
		if v.WorkflowErrorMessage != "boom "+v.TenantID {
			t.Errorf("%s: error message %q", v.TenantID, v.WorkflowErrorMessage)
		}
	}
}

func TestTenantsLimit(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, func(db *state.DB) { db.DefaultLimit, db.MaxLimit = 5, 8 })
	population(t, db, 20)
	for _, tc := range []struct{ limit, want int }{{0, 5}, {3, 3}, {8, 8}, {9, 8}, {1000, 8}} {
		page, err := db.Tenants(ctx, substate.TenantFilter{Limit: tc.limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Tenants) != tc.want || page.NextPageToken == "" {
			t.Errorf("limit %d: %d tenants, next %q; want %d and a next page", tc.limit, len(page.Tenants), page.NextPageToken, tc.want)
		}
	}
	page, err := db.Tenants(ctx, substate.TenantFilter{Limit: 8, SubState: running})
	if err != nil || len(page.Tenants) != 4 || page.NextPageToken != "" {
		t.Errorf("last page: %d tenants, next %q, err %v; want 4 and no token", len(page.Tenants), page.NextPageToken, err)
	}
}

func TestTenantsInvalid(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	population(t, db, 30)
	first, err := db.Tenants(ctx, substate.TenantFilter{SubState: running, Limit: 2})
	if err != nil || first.NextPageToken == "" {
		t.Fatalf("first page: %v, token %q", err, first.NextPageToken)
	}
	for _, tc := range []struct {
		name string
		f    substate.TenantFilter
	}{
		{"NegativeLimit", substate.TenantFilter{Limit: -1}},
		{"NegativeMinRetryCount", substate.TenantFilter{MinRetryCount: -1}},
		{"UnknownSubState", substate.TenantFilter{SubState: "sleeping"}},
		{"GarbageToken", substate.TenantFilter{PageToken: "%%%"}},
		{"ShortToken", substate.TenantFilter{PageToken: "AQE"}},
		{"TokenOfAnotherFilter", substate.TenantFilter{SubState: waiting, PageToken: first.NextPageToken}},
		{"TokenOfAnotherIndex", substate.TenantFilter{HasError: true, PageToken: first.NextPageToken}},
		{"TokenOfAnotherVersion", substate.TenantFilter{SubState: running, PageToken: "Ag" + first.NextPageToken[2:]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := db.Tenants(ctx, tc.f)
			if got := substate.ErrorCode(err); got != substate.EINVALID {
				t.Errorf("error %v (code %q), want EINVALID", err, got)
			}
		})
	}
}

func TestTenant(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	s := newStream(t, db)
	s.apply(ev("a.b c*>", "x", running, 1)) // not a subject token: stored as is
	if got := mustTenant(t, db, "a.b c*>"); got.WorkflowSubState != running {
		t.Errorf("view = %+v", got)
	}
	_, err := db.Tenant(ctx, "nobody")
	if got := substate.ErrorCode(err); got != substate.ENOTFOUND {
		t.Errorf("unknown tenant: %v (code %q), want ENOTFOUND", err, got)
	}
}

// TestLastExecution: the execution a tenant's view follows is named also
// after it succeeded, when the public view clears its id.
func TestLastExecution(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	s := newStream(t, db)
	s.apply(ev("t1", "x1", running, 1))
	s.apply(ev("t1", "x1", substate.StateSucceeded, 2))
	if v := mustTenant(t, db, "t1"); v.WorkflowExecutionID != "" {
		t.Fatalf("view of a succeeded execution = %+v, want no execution id", v)
	}
	if got, err := db.LastExecution(ctx, "t1"); err != nil || got != "x1" {
		t.Fatalf("last execution = %q, %v; want x1", got, err)
	}
	if _, err := db.LastExecution(ctx, "nobody"); substate.ErrorCode(err) != substate.ENOTFOUND {
		t.Fatalf("unknown tenant: %v, want ENOTFOUND", err)
	}
}

func TestActive(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	s := newStream(t, db)
	at := func(d time.Duration) evOpt { return func(e *substate.EventData) { e.OccurredAt = t0.Add(d) } }
	s.apply(
		ev("old-running", "x", running, 1, at(-time.Hour)),
		ev("old-waiting", "x", waiting, 1, at(-time.Hour)),
		ev("old-error", "x", errored, 1, at(-time.Hour), failure("x")),
		ev("old-failed", "x", failed, 1, at(-time.Hour), failure("x")),
		ev("old-succeeded", "x", succeeded, 1, at(-time.Hour)),
		ev("new-running", "x", running, 1, at(0)),
		ev("moved-on", "x", backingOff, 1, at(-time.Hour), failure("x")),
	)
	// An unchanged event moves lastEventAt without a commit; Active sees it.
	s.apply(ev("moved-on", "x", backingOff, 2, at(0), failure("x")))

	var got []string
	for v, err := range db.Active(ctx, t0.Add(-time.Minute)) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v.TenantID)
	}
	want := []string{"old-running", "old-waiting", "old-error"} // by sub-state, then id
	if !slices.Equal(got, want) {
		t.Errorf("active = %v, want %v", got, want)
	}
}

func TestActiveManyChunks(t *testing.T) {
	db := openDB(t)
	s := newStream(t, db)
	var evs []substate.EventData
	for i := range 700 {
		evs = append(evs, ev(tenantID(i), "x", substate.SubStates[i%4], 1))
	}
	s.apply(evs...)
	n := 0
	for _, err := range db.Active(context.Background(), t0.Add(time.Hour)) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 600 {
			break // stopping early is allowed
		}
	}
	if n != 600 {
		t.Errorf("yielded %d tenants before the break, want 600", n)
	}
	n = 0
	for range db.Active(context.Background(), t0.Add(time.Hour)) {
		n++
	}
	if n != 700 {
		t.Errorf("yielded %d tenants, want 700", n)
	}
}

// TestTenantsReadOnlyTheirIndex shows that a filtered listing reads the
// records its index names and no others: one record of a tenant that
// matches no filter is made undecodable, which every filtered listing
// survives and a listing of every tenant reports.
func TestTenantsReadOnlyTheirIndex(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "view.db")
	db := state.NewDB(path)
	if err := db.Open(); err != nil {
		t.Fatal(err)
	}
	evs := []substate.EventData{ev("looping", "a", backingOff, 1, retries(3), failure("throttled"))}
	for i := range 50 {
		evs = append(evs, ev(tenantID(i), "a", running, 1))
	}
	newStream(t, db).apply(evs...)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	corrupt(t, path, tenantID(7))
	if err := db.Open(); err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	for _, tc := range []struct {
		name string
		f    substate.TenantFilter
	}{
		{"SubState", substate.TenantFilter{SubState: backingOff}},
		{"HasError", substate.TenantFilter{HasError: true}},
		{"MinRetryCount", substate.TenantFilter{MinRetryCount: 1}},
		{"SortRetryDesc", substate.TenantFilter{SortRetryDesc: true, MinRetryCount: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, err := db.Tenants(ctx, tc.f)
			if err != nil {
				t.Fatalf("read a record outside its index: %v", err)
			}
			if got := ids(page.Tenants); !slices.Equal(got, []string{"looping"}) {
				t.Errorf("tenants = %v, want [looping]", got)
			}
		})
	}
	if _, err := db.Tenants(ctx, substate.TenantFilter{Limit: 100}); err == nil {
		t.Error("listing every tenant read past the undecodable record")
	}
}

// corrupt replaces the stored record of tenant id in the closed view file
// at path with bytes no record version decodes.
func corrupt(tb testing.TB, path, id string) {
	tb.Helper()
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	err = b.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("tenants")).Put([]byte(id), []byte{0xff, 0xff})
	})
	if err != nil {
		tb.Fatal(err)
	}
}
