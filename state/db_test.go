package state_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

func TestApplyUnchangedOpensNoWriteTransaction(t *testing.T) {
	db := openDB(t)
	s := newStream(t, db)
	s.apply(ev("t1", "a", running, 1), ev("t2", "b", backingOff, 1, retries(1), failure("x")))
	if got := db.Stats().Commits; got != 1 {
		t.Fatalf("commits after the first batch = %d, want 1", got)
	}
	writes := db.PageWrites()
	if writes == 0 {
		t.Fatal("bbolt counted no page writes for the first commit")
	}

	res := s.apply(
		ev("t1", "a", running, 2, native("active")),                             // newer, same status
		ev("t2", "b", backingOff, 2, retries(1), failure("x")),                  // newer, same status
		ev("t1", "a", running, 1),                                               // duplicate
		ev("t2", "b", backingOff, 1, retries(1), failure("x")),                  // duplicate
		ev("t2", "old", failed, 9, started(t0.Add(-time.Hour)), failure("old")), // older execution
	)
	if res.Committed || len(res.Changes) != 0 {
		t.Errorf("result = %+v, want no commit and no change", res)
	}
	if res.Unchanged != 2 || res.Stale != 3 {
		t.Errorf("unchanged, stale = %d, %d; want 2, 3", res.Unchanged, res.Stale)
	}
	st := db.Stats()
	if st.Commits != 1 || st.Pending != 2 {
		t.Errorf("stats = %+v, want 1 commit and 2 pending", st)
	}
	if got := db.PageWrites() - writes; got != 0 {
		t.Errorf("bbolt wrote %d pages for a batch without changes, want 0", got)
	}
	if got := mustTenant(t, db, "t1").ProviderState; got != "active" {
		t.Errorf("providerState = %q, want the unchanged event's active", got)
	}
}

func TestApplyCommitsOncePerBatch(t *testing.T) {
	db := openDB(t)
	s := newStream(t, db)
	var evs []substate.EventData
	for i := range 50 {
		evs = append(evs, ev(tenantID(i), "a", running, 1), ev(tenantID(i), "a", errored, 2, failure("x")))
	}
	res := s.apply(evs...)
	if got, want := len(res.Changes), 100; got != want || !res.Committed {
		t.Fatalf("changes = %d, committed %t; want %d, true", got, res.Committed, want)
	}
	if got := db.Stats().Commits; got != 1 {
		t.Errorf("commits = %d, want 1", got)
	}
}

// BytesWritten counts whole pages, a meta page per commit at least, and
// nothing for a batch that commits nothing.
func TestStatsBytesWritten(t *testing.T) {
	db := openDB(t)
	s := newStream(t, db)
	const page = 4096 // bbolt's page size is the OS page size: 4 KiB here
	res := s.apply(ev("t1", "a", running, 1))
	first := db.Stats().BytesWritten
	if first < 2*page || first%page != 0 || res.BytesWritten != first {
		t.Fatalf("bytes written by one commit = %d (result says %d), want whole pages, a leaf and a meta page at least", first, res.BytesWritten)
	}
	res = s.apply(ev("t1", "a", running, 1)) // a duplicate: no commit
	if got := db.Stats().BytesWritten; got != first || res.BytesWritten != 0 {
		t.Errorf("bytes written after a batch with no commit = %d (result says %d), want %d", got, res.BytesWritten, first)
	}
	var evs []substate.EventData
	for i := range 500 {
		evs = append(evs, ev(tenantID(i), "a", running, 1))
	}
	s.apply(evs...)
	if got := db.Stats().BytesWritten - first; got < 8*page {
		t.Errorf("500 new tenants wrote %d bytes, want several pages", got)
	}
}

