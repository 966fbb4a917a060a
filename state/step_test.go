package state_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

// TestStep checks the step rules: an event's step replaces the view's, an
// event without one keeps it, a new execution starts without one, success
// clears it, and a change of step alone is a change worth a write.
func TestStep(t *testing.T) {
	for _, tc := range []struct {
		name string
		evs  []substate.EventData
		want string
		out  state.Outcome
	}{
		{"Set", []substate.EventData{ev("t", "a", running, 1, step("Charge"))}, "Charge", state.Changed},
		{"StepAloneChanges", []substate.EventData{ev("t", "a", running, 1, step("Charge")), ev("t", "a", running, 2, step("Ship"))}, "Ship", state.Changed},
		{"SameStepUnchanged", []substate.EventData{ev("t", "a", running, 1, step("Charge")), ev("t", "a", running, 2, step("Charge"))}, "Charge", state.Unchanged},
		{"NoStepKeeps", []substate.EventData{ev("t", "a", running, 1, step("Charge")), ev("t", "a", running, 2)}, "Charge", state.Unchanged},
		{"FailedKeeps", []substate.EventData{ev("t", "a", running, 1, step("Charge")), ev("t", "a", failed, 2, failure("declined"))}, "Charge", state.Changed},
		{"SucceededClears", []substate.EventData{ev("t", "a", running, 1, step("Ship")), ev("t", "a", succeeded, 2, step("Done"))}, "", state.Changed},
		{"NewExecutionForgets", []substate.EventData{ev("t", "a", running, 1, step("Charge")), ev("t", "b", running, 1, started(t0.Add(time.Hour)))}, "", state.Changed},
		{"StaleIgnored", []substate.EventData{ev("t", "a", running, 2, step("Ship")), ev("t", "a", running, 1, step("Charge"))}, "Ship", state.Stale},
		{"LongCut", []substate.EventData{ev("t", "a", running, 1, step(strings.Repeat("é", state.MaxStep)))}, strings.Repeat("é", state.MaxStep/2), state.Changed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec state.Record
			var out state.Outcome
			for _, e := range tc.evs {
				rec, out = state.ApplyEvent(rec, e, t0)
			}
			if rec.View.WorkflowStep != tc.want || out != tc.out {
				t.Errorf("step %q (%s), want %q (%s)", rec.View.WorkflowStep, out, tc.want, tc.out)
			}
		})
	}
}

// TestStepStored checks that the step survives a reopen and that a change
// of step alone commits.
func TestStepStored(t *testing.T) {
	db := openDB(t)
	s := newStream(t, db)
	s.apply(ev("t", "a", running, 1, step("Charge")))
	if res := s.apply(ev("t", "a", running, 2, step("Ship"))); !res.Committed || len(res.Changes) != 1 {
		t.Fatalf("step change: %+v, want one committed change", res)
	}
	reopen(t, db)
	if got := mustTenant(t, db, "t").WorkflowStep; got != "Ship" {
		t.Errorf("step after reopen %q, want Ship", got)
	}
}

// TestOpenBeforeStep opens a view file written before the step existed
// (testdata/view-before-step.db, made by the previous release's code): its
// records read as they were, with no step, its indexes answer, and new
// events add steps to it.
func TestOpenBeforeStep(t *testing.T) {
	path := filepath.Join(t.TempDir(), "view.db")
	copyFile(t, "testdata/view-before-step.db", path)
	db := state.NewDB(path)
	if err := db.Open(); err != nil {
		t.Fatalf("open a view written before the step: %v", err)
	}
	t.Cleanup(func() { closeAndVerify(t, db) })
	acme := mustTenant(t, db, "acme")
	if acme.WorkflowSubState != failed || acme.WorkflowRetryCount != 2 || acme.WorkflowErrorMessage != "card declined" ||
		acme.WorkflowExecutionID != "run-1" || acme.WorkflowStep != "" {
		t.Errorf("acme %+v", acme)
	}
	page, err := db.Tenants(context.Background(), substate.TenantFilter{SubState: running})
	if err != nil || len(page.Tenants) != 1 || page.Tenants[0].TenantID != "globex" {
		t.Fatalf("running tenants %+v, %v; want globex", page, err)
	}
	if seq, err := db.Checkpoint(context.Background()); err != nil || seq != 3 {
		t.Fatalf("checkpoint %d, %v; want 3", seq, err)
	}
	g := page.Tenants[0]
	next := substate.EventData{TenantID: "globex", Provider: g.Provider, ExecutionID: g.WorkflowExecutionID,
		SubState: running, ProviderState: "RUNNING", Step: "Charge", OccurredAt: g.LastEventAt.Add(time.Minute),
		Revision: 1<<33 + 1, MappingVersion: 2}
	next.Normalize()
	mustApply(t, db, []substate.Sequenced{{Seq: 4, Event: next}})
	reopen(t, db)
	if got := mustTenant(t, db, "globex").WorkflowStep; got != "Charge" {
		t.Errorf("globex step %q, want Charge", got)
	}
}

func copyFile(tb testing.TB, from, to string) {
	tb.Helper()
	src, err := os.Open(from)
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		tb.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		tb.Fatal(err)
	}
}
