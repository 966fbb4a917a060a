package state_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

func TestChangeOutbox(t *testing.T) {
	ctx := context.Background()
	withOutbox := func(db *state.DB) { db.ChangeOutbox = true }

	t.Run("OK", func(t *testing.T) {
		db := openDB(t, withOutbox)
		res := newStream(t, db).apply(
			ev("a", "e1", substate.StateRunning, 1),
			ev("b", "e1", substate.StateRunning, 1),
			ev("a", "e1", substate.StateRunning, 2), // no change
			ev("a", "e1", substate.StateBackingOff, 3))
		if len(res.Changes) != 3 {
			t.Fatalf("%d changes, want 3", len(res.Changes))
		}
		select {
		case <-db.ChangesWaiting():
		default:
			t.Fatal("no signal after a commit that wrote changes")
		}
		reopen(t, db)
		got, err := db.PendingChanges(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[0].Seq != 1 || got[1].Seq != 2 || got[2].Seq != 4 || got[2].New.WorkflowSubState != substate.StateBackingOff {
			t.Fatalf("outbox after reopen = %+v, want the changes at 1, 2 and 4", got)
		}
		if got, _ := db.PendingChanges(ctx, 2); len(got) != 2 || got[1].Seq != 2 {
			t.Fatalf("PendingChanges(2) = %+v, want the two oldest", got)
		}
		if err := db.RemoveChanges(ctx, changesAt(1, 4)); err != nil {
			t.Fatal(err)
		}
		if got, _ := db.PendingChanges(ctx, 10); len(got) != 1 || got[0].Seq != 2 {
			t.Fatalf("outbox after removing 1 and 4 = %+v, want 2 alone", got)
		}
		if n, err := db.OutboxLen(); err != nil || n != 1 {
			t.Fatalf("OutboxLen = %d, %v; want 1", n, err)
		}
	})

	// Removing costs no write transaction of its own while the view
	// commits: the next commit deletes what the feed removed, and only a
	// quiet view gets a transaction for it.
	t.Run("RemovedWithNextCommit", func(t *testing.T) {
		db := openDB(t, withOutbox)
		s := newStream(t, db)
		s.apply(ev("a", "e1", substate.StateRunning, 1), ev("b", "e1", substate.StateRunning, 1))
		commits := db.Stats().Commits
		if err := db.RemoveChanges(ctx, changesAt(1, 2)); err != nil {
			t.Fatal(err)
		}
		if got, err := db.PendingChanges(ctx, 10); err != nil || len(got) != 0 {
			t.Fatalf("PendingChanges after removing both = %+v, %v; want none", got, err)
		}
		if n, err := db.OutboxLen(); err != nil || n != 0 {
			t.Fatalf("OutboxLen = %d, %v; want 0", n, err)
		}
		if n := db.OutboxInFile(); n != 2 {
			t.Fatalf("the file holds %d changes right after RemoveChanges, want 2: removing wrote a transaction of its own", n)
		}
		s.apply(ev("a", "e1", substate.StateBackingOff, 2))
		if got, want := db.Stats().Commits, commits+1; got != want {
			t.Fatalf("%d commits, want %d", got, want)
		}
		if n := db.OutboxInFile(); n != 1 {
			t.Fatalf("the file holds %d changes after the next commit, want the new one alone", n)
		}
		quiet := func(seq uint64) {
			t.Helper()
			if err := db.RemoveChanges(ctx, changesAt(seq)); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for db.OutboxInFile() != 0 {
				if time.Now().After(deadline) {
					t.Fatal("a quiet view kept a removed change in the file")
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		quiet(3)
		if err := db.RemoveChanges(ctx, changesAt(3)); err != nil { // again: a feed restarted
			t.Fatal(err)
		}
		if n, err := db.OutboxLen(); err != nil || n != 0 {
			t.Fatalf("OutboxLen after removing a change twice = %d, %v; want 0", n, err)
		}
		s.apply(ev("b", "e1", substate.StateBackingOff, 2))
		reopen(t, db)
		if n := db.OutboxInFile(); n != 1 {
			t.Fatalf("the file holds %d changes after reopening, want 1", n)
		}
		quiet(4) // the timer works after a reopen too
	})

	t.Run("Off", func(t *testing.T) {
		db := openDB(t)
		newStream(t, db).apply(ev("a", "e1", substate.StateRunning, 1))
		if got, err := db.PendingChanges(ctx, 10); err != nil || len(got) != 0 {
			t.Fatalf("outbox without ChangeOutbox = %+v, %v; want empty", got, err)
		}
	})

	t.Run("ErrClosed", func(t *testing.T) {
		db := openDB(t, withOutbox)
		closeAndVerify(t, db)
		if _, err := db.PendingChanges(ctx, 1); err != state.ErrClosed {
			t.Fatalf("PendingChanges on a closed view = %v, want ErrClosed", err)
		}
		if err := db.RemoveChanges(ctx, changesAt(1)); err != state.ErrClosed {
			t.Fatalf("RemoveChanges on a closed view = %v, want ErrClosed", err)
		}
		if err := db.Open(); err != nil { // for the cleanup's close
			t.Fatal(err)
		}
	})
}

// changesAt returns changes made by events at these sequences, as the
// feed hands them back to RemoveChanges.
func changesAt(seqs ...uint64) []substate.Change {
	out := make([]substate.Change, len(seqs))
	for i, s := range seqs {
		out[i] = substate.Change{Seq: s}
	}
	return out
}

// The changes a commit just wrote are handed to the feed from memory, with
// the data the outbox encoded; they encode exactly as the same changes
// decoded from the file after a restart, so the feed publishes the same
// bytes either way.
func TestFreshChangesEqualTheFile(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, func(db *state.DB) { db.ChangeOutbox = true })
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	newStream(t, db).apply(
		ev("a", "e1", substate.StateRunning, 1, started(at), native("RUNNING")),
		ev("b", "e1", substate.StateFailed, 1, failure("boom: timeout"), retries(2), step("Charge")),
		ev("a", "e1", substate.StateBackingOff, 3, retries(1)))
	encode := func(changes []substate.Change) []string {
		var out []string
		for _, c := range changes {
			b, err := substate.MarshalChangeEvent(c, "")
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(b))
		}
		return out
	}
	fresh, err := db.PendingChanges(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range fresh {
		if c.Encoded == nil { // the feed would encode the change a second time
			t.Fatalf("change %d from memory without the data the outbox encoded", c.Seq)
		}
	}
	reopen(t, db)
	stored, err := db.PendingChanges(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	got, want := encode(fresh), encode(stored)
	if len(got) != 3 || !slices.Equal(got, want) {
		t.Fatalf("from memory:\n%s\nfrom the file:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