func TestApplyChangesInStreamOrder(t *testing.T) {
	db := openDB(t)
	s := newStream(t, db)
	res := s.apply(ev("t1", "a", running, 1), ev("t2", "b", running, 1), ev("t1", "a", errored, 2, failure("x")))
	want := []struct {
		seq      uint64
		tenant   string
		old, new substate.SubState
	}{{1, "t1", "", running}, {2, "t2", "", running}, {3, "t1", running, errored}}
	if len(res.Changes) != len(want) {
		t.Fatalf("changes = %+v", res.Changes)
	}
	for i, w := range want {
		c := res.Changes[i]
		if c.Seq != w.seq || c.TenantID != w.tenant || c.Old.WorkflowSubState != w.old || c.New.WorkflowSubState != w.new {
			t.Errorf("change %d = seq %d %s %s→%s, want seq %d %s %s→%s", i,
				c.Seq, c.TenantID, c.Old.WorkflowSubState, c.New.WorkflowSubState, w.seq, w.tenant, w.old, w.new)
		}
	}
	if got := res.Changes[2].New.UpdatedAt; !got.Equal(t0) {
		t.Errorf("updatedAt = %v, want the clock's %v", got, t0)
	}
}

func TestCheckpoint(t *testing.T) {
	ctx := context.Background()
	t.Run("RedeliveredSkipped", func(t *testing.T) {
		db := openDB(t)
		s := newStream(t, db)
		batch := s.batch(ev("t", "a", running, 1), ev("t", "a", errored, 2, failure("x")))
		mustApply(t, db, batch)
		res := mustApply(t, db, batch)
		if res.Skipped != 2 || res.Committed || len(res.Changes) != 0 {
			t.Errorf("redelivery = %+v, want 2 skipped and nothing else", res)
		}
		// A batch that overlaps the checkpoint applies only what is new.
		more := append(batch[1:], s.batch(ev("t", "a", running, 3))...)
		res = mustApply(t, db, more)
		if res.Skipped != 1 || len(res.Changes) != 1 {
			t.Errorf("overlap = %+v, want 1 skipped, 1 change", res)
		}
		if got, _ := db.Checkpoint(ctx); got != 3 {
			t.Errorf("checkpoint = %d, want 3", got)
		}
	})
	t.Run("PersistsAcrossReopen", func(t *testing.T) {
		db := openDB(t)
		s := newStream(t, db)
		s.apply(ev("t", "a", backingOff, 1, retries(2), failure("x")))
		before := mustTenant(t, db, "t")
		reopen(t, db)
		if got, _ := db.Checkpoint(ctx); got != 1 {
			t.Errorf("checkpoint = %d, want 1", got)
		}
		if got := mustTenant(t, db, "t"); got != before {
			t.Errorf("view after reopen = %+v, want %+v", got, before)
		}
		res := mustApply(t, db, []substate.Sequenced{{Seq: 1, Event: ev("t", "a", succeeded, 2)}})
		if res.Skipped != 1 {
			t.Errorf("after reopen, sequence 1 again = %+v, want skipped", res)
		}
	})
	// The id of the event at the checkpoint is committed with it: a held
	// batch moves neither, the commit that carries it moves both, and an
	// event without an id leaves none.
	t.Run("EventID", func(t *testing.T) {
		db := openDB(t)
		check := func(wantSeq uint64, wantID string) {
			t.Helper()
			if seq, id, err := db.CheckpointEvent(); err != nil || seq != wantSeq || id != wantID {
				t.Fatalf("CheckpointEvent = %d %q %v, want %d %q", seq, id, err, wantSeq, wantID)
			}
		}
		check(0, "")
		mustApply(t, db, []substate.Sequenced{{Seq: 1, ID: "e1", Event: ev("t", "a", running, 1)}})
		check(1, "e1")
		mustApply(t, db, []substate.Sequenced{{Seq: 2, ID: "e2", Event: ev("t", "a", running, 2, native("active"))}})
		check(1, "e1") // held: nothing committed
		reopen(t, db)  // Close commits what was held
		check(2, "e2")
		mustApply(t, db, []substate.Sequenced{{Seq: 3, Event: ev("t", "a", succeeded, 3)}})
		check(3, "")
	})
	t.Run("UnchangedBatchDoesNotMoveIt", func(t *testing.T) {
		db := openDB(t)
		s := newStream(t, db)
		s.apply(ev("t", "a", running, 1))
		s.apply(ev("t", "a", running, 2, native("active")))
		if got, _ := db.Checkpoint(ctx); got != 1 {
			t.Errorf("checkpoint = %d, want 1: an unchanged batch commits nothing", got)
		}
		// The applied sequence moved in memory: a redelivery is skipped.
		if res := mustApply(t, db, []substate.Sequenced{{Seq: 2, Event: ev("t", "a", running, 2)}}); res.Skipped != 1 {
			t.Errorf("redelivered unchanged event = %+v, want skipped", res)
		}
		// The next commit carries the pending record and the sequence.
		s.apply(ev("u", "b", running, 1))
		if got, _ := db.Checkpoint(ctx); got != 3 {
			t.Errorf("checkpoint = %d, want 3", got)
		}
		if got := db.Stats().Pending; got != 0 {
			t.Errorf("pending after commit = %d, want 0", got)
		}
	})
}

