package state_test

import (
	"context"
	"testing"

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
		if err := db.RemoveChanges(ctx, []uint64{1, 4}); err != nil {
			t.Fatal(err)
		}
		if got, _ := db.PendingChanges(ctx, 10); len(got) != 1 || got[0].Seq != 2 {
			t.Fatalf("outbox after removing 1 and 4 = %+v, want 2 alone", got)
		}
		if n, err := db.OutboxLen(); err != nil || n != 1 {
			t.Fatalf("OutboxLen = %d, %v; want 1", n, err)
		}
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
		if err := db.RemoveChanges(ctx, []uint64{1}); err != state.ErrClosed {
			t.Fatalf("RemoveChanges on a closed view = %v, want ErrClosed", err)
		}
		if err := db.Open(); err != nil { // for the cleanup's close
			t.Fatal(err)
		}
	})
}
