package state_test

import (
	"context"
	"testing"

	"github.com/substatehq/substate"
)

func TestAppliedIncludesHeldEvents(t *testing.T) {
	db := openDB(t)
	s := newStream(t, db)
	s.apply(ev("t1", "e1", substate.StateRunning, 1))
	s.apply(ev("t1", "e1", substate.StateRunning, 2, native("RUNNING")))
	cp, err := db.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cp, uint64(1); got != want {
		t.Fatalf("checkpoint = %d, want %d (the unchanged event is held)", got, want)
	}
	if got, want := db.Applied(), uint64(2); got != want {
		t.Fatalf("applied = %d, want %d", got, want)
	}
	if v := mustTenant(t, db, "t1"); v.ProviderState != "RUNNING" {
		t.Fatalf("readers see provider state %q, want the held RUNNING", v.ProviderState)
	}
}
