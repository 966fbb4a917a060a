package state_test

import (
	"context"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

// testSLOs are the SLOs of the deadline tests: backing-off 10 minutes and
// a 2-hour run for every workflow; provision runs at most 30 minutes in
// running and has no backing-off SLO of its own (0 overrides the default).
func testSLOs(tb testing.TB) *substate.SLOs {
	tb.Helper()
	s, err := substate.NewSLOs(map[string]substate.SLOLimits{
		"*":         {substate.SLOBackingOff: 10 * time.Minute, substate.SLORun: 2 * time.Hour},
		"provision": {substate.SLORunning: 30 * time.Minute, substate.SLOBackingOff: 0},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// deadlineDB opens a view with the test SLOs, the outbox on and a clock
// the test moves.
func deadlineDB(t *testing.T) (*state.DB, *clock) {
	t.Helper()
	c := &clock{now: t0}
	db := openDB(t, func(db *state.DB) { db.Now, db.ChangeOutbox = c.Now, true })
	db.SetSLOs(testSLOs(t))
	if _, err := db.RecomputeDeadlines(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db, c
}

// expire runs ExpireDeadlines and returns the stuck changes.
func expire(t *testing.T, db *state.DB) []substate.Change {
	t.Helper()
	res, more, err := db.ExpireDeadlines(context.Background(), time.Time{}, 0)
	if err != nil || more {
		t.Fatalf("ExpireDeadlines: more %t, %v", more, err)
	}
	return res.Changes
}

func TestDeadlines(t *testing.T) {
	ctx := context.Background()
	t.Run("SetWithTheChange", func(t *testing.T) {
		db, _ := deadlineDB(t)
		s := newStream(t, db)
		cases := []struct {
			name string
			e    substate.EventData
			want time.Time
			slo  substate.SLO
		}{
			{"SubStateEarlier", ev("a", "e1", substate.StateBackingOff, 5, workflow("billing")), t0.Add(5*time.Second + 10*time.Minute), substate.SLOBackingOff},
			{"RunEarlier", ev("b", "e1", substate.StateBackingOff, 1, workflow("billing"), started(t0.Add(-115*time.Minute))), t0.Add(5 * time.Minute), substate.SLORun},
			{"TypeOverrides", ev("c", "e1", substate.StateRunning, 1, workflow("provision")), t0.Add(time.Second + 30*time.Minute), substate.SLORunning},
			{"TypeClearsDefault", ev("d", "e1", substate.StateBackingOff, 1, workflow("provision")), t0.Add(2 * time.Hour), substate.SLORun},
			{"NoSLOForSubState", ev("e", "e1", substate.StateWaiting, 1, workflow("billing"), started(time.Time{})), time.Time{}, ""},
			{"Terminal", ev("f", "e1", substate.StateFailed, 1, workflow("billing")), time.Time{}, ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				res := s.apply(c.e)
				v := mustTenant(t, db, c.e.TenantID)
				if !v.Deadline.Equal(c.want) || v.DeadlineSLO != c.slo || v.Stuck {
					t.Fatalf("deadline %s (%s), stuck %t; want %s (%s)", v.Deadline, v.DeadlineSLO, v.Stuck, c.want, c.slo)
				}
				if got := res.Changes[0].New; !got.Deadline.Equal(c.want) {
					t.Fatalf("the change's new view has deadline %s, want %s", got.Deadline, c.want)
				}
			})
		}
		next, stale := db.NextDeadline()
		if want := t0.Add(5 * time.Minute); !next.Equal(want) || stale {
			t.Fatalf("NextDeadline = %s, stale %t; want %s, not stale", next, stale, want)
		}
	})

	t.Run("UpTo", func(t *testing.T) {
		db, c := deadlineDB(t)
		s := newStream(t, db)
		s.apply(ev("a", "e1", substate.StateBackingOff, 2, workflow("billing"), failure("503")))
		deadline := t0.Add(2*time.Second + 10*time.Minute)
		drain(t, db)
		c.now = deadline.Add(time.Minute)
		cases := []struct {
			name  string
			upTo  time.Time
			stuck int
		}{
			{"BeforeTheDeadline", deadline.Add(-time.Nanosecond), 0},
			{"AtTheDeadline", deadline, 1},
		}
		for _, tc := range cases {
			res, more, err := db.ExpireDeadlines(ctx, tc.upTo, 0)
			if got, want := len(res.Changes), tc.stuck; err != nil || more || got != want {
				t.Fatalf("%s: %d stuck, more %t, %v; want %d", tc.name, got, more, err, want)
			}
		}
		if v := mustTenant(t, db, "a"); !v.StuckSince.Equal(deadline) || !v.UpdatedAt.Equal(c.now) {
			t.Fatalf("view %+v; want stuck since %s, updated at the clock", v, deadline)
		}
	})

	t.Run("StuckThenUnstuck", func(t *testing.T) {
		db, c := deadlineDB(t)
		s := newStream(t, db)
		s.apply(ev("a", "e1", substate.StateRunning, 1, workflow("billing")))
		s.apply(ev("a", "e1", substate.StateBackingOff, 2, workflow("billing"), failure("503")))
		deadline := t0.Add(2*time.Second + 10*time.Minute)
		drain(t, db)

		c.now = deadline.Add(-time.Millisecond)
		if got := expire(t, db); len(got) != 0 {
			t.Fatalf("before the deadline: %d stuck", len(got))
		}
		c.now = deadline
		got := expire(t, db)
		if len(got) != 1 || got[0].Kind != substate.ChangeStuck || got[0].Seq != 2 || got[0].Old.Stuck || !got[0].New.Stuck {
			t.Fatalf("at the deadline: %+v; want one stuck change at sequence 2", got)
		}
		v := mustTenant(t, db, "a")
		if !v.Stuck || !v.StuckSince.Equal(deadline) || !v.UpdatedAt.Equal(deadline) || v.DeadlineSLO != substate.SLOBackingOff {
			t.Fatalf("view %+v; want stuck since %s for backing-off", v, deadline)
		}
		if got := expire(t, db); len(got) != 0 {
			t.Fatalf("expired again: %+v", got)
		}
		if next, _ := db.NextDeadline(); !next.IsZero() {
			t.Fatalf("NextDeadline = %s after the only one passed", next)
		}
		out := pendingKinds(t, db)
		if len(out) != 1 || out[0] != "2.stuck.a" {
			t.Fatalf("outbox = %v, want the stuck message", out)
		}
		drain(t, db)

		// Another retry in backing-off keeps the deadline it missed.
		s.apply(ev("a", "e1", substate.StateBackingOff, 3, workflow("billing"), failure("503"), retries(4)))
		if v := mustTenant(t, db, "a"); !v.Stuck || v.WorkflowRetryCount != 4 {
			t.Fatalf("after a retry: %+v, want still stuck", v)
		}
		if out := pendingKinds(t, db); len(out) != 1 || out[0] != "3" {
			t.Fatalf("outbox = %v, want the retry's change alone", out)
		}
		drain(t, db)

		// Moving on ends it: the change, then unstuck, and a new deadline.
		c.now = deadline.Add(time.Minute)
		s.apply(ev("a", "e1", substate.StateRunning, 4, workflow("billing"), at(c.now)))
		v = mustTenant(t, db, "a")
		if v.Stuck || !v.StuckSince.IsZero() || !v.Deadline.Equal(t0.Add(2*time.Hour)) || v.DeadlineSLO != substate.SLORun {
			t.Fatalf("after moving on: %+v; want not stuck, the run's deadline", v)
		}
		if out := pendingKinds(t, db); len(out) != 2 || out[0] != "4" || out[1] != "4.unstuck.a" {
			t.Fatalf("outbox = %v, want the change and unstuck", out)
		}
		drain(t, db)

		// The end holds no deadline.
		s.apply(ev("a", "e1", substate.StateSucceeded, 5, workflow("billing")))
		if v := mustTenant(t, db, "a"); !v.Deadline.IsZero() || v.Stuck {
			t.Fatalf("succeeded: %+v", v)
		}
	})

	t.Run("LateEventPastItsDeadline", func(t *testing.T) {
		db, c := deadlineDB(t)
		s := newStream(t, db)
		c.now = t0.Add(time.Hour)
		s.apply(ev("a", "e1", substate.StateBackingOff, 1, workflow("billing")))
		if next, _ := db.NextDeadline(); !next.Equal(t0.Add(time.Second + 10*time.Minute)) {
			t.Fatalf("NextDeadline = %s", next)
		}
		if got := expire(t, db); len(got) != 1 {
			t.Fatalf("%d stuck, want the tenant whose deadline had passed when its event came", len(got))
		}
	})

	t.Run("Limit", func(t *testing.T) {
		db, c := deadlineDB(t)
		s := newStream(t, db)
		for i := range 5 {
			s.apply(ev(tenantID(i), "e1", substate.StateBackingOff, substate.Revision(i+1), workflow("billing")))
		}
		c.now = t0.Add(time.Hour)
		res, more, err := db.ExpireDeadlines(ctx, time.Time{}, 3)
		if err != nil || !more || len(res.Changes) != 3 || res.Changes[0].TenantID != tenantID(0) {
			t.Fatalf("limit 3: %d stuck, more %t, %v; want the 3 earliest and more", len(res.Changes), more, err)
		}
		if res, more, err := db.ExpireDeadlines(ctx, time.Time{}, 3); err != nil || more || len(res.Changes) != 2 {
			t.Fatalf("then: %d stuck, more %t, %v; want the last 2", len(res.Changes), more, err)
		}
	})
}

// pendingKinds returns the message ids of the outbox's changes.
func pendingKinds(t *testing.T, db *state.DB) []string {
	t.Helper()
	pending, err := db.PendingChanges(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range pending {
		out = append(out, substate.ChangeMsgID(&pending[i]))
	}
	return out
}

// drain removes every change from the outbox, as the feed does.
func drain(t *testing.T, db *state.DB) {
	t.Helper()
	pending, err := db.PendingChanges(context.Background(), 1000)
	if err == nil {
		err = db.RemoveChanges(context.Background(), pending)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// A reload recomputes the deadlines of every tenant that is neither
// terminal nor stuck, in batches, and records which SLOs they are of.
func TestRecomputeDeadlines(t *testing.T) {
	ctx := context.Background()
	db, c := deadlineDB(t)
	s := newStream(t, db)
	const n = state.DefaultRecomputeBatch + 500
	evs := make([]substate.EventData, 0, n)
	for i := range n {
		evs = append(evs, ev(tenantID(i), "e1", substate.StateBackingOff, 1, workflow("billing")))
	}
	s.apply(evs...)
	s.apply(ev("done", "e1", substate.StateSucceeded, 1))
	s.apply(ev("stuck", "e1", substate.StateBackingOff, 1, workflow("billing")))
	c.now = t0.Add(10*time.Minute + time.Second)
	stuck := 0
	for more := true; more; {
		res, m, err := db.ExpireDeadlines(ctx, time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		stuck, more = stuck+len(res.Changes), m
	}
	if stuck != n+1 {
		t.Fatalf("%d stuck, want %d", stuck, n+1)
	}
	// A later tenant, not stuck yet.
	s.apply(ev("late", "e1", substate.StateBackingOff, 1, at(c.now)))

	looser, err := substate.NewSLOs(map[string]substate.SLOLimits{"*": {substate.SLOBackingOff: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	db.SetSLOs(looser)
	if _, stale := db.NextDeadline(); !stale {
		t.Fatal("new SLOs: NextDeadline says no recompute is due")
	}
	moved, err := db.RecomputeDeadlines(ctx)
	if err != nil || moved != 1 {
		t.Fatalf("RecomputeDeadlines = %d, %v; want the one tenant not stuck", moved, err)
	}
	if v := mustTenant(t, db, "late"); !v.Deadline.Equal(c.now.Add(time.Hour)) {
		t.Fatalf("late: deadline %s, want an hour after it backed off", v.Deadline)
	}
	if v := mustTenant(t, db, tenantID(0)); !v.Stuck || v.DeadlineSLO != substate.SLOBackingOff {
		t.Fatalf("a stuck tenant lost its stuck: %+v", v)
	}
	reopen(t, db)
	db.SetSLOs(looser)
	if _, stale := db.NextDeadline(); stale {
		t.Fatal("after reopening with the same SLOs a recompute is due again")
	}
	db.SetSLOs(nil)
	if moved, err := db.RecomputeDeadlines(ctx); err != nil || moved != 1 {
		t.Fatalf("without SLOs: %d moved, %v", moved, err)
	}
	if next, stale := db.NextDeadline(); !next.IsZero() || stale {
		t.Fatalf("without SLOs: NextDeadline = %s, %t", next, stale)
	}
}

// The stuck tenants are listed and counted from their own index.
func TestStuckQueries(t *testing.T) {
	ctx := context.Background()
	db, c := deadlineDB(t)
	s := newStream(t, db)
	s.apply(ev("a", "e1", substate.StateBackingOff, 1, workflow("billing"), provider(substate.ProviderRestate)))
	s.apply(ev("b", "e1", substate.StateBackingOff, 2, workflow("billing")))
	s.apply(ev("c", "e1", substate.StateBackingOff, 3, workflow("ledger")))
	s.apply(ev("d", "e1", substate.StateRunning, 1, workflow("billing")))
	c.now = t0.Add(time.Hour)
	if got := expire(t, db); len(got) != 3 {
		t.Fatalf("%d stuck, want 3", len(got))
	}
	page, err := db.Tenants(ctx, substate.TenantFilter{Stuck: true, Limit: 2})
	if err != nil || len(page.Tenants) != 2 || page.Tenants[0].TenantID != "a" || page.Tenants[1].TenantID != "b" || page.NextPageToken == "" {
		t.Fatalf("stuck, page 1: %+v, %v", page, err)
	}
	page, err = db.Tenants(ctx, substate.TenantFilter{Stuck: true, Limit: 2, PageToken: page.NextPageToken})
	if err != nil || len(page.Tenants) != 1 || page.Tenants[0].TenantID != "c" {
		t.Fatalf("stuck, page 2: %+v, %v", page, err)
	}
	if page, _ := db.Tenants(ctx, substate.TenantFilter{Stuck: true, Provider: substate.ProviderRestate}); len(page.Tenants) != 1 {
		t.Fatalf("stuck on restate: %+v", page.Tenants)
	}
	// A fleet job's frozen set takes the same filter.
	if sel, err := db.Select(ctx, substate.TenantFilter{Stuck: true}, 10); err != nil || len(sel.Tenants) != 3 ||
		sel.Tenants[0].TenantID != "a" || sel.Tenants[2].TenantID != "c" {
		t.Fatalf("selected stuck tenants: %+v, %v", sel.Tenants, err)
	}
	g, err := db.Groups(ctx, substate.GroupQuery{By: substate.GroupByWorkflowType, Filter: substate.TenantFilter{Stuck: true}})
	if err != nil || g.Total != 3 || len(g.Groups) != 2 || g.Groups[0].Value != "billing" || g.Groups[0].Count != 2 {
		t.Fatalf("stuck by workflow type: %+v, %v", g, err)
	}
	counts, err := db.StuckCounts(ctx)
	if err != nil || len(counts) != 3 {
		t.Fatalf("StuckCounts = %+v, %v; want a count per provider and workflow type", counts, err)
	}
	var total int64
	for _, c := range counts {
		total += c.Count
		if c.SubState != substate.StateBackingOff {
			t.Fatalf("count %+v", c)
		}
	}
	if total != 3 {
		t.Fatalf("stuck counts add to %d, want 3", total)
	}
}
