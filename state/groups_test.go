package state_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

// faultPopulation applies a population with a realistic spread of faults
// to db over several batches — tenants move between sub-states, faults,
// steps and workflows, newer executions replace older ones, some events
// change nothing and stay pending — and returns every view.
func faultPopulation(tb testing.TB, db *state.DB, c *clock, n int, seed uint64) []substate.TenantView {
	tb.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	s := newStream(tb, db)
	revs := make([]substate.Revision, n)
	for round := range 4 {
		var batch []substate.EventData
		for i := range n {
			if round > 0 && r.IntN(3) == 0 {
				continue
			}
			revs[i]++
			batch = append(batch, faultEvent(r, i, revs[i], round))
		}
		c.now = c.now.Add(time.Hour)
		for len(batch) > 0 {
			k := min(len(batch), 1+r.IntN(50))
			s.apply(batch[:k]...)
			batch = batch[k:]
		}
	}
	// events that change nothing, held in memory by a high PendingLimit
	for i := range n / 10 {
		v := mustTenant(tb, db, tenantID(i))
		e := ev(v.TenantID, v.WorkflowExecutionID, v.WorkflowSubState, revs[i]+1, provider(v.Provider), native("moved"),
			workflow(""), verb(v.WorkflowVerb), at(v.LastEventAt.Add(time.Second)))
		if v.WorkflowExecutionID == "" {
			continue // succeeded: its execution is hidden
		}
		e.RetryCount, e.RetryCountKnown = v.WorkflowRetryCount, true
		s.apply(e)
	}
	return pageShort(tb, db, substate.TenantFilter{}, 1000)
}

// faultEvent is the event of round for tenant i: a long tail of faults
// over providers, sub-states, steps and workflows.
func faultEvent(r *rand.Rand, i int, rev substate.Revision, round int) substate.EventData {
	p := []substate.Provider{substate.ProviderEngine, substate.ProviderStepFunctions, substate.ProviderRestate}[r.IntN(3)]
	exec := fmt.Sprintf("x%d", i%3+round/3) // a newer execution now and then
	opts := []evOpt{provider(p), workflow([]string{"provision", "billing", "refund", ""}[r.IntN(4)]),
		at(t0.Add(time.Duration(r.IntN(600)) * time.Minute)), started(t0.Add(time.Duration(round/3) * time.Hour))}
	if r.IntN(3) > 0 {
		opts = append(opts, step(fmt.Sprintf("Step%d", r.IntN(5))))
	}
	st := substate.SubStates[r.IntN(len(substate.SubStates))]
	switch st {
	case errored, backingOff, failed:
		f := min(int(r.ExpFloat64()*4), 40) // a few faults hit most, a long tail the rest
		msg := fmt.Sprintf("fault %d", f)
		opts = append(opts, retries(r.IntN(5)), fault(msg, "T", fmt.Sprintf("%s/t/fault %d", p, f)))
		if st == failed && r.IntN(3) == 0 {
			opts = append(opts, verb(substate.VerbCancelled))
		}
	case running:
		opts = append(opts, retries(r.IntN(3)))
	}
	return ev(tenantID(i), exec, st, rev, opts...)
}

// expectGroups is what Groups must answer, computed from every view.
func expectGroups(views []substate.TenantView, q substate.GroupQuery, now time.Time, limit int) substate.GroupPage {
	f := q.Filter
	page := substate.GroupPage{By: q.By, Groups: []substate.Group{}}
	groups := map[string]*substate.Group{}
	var cutoff time.Time
	if f.InStateLongerThan > 0 {
		cutoff = now.Add(-f.InStateLongerThan)
	}
	for _, v := range views {
		if !matches(v, f, cutoff) {
			continue
		}
		page.Total++
		value := q.By.Value(&v)
		if value == "" {
			page.Ungrouped++
			continue
		}
		g := groups[value]
		if g == nil {
			g = &substate.Group{Value: value, FirstSeen: v.WorkflowSubStateSince}
			groups[value] = g
		}
		g.Count++
		if v.WorkflowSubStateSince.Before(g.FirstSeen) {
			g.FirstSeen = v.WorkflowSubStateSince
		}
		if c := v.WorkflowSubStateSince.Compare(g.LastSeen); g.SampleTenantID == "" || c > 0 || c == 0 && v.TenantID > g.SampleTenantID {
			g.LastSeen, g.SampleTenantID = v.WorkflowSubStateSince, v.TenantID
		}
	}
	for _, g := range groups {
		page.Groups = append(page.Groups, *g)
	}
	slices.SortFunc(page.Groups, func(a, b substate.Group) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Value, b.Value))
	})
	page.GroupCount = len(page.Groups)
	page.Groups = page.Groups[:min(limit, len(page.Groups))]
	return page
}