// A newer unchanged event must keep an older one out even though it was
// never written on its own: r1 running, r3 running (unchanged), then a late
// r2 error is stale, also after a restart.
func TestPendingRevisionKeepsLateEventsOut(t *testing.T) {
	db := openDB(t)
	s := newStream(t, db)
	s.apply(ev("t", "a", running, 1))
	s.apply(ev("t", "a", running, 3, native("active")))
	if res := s.apply(ev("t", "a", errored, 2, failure("x"))); res.Stale != 1 {
		t.Errorf("late event = %+v, want stale", res)
	}
	reopen(t, db)
	if got := mustTenant(t, db, "t"); got.ProviderState != "active" || !got.LastEventAt.Equal(t0.Add(3*time.Second)) {
		t.Errorf("after reopen = %+v, want the unchanged event's provider state and time", got)
	}
	if res := s.apply(ev("t", "a", errored, 2, failure("x"))); res.Stale != 1 {
		t.Errorf("late event after reopen = %+v, want stale", res)
	}
}

func TestPendingLimitFlushes(t *testing.T) {
	db := openDB(t, func(db *state.DB) { db.PendingLimit = 2 })
	s := newStream(t, db)
	s.apply(ev("t1", "a", running, 1), ev("t2", "a", running, 1), ev("t3", "a", running, 1))
	s.apply(ev("t1", "a", running, 2), ev("t2", "a", running, 2))
	if st := db.Stats(); st.Commits != 1 || st.Pending != 2 {
		t.Fatalf("stats = %+v, want 1 commit, 2 pending", st)
	}
	res := s.apply(ev("t3", "a", running, 2))
	if st := db.Stats(); !res.Committed || st.Commits != 2 || st.Pending != 0 {
		t.Errorf("third pending tenant: committed %t, stats %+v; want a flush", res.Committed, st)
	}
}

func TestSyncFlushesPending(t *testing.T) {
	db := openDB(t, func(db *state.DB) { db.NoSync = true })
	s := newStream(t, db)
	s.apply(ev("t", "a", running, 1))
	s.apply(ev("t", "a", running, 2))
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	if st := db.Stats(); st.Pending != 0 || st.Commits != 2 {
		t.Errorf("stats after sync = %+v, want nothing pending", st)
	}
	if got, _ := db.Checkpoint(context.Background()); got != 2 {
		t.Errorf("checkpoint = %d, want 2", got)
	}
}

func TestApplyRejectsInvalidBatch(t *testing.T) {
	db := openDB(t)
	s := newStream(t, db)
	bad := ev("t", "", running, 2)
	_, err := db.Apply(context.Background(), s.batch(ev("t", "a", running, 1), bad))
	if got := substate.ErrorCode(err); got != substate.EINVALID {
		t.Fatalf("error = %v (code %q), want EINVALID", err, got)
	}
	if _, err := db.Tenant(context.Background(), "t"); substate.ErrorCode(err) != substate.ENOTFOUND {
		t.Errorf("a rejected batch applied something: %v", err)
	}
	farFuture := ev("t", "a", running, 1)
	farFuture.OccurredAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := db.Apply(context.Background(), s.batch(farFuture)); substate.ErrorCode(err) != substate.EINVALID {
		t.Errorf("year 10000: error %v, want EINVALID", err)
	}
}

