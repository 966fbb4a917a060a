package main

import (
	"context"
	"net/http"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/state"
)

// replayRoutes are the worker's routes that read the retained streams and
// say how far the view is.
func (w *Worker) replayRoutes() map[string]http.Handler {
	log := w.Logger.With("component", "http")
	routes := map[string]http.Handler{
		"GET /v1/tenants/{id}/history": w.readRoute(httpapi.ScopeRead, httpapi.RedactedHistory(newHistory(w.Bus.JetStream), w.Redaction, log)),
	}
	if w.View != nil { // a role without a view has no checkpoint to tell
		routes["GET /v1/view/checkpoint"] = w.readRoute(httpapi.ScopeRead, httpapi.Checkpoint(w.View, log))
	}
	return routes
}

// history tells tenants' histories: it reads a tenant's events from
// SUBSTATE_EVENTS and folds them with state.ApplyEvent, the rule function
// the projector applies, from the tenant's first retained event on, so a
// transition says the same whatever range is asked for.
type history struct {
	reader   *replay.Reader
	evidence *replay.Evidence
}

var _ substate.HistoryReader = (*history)(nil)

func newHistory(js jetstream.JetStream) *history {
	r := &replay.Reader{JS: js}
	return &history{reader: r, evidence: &replay.Evidence{Reader: r, EventID: mapping.EventID}}
}

// History returns one page of a tenant's transitions.
func (h *history) History(ctx context.Context, q substate.HistoryQuery) (substate.HistoryPage, error) {
	page := substate.HistoryPage{TenantID: q.TenantID, Transitions: []substate.Transition{}}
	var rec state.Record
	var lookups []replay.Lookup
	for m, err := range h.reader.Events(ctx, q.TenantID, replay.Range{Until: q.Until}) {
		if err != nil {
			return page, err
		}
		if m.Err == nil && m.Event.Data.TenantID != q.TenantID {
			continue // on the tenant's subject, but the projector files it elsewhere
		}
		var t substate.Transition
		t, rec = fold(rec, &m)
		if m.Seq <= q.AfterSeq || m.Stored.Before(q.Since) {
			continue
		}
		if q.Limit > 0 && len(page.Transitions) == q.Limit {
			page.NextAfterSeq = page.Transitions[q.Limit-1].Seq
			break
		}
		page.Transitions = append(page.Transitions, t)
		lookups = append(lookups, replay.Lookup{EventID: t.EventID, Ref: m.RawRef(), StoredAt: m.Stored})
	}
	if q.Raw && len(lookups) > 0 {
		ev, err := h.evidence.Find(ctx, lookups)
		if err != nil {
			return page, err
		}
		for i := range page.Transitions {
			page.Transitions[i].Raw = &ev[i]
		}
	}
	return page, nil
}

// fold applies one stream message to a tenant's record and describes it.
func fold(rec state.Record, m *replay.Event) (substate.Transition, state.Record) {
	t := substate.Transition{
		Seq: m.Seq, StoredAt: m.Stored.UTC(), EventID: m.Header.Get(substate.HeaderMsgID),
		Old: substate.StateOf(rec.View), New: substate.StateOf(rec.View),
	}
	if m.Err != nil {
		t.Outcome, t.Reason = substate.OutcomeInvalid, m.Err.Error()
		return t, rec
	}
	d := &m.Event.Data
	t.EventID, t.OccurredAt, t.Provider = m.Event.ID, d.OccurredAt.UTC(), d.Provider
	t.ExecutionID, t.ProviderState, t.Revision = d.ExecutionID, d.ProviderState, d.Revision
	next, out := state.ApplyEvent(rec, *d, m.Stored)
	t.Outcome, t.New = out.String(), substate.StateOf(next.View)
	// The record still names the execution a succeeded event hid from the
	// view, so a success of the same execution is not mistaken for a new one.
	t.NewExecution = out == state.Changed && rec.ExecutionID != "" && d.ExecutionID != rec.ExecutionID
	return t, next
}