func matches(v substate.TenantView, f substate.TenantFilter, cutoff time.Time) bool {
	return (f.SubState == "" || v.WorkflowSubState == f.SubState) &&
		(!f.HasError || v.WorkflowErrorMessage != "") && v.WorkflowRetryCount >= f.MinRetryCount &&
		(f.Provider == "" || v.Provider == f.Provider) && strings.HasPrefix(v.TenantID, f.TenantPrefix) &&
		(f.Fingerprint == "" || v.WorkflowErrorFingerprint == f.Fingerprint) &&
		(f.Step == "" || v.WorkflowStep == f.Step) && (f.WorkflowType == "" || v.WorkflowType == f.WorkflowType) &&
		(f.Verb == "" || v.WorkflowVerb == f.Verb) &&
		(cutoff.IsZero() || v.WorkflowSubStateSince.Before(cutoff))
}

// groupFilters are filters counters serve whatever the grouping (counters
// true) and filters that need a walk, at least for some groupings (see
// countersServe).
var groupFilters = []struct {
	name     string
	f        substate.TenantFilter
	counters bool
}{
	{"None", substate.TenantFilter{}, true},
	{"SubState", substate.TenantFilter{SubState: failed}, true},
	{"Provider", substate.TenantFilter{Provider: substate.ProviderRestate}, true},
	{"HasError", substate.TenantFilter{HasError: true}, true},
	{"SubStateProviderError", substate.TenantFilter{SubState: backingOff, Provider: substate.ProviderEngine, HasError: true}, true},
	{"Fingerprint", substate.TenantFilter{Fingerprint: "restate/t/fault 0"}, false},
	{"FingerprintSubState", substate.TenantFilter{Fingerprint: "stepfunctions/t/fault 1", SubState: failed}, false},
	{"UnknownFingerprint", substate.TenantFilter{Fingerprint: "engine/t/never"}, false},
	{"Prefix", substate.TenantFilter{TenantPrefix: "tenant-001"}, false},
	{"PrefixSubState", substate.TenantFilter{TenantPrefix: "tenant-00", SubState: errored}, false},
	{"MinRetries", substate.TenantFilter{MinRetryCount: 3}, false},
	{"InStateLongerThan", substate.TenantFilter{InStateLongerThan: 5 * time.Hour}, false},
	{"InStateLongerThanProvider", substate.TenantFilter{InStateLongerThan: 3 * time.Hour, Provider: substate.ProviderStepFunctions}, false},
	{"Verb", substate.TenantFilter{Verb: substate.VerbCancelled}, false},
	{"VerbAndOtherSubState", substate.TenantFilter{Verb: substate.VerbCancelled, SubState: running}, false},
	{"Step", substate.TenantFilter{Step: "Step1"}, false},
	{"StepSubStateProvider", substate.TenantFilter{Step: "Step3", SubState: failed, Provider: substate.ProviderEngine}, false},
	{"UnknownStep", substate.TenantFilter{Step: "Step9"}, false},
	{"WorkflowType", substate.TenantFilter{WorkflowType: "billing"}, false},
	{"WorkflowTypeSubStateError", substate.TenantFilter{WorkflowType: "refund", SubState: backingOff, HasError: true}, false},
	{"UnknownWorkflowType", substate.TenantFilter{WorkflowType: "nothing"}, false},
	{"StepAndWorkflowType", substate.TenantFilter{Step: "Step0", WorkflowType: "provision"}, false},
	{"FingerprintAndStep", substate.TenantFilter{Fingerprint: "engine/t/fault 0", Step: "Step2"}, false},
	{"StepPrefix", substate.TenantFilter{Step: "Step4", TenantPrefix: "tenant-001"}, false},
	{"WorkflowTypeMinRetries", substate.TenantFilter{WorkflowType: "billing", MinRetryCount: 2}, false},
}

// countedByCounters says which queries the counters must answer (no
// tenant read): no condition checked per tenant, and at most one of
// fingerprint, step and workflow type, which is the grouping's field when
// the groups are by one of them.
func countedByCounters(by substate.GroupBy, f substate.TenantFilter) bool {
	if f.TenantPrefix != "" || f.MinRetryCount != 0 || f.InStateLongerThan != 0 || f.Verb != "" || f.Stuck {
		return false
	}
	named := map[substate.GroupBy]bool{substate.GroupByFingerprint: f.Fingerprint != "", substate.GroupByStep: f.Step != "",
		substate.GroupByWorkflowType: f.WorkflowType != ""}
	n := 0
	for _, on := range named {
		if on {
			n++
		}
	}
	base := by == substate.GroupBySubState || by == substate.GroupByProvider
	return n == 0 || n == 1 && (base || named[by])
}