func TestClosed(t *testing.T) {
	ctx := context.Background()
	db := state.NewDB(filepath.Join(t.TempDir(), "view.db"))
	if _, err := db.Tenant(ctx, "t"); !errors.Is(err, state.ErrClosed) {
		t.Errorf("tenant before open: %v, want ErrClosed", err)
	}
	if _, err := db.Apply(ctx, nil); !errors.Is(err, state.ErrClosed) {
		t.Errorf("apply before open: %v, want ErrClosed", err)
	}
	if _, err := db.Tenants(ctx, substate.TenantFilter{}); !errors.Is(err, state.ErrClosed) {
		t.Errorf("tenants before open: %v, want ErrClosed", err)
	}
	if _, err := db.Checkpoint(ctx); !errors.Is(err, state.ErrClosed) {
		t.Errorf("checkpoint before open: %v, want ErrClosed", err)
	}
	if err := db.Sync(); !errors.Is(err, state.ErrClosed) {
		t.Errorf("sync before open: %v, want ErrClosed", err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("close before open: %v", err)
	}
}

func TestOpenLockedFileTimesOut(t *testing.T) {
	db := openDB(t)
	other := state.NewDB(db.Path)
	other.OpenTimeout = 50 * time.Millisecond
	if err := other.Open(); err == nil {
		other.Close()
		t.Fatal("second open of a file in use succeeded")
	}
}

func TestApplyHonoursCancelledContext(t *testing.T) {
	db := openDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := db.Apply(ctx, newStream(t, db).batch(ev("t", "a", running, 1))); !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
	if st := db.Stats(); st.Commits != 0 {
		t.Errorf("commits = %d, want 0", st.Commits)
	}
}

// Queries run while batches commit and unchanged events are held: every
// read sees a whole view (the race detector checks the rest).
func TestConcurrentReadsDuringApply(t *testing.T) {
	db := openDB(t, fast)
	s := newStream(t, db)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 3)
	reader := func(read func() error) {
		for ctx.Err() == nil {
			if err := read(); err != nil && substate.ErrorCode(err) != substate.ENOTFOUND {
				done <- err
				return
			}
		}
		done <- nil
	}
	go reader(func() error { _, err := db.Tenant(ctx, tenantID(3)); return err })
	go reader(func() error {
		_, err := db.Tenants(ctx, substate.TenantFilter{SortRetryDesc: true, Limit: 5})
		return err
	})
	go reader(func() error {
		for _, err := range db.Active(ctx, t0.Add(time.Hour)) {
			if err != nil {
				return err
			}
		}
		return nil
	})
	for rev := substate.Revision(1); rev <= 60; rev++ {
		var evs []substate.EventData
		for i := range 20 {
			st := running
			if rev%3 == 0 && i%2 == 0 {
				st = backingOff
			}
			evs = append(evs, ev(tenantID(i), "x", st, rev, retries(int(rev/3)%4)))
		}
		s.apply(evs...)
	}
	cancel()
	for range 3 {
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}
}

// TestStreamMarkWhileClosing reads the stream mark while the view closes
// and opens again, as the worker's running check may while it stops: a
// read either answers or returns ErrClosed, and never finds the view
// corrupt.
func TestStreamMarkWhileClosing(t *testing.T) {
	db := openDB(t)
	if err := db.SetStreamMark("mark"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 50 {
			if err := db.Close(); err != nil {
				t.Error(err)
			}
			if err := db.Open(); err != nil {
				t.Error(err)
			}
		}
	}()
	for {
		select {
		case <-done:
			if err := db.Health(); err != nil {
				t.Fatalf("health after reads during Close: %v", err)
			}
			return
		default:
		}
		if mark, err := db.StreamMark(); err != nil && !errors.Is(err, state.ErrClosed) || err == nil && mark != "mark" {
			t.Fatalf("StreamMark = %q, %v", mark, err)
		}
	}
}
