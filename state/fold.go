package state

import (
	"time"

	"github.com/substatehq/substate"
)

// Fold applies a canonical event to a tenant's record with ApplyEvent, as
// the projector does, stored being when the stream stored the event, and
// describes the step as a transition of the tenant's history. The
// transition's Seq is left to the caller, which knows where the event came
// from.
func Fold(rec Record, ev *substate.Event, stored time.Time) (substate.Transition, Record) {
	d := &ev.Data
	t := substate.Transition{
		StoredAt: stored.UTC(), EventID: ev.ID, OccurredAt: d.OccurredAt.UTC(), Provider: d.Provider,
		ExecutionID: d.ExecutionID, ProviderState: d.ProviderState, Revision: d.Revision,
		Old: substate.StateOf(rec.View),
	}
	next, out := ApplyEvent(rec, *d, stored)
	t.Outcome, t.New = out.String(), substate.StateOf(next.View)
	// The record still names the execution a succeeded event hid from the
	// view, so a success of the same execution is not mistaken for a new one.
	t.NewExecution = out == Changed && rec.ExecutionID != "" && d.ExecutionID != rec.ExecutionID
	return t, next
}