func TestGroups(t *testing.T) {
	c := &clock{now: t0}
	db := openDB(t, func(db *state.DB) { db.Now, db.PendingLimit, db.ScanLimit = c.Now, 1<<20, 50 })
	views := faultPopulation(t, db, c, 400, 1)
	c.now = t0.Add(10 * time.Hour)
	ctx := context.Background()
	for _, by := range substate.GroupBys {
		for _, tc := range groupFilters {
			t.Run(string(by)+"/"+tc.name, func(t *testing.T) {
				for _, limit := range []int{0, 3} {
					q := substate.GroupQuery{By: by, Filter: tc.f, Limit: limit}
					got, err := db.Groups(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					want := expectGroups(views, q, c.now, cmp.Or(limit, state.DefaultLimit))
					counted := countedByCounters(by, tc.f)
					if tc.counters && !counted {
						t.Fatal("the table says counters serve this filter, countedByCounters does not")
					}
					if counted != (got.Scanned == 0) && got.Total > 0 {
						t.Errorf("scanned %d tenants; counters serve this filter: %t", got.Scanned, counted)
					}
					want.Scanned = got.Scanned
					if !equalPages(got, want) {
						t.Errorf("limit %d:\n got  %s\n want %s", limit, describe(got), describe(want))
					}
				}
			})
		}
	}
}

func equalPages(a, b substate.GroupPage) bool {
	return a.By == b.By && a.Total == b.Total && a.Ungrouped == b.Ungrouped && a.GroupCount == b.GroupCount &&
		a.Scanned == b.Scanned && slices.EqualFunc(a.Groups, b.Groups, func(x, y substate.Group) bool {
		return x.Value == y.Value && x.Count == y.Count && x.SampleTenantID == y.SampleTenantID &&
			x.FirstSeen.Equal(y.FirstSeen) && x.LastSeen.Equal(y.LastSeen)
	})
}

func describe(p substate.GroupPage) string {
	var b strings.Builder
	fmt.Fprintf(&b, "total %d, ungrouped %d, %d groups:", p.Total, p.Ungrouped, p.GroupCount)
	for _, g := range p.Groups {
		fmt.Fprintf(&b, " [%q %d %s %s..%s]", g.Value, g.Count, g.SampleTenantID, g.FirstSeen.Format("15:04"), g.LastSeen.Format("15:04"))
	}
	return b.String()
}

func TestGroupsInvalid(t *testing.T) {
	db := openDB(t, func(db *state.DB) { db.GroupScanLimit = 10 })
	population(t, db, 30)
	ctx := context.Background()
	for _, q := range []substate.GroupQuery{
		{By: "color"},
		{By: substate.GroupBySubState, Limit: -1},
		{By: substate.GroupBySubState, Filter: substate.TenantFilter{SubState: "paused"}},
		{By: substate.GroupBySubState, Filter: substate.TenantFilter{Verb: "retried"}},
		{By: substate.GroupBySubState, Filter: substate.TenantFilter{InStateLongerThan: -time.Second}},
		{By: substate.GroupBySubState, Filter: substate.TenantFilter{PageToken: "x"}},
		{By: substate.GroupBySubState, Filter: substate.TenantFilter{SortRetryDesc: true}},
		{By: substate.GroupByStep, Filter: substate.TenantFilter{Fingerprint: strings.Repeat("x", 201)}},
		{By: substate.GroupByStep, Filter: substate.TenantFilter{Step: strings.Repeat("x", 257)}},
		{By: substate.GroupByStep, Filter: substate.TenantFilter{WorkflowType: strings.Repeat("x", 257)}},
		{By: substate.GroupByStep, Filter: substate.TenantFilter{MinRetryCount: 1}}, // reads more than 10
	} {
		if _, err := db.Groups(ctx, q); substate.ErrorCode(err) != substate.EINVALID {
			t.Errorf("%+v: err %v, want EINVALID", q, err)
		}
	}
	if _, err := db.Groups(ctx, substate.GroupQuery{By: substate.GroupByStep, Filter: substate.TenantFilter{SubState: failed, MinRetryCount: 1}}); err != nil {
		t.Errorf("a walk within the limit: %v", err)
	}
}

// TestTenantsNewFilters checks the fingerprint, step, workflow type, verb
// and time-in-state filters of the listing against every view, paging with short scans.
func TestTenantsNewFilters(t *testing.T) {
	c := &clock{now: t0}
	db := openDB(t, func(db *state.DB) { db.Now, db.PendingLimit, db.ScanLimit = c.Now, 1<<20, 13 })
	views := faultPopulation(t, db, c, 300, 2)
	c.now = t0.Add(10 * time.Hour)
	byID := func(a, b substate.TenantView) int { return strings.Compare(a.TenantID, b.TenantID) }
	for _, tc := range []substate.TenantFilter{
		{Fingerprint: "engine/t/fault 0"},
		{Fingerprint: "engine/t/fault 0", SubState: backingOff},
		{Fingerprint: "restate/t/fault 1", SubState: failed, Provider: substate.ProviderRestate},
		{Fingerprint: "stepfunctions/t/fault 2", TenantPrefix: "tenant-001", InStateLongerThan: time.Hour},
		{Fingerprint: "engine/t/none"},
		{Step: "Step1"},
		{Step: "Step2", SubState: failed},
		{Step: "Step0", SubState: errored, Provider: substate.ProviderStepFunctions, HasError: true},
		{Step: "Step9"},
		{WorkflowType: "billing"},
		{WorkflowType: "refund", SubState: running, MinRetryCount: 1},
		{WorkflowType: "provision", Step: "Step3"},
		{WorkflowType: "provision", Fingerprint: "engine/t/fault 0"},
		{WorkflowType: "none"},
		{Verb: substate.VerbCancelled},
		{Verb: substate.VerbFailed, Provider: substate.ProviderEngine},
		{InStateLongerThan: 6 * time.Hour},
		{InStateLongerThan: 2 * time.Hour, SubState: running, TenantPrefix: "tenant-002"},
	} {
		t.Run(fmt.Sprintf("%+v", tc), func(t *testing.T) {
			var want []substate.TenantView
			for _, v := range views {
				if matches(v, tc, c.now.Add(-tc.InStateLongerThan)) {
					want = append(want, v)
				}
			}
			got := pageShort(t, db, tc, 7)
			slices.SortFunc(got, byID)
			slices.SortFunc(want, byID)
			if !slices.Equal(ids(got), ids(want)) {
				t.Errorf("got %d tenants %v\nwant %d %v", len(got), head(ids(got)), len(want), head(ids(want)))
			}
		})
	}
}

// TestGroupsSeePending checks that the counters and a walk agree with
// Tenant while unchanged events wait in memory, and after they are
// written.
func TestGroupsSeePending(t *testing.T) {
	c := &clock{now: t0}
	db := openDB(t, func(db *state.DB) { db.Now, db.PendingLimit = c.Now, 1<<20 })
	views := faultPopulation(t, db, c, 120, 3)
	if db.Stats().Pending == 0 {
		t.Fatal("no pending tenants: the test tests nothing")
	}
	check := func(when string) {
		for _, f := range []substate.TenantFilter{{}, {TenantPrefix: "tenant-0000"}} {
			q := substate.GroupQuery{By: substate.GroupByFingerprint, Filter: f}
			got, err := db.Groups(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			want := expectGroups(views, q, c.now, state.DefaultLimit)
			want.Scanned = got.Scanned
			if !equalPages(got, want) {
				t.Errorf("%s, %+v:\n got  %s\n want %s", when, f, describe(got), describe(want))
			}
		}
	}
	check("pending")
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	check("written")
}

// TestGroupsWhileApplying runs walks and counter queries while batches
// commit (under -race, the check that a walk reads its own snapshot).
func TestGroupsWhileApplying(t *testing.T) {
	c := &clock{now: t0}
	db := openDB(t, func(db *state.DB) { db.Now, db.PendingLimit = c.Now, 64 })
	faultPopulation(t, db, c, 200, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			for _, q := range []substate.GroupQuery{{By: substate.GroupByStep, Filter: substate.TenantFilter{MinRetryCount: 1}},
				{By: substate.GroupByFingerprint}} {
				page, err := db.Groups(ctx, q)
				if err != nil && ctx.Err() == nil {
					done <- err
					return
				}
				var n int64
				for _, g := range page.Groups {
					n += g.Count
				}
				if err == nil && n+page.Ungrouped > page.Total {
					done <- fmt.Errorf("%d in groups and %d ungrouped of %d", n, page.Ungrouped, page.Total)
					return
				}
			}
		}
		done <- nil
	}()
	s := newStream(t, db)
	s.seq = 1 << 20
	r := rand.New(rand.NewPCG(9, 9))
	for round := range 20 {
		var batch []substate.EventData
		for i := range 50 {
			batch = append(batch, faultEvent(r, (round*50+i)%200, substate.Revision(100+round), round))
		}
		s.apply(batch...)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
