package state_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

// t0 is the start of every test's timeline.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is a test clock that moves only when told.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// openDB opens a view in a fresh directory with a fixed clock. On cleanup
// it closes the view and verifies the file: bbolt's consistency check and
// the indexes against the records.
func openDB(tb testing.TB, configure ...func(*state.DB)) *state.DB {
	tb.Helper()
	db := state.NewDB(filepath.Join(tb.TempDir(), "view.db"))
	c := &clock{now: t0}
	db.Now = c.Now
	for _, f := range configure {
		f(db)
	}
	if err := db.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { closeAndVerify(tb, db) })
	return db
}

func closeAndVerify(tb testing.TB, db *state.DB) {
	tb.Helper()
	if err := db.Close(); err != nil {
		tb.Errorf("close: %v", err)
	}
	if err := state.Verify(db.Path); err != nil {
		tb.Errorf("verify %s: %v", filepath.Base(db.Path), err)
	}
}

// reopen closes db, verifies the file and opens it again.
func reopen(tb testing.TB, db *state.DB) {
	tb.Helper()
	closeAndVerify(tb, db)
	if err := db.Open(); err != nil {
		tb.Fatal(err)
	}
}

// evOpt adjusts an event made by ev.
type evOpt func(*substate.EventData)

// mapped sets the mapping version that produced an event.
func mapped(v int) evOpt { return func(e *substate.EventData) { e.MappingVersion = v } }

// ev returns a valid engine event of tenant's execution exec at revision
// rev, started at t0 and occurred rev seconds later.
func ev(tenant, exec string, s substate.SubState, rev substate.Revision, opts ...evOpt) substate.EventData {
	e := substate.EventData{
		TenantID:           tenant,
		Provider:           substate.ProviderEngine,
		ExecutionID:        exec,
		Workflow:           "provision",
		SubState:           s,
		ProviderState:      string(s),
		OccurredAt:         t0.Add(time.Duration(rev) * time.Second),
		ExecutionStartedAt: t0,
		Revision:           rev,
	}
	for _, o := range opts {
		o(&e)
	}
	e.Normalize()
	return e
}

func retries(n int) evOpt {
	return func(e *substate.EventData) { e.RetryCount, e.RetryCountKnown = n, true }
}
func failure(msg string) evOpt {
	return func(e *substate.EventData) { e.ErrorMessage, e.ErrorType = msg, "TaskFailed" }
}
func started(t time.Time) evOpt          { return func(e *substate.EventData) { e.ExecutionStartedAt = t } }
func native(state string) evOpt          { return func(e *substate.EventData) { e.ProviderState = state } }
func verb(v substate.Verb) evOpt         { return func(e *substate.EventData) { e.Verb = v } }
func provider(p substate.Provider) evOpt { return func(e *substate.EventData) { e.Provider = p } }
func step(name string) evOpt             { return func(e *substate.EventData) { e.Step = name } }

// stream numbers events with consecutive stream sequences, like
// SUBSTATE_EVENTS does, and applies them to a view.
type stream struct {
	tb  testing.TB
	db  *state.DB
	seq uint64
}

func newStream(tb testing.TB, db *state.DB) *stream { return &stream{tb: tb, db: db} }

// batch numbers evs from the next sequence on.
func (s *stream) batch(evs ...substate.EventData) []substate.Sequenced {
	out := make([]substate.Sequenced, len(evs))
	for i, e := range evs {
		s.seq++
		out[i] = substate.Sequenced{Seq: s.seq, Event: e}
	}
	return out
}

// apply applies evs as one batch and fails the test on error.
func (s *stream) apply(evs ...substate.EventData) substate.ApplyResult {
	s.tb.Helper()
	return mustApply(s.tb, s.db, s.batch(evs...))
}

// each applies evs one batch per event.
func (s *stream) each(evs ...substate.EventData) {
	s.tb.Helper()
	for _, e := range evs {
		s.apply(e)
	}
}

func mustApply(tb testing.TB, db *state.DB, batch []substate.Sequenced) substate.ApplyResult {
	tb.Helper()
	res, err := db.Apply(context.Background(), batch)
	if err != nil {
		tb.Fatalf("apply: %v", err)
	}
	return res
}

func mustTenant(tb testing.TB, db *state.DB, id string) substate.TenantView {
	tb.Helper()
	v, err := db.Tenant(context.Background(), id)
	if err != nil {
		tb.Fatalf("tenant %q: %v", id, err)
	}
	return v
}

// status is the part of a view the rules decide, for compact comparisons.
type status struct {
	SubState  substate.SubState
	Execution string
	Retries   int
	Error     string
}

func (s status) String() string {
	return fmt.Sprintf("{%s exec=%q retries=%d error=%q}", s.SubState, s.Execution, s.Retries, s.Error)
}

func statusOf(v substate.TenantView) status {
	return status{v.WorkflowSubState, v.WorkflowExecutionID, v.WorkflowRetryCount, v.WorkflowErrorMessage}
}

// tenantID returns the i-th tenant id of a generated population.
func tenantID(i int) string { return fmt.Sprintf("tenant-%05d", i) }
