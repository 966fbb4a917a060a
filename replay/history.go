package replay

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/state"
)

// History tells tenants' histories: it reads a tenant's events from
// SUBSTATE_EVENTS and folds them with state.ApplyEvent, the rule function
// the projector applies, from the tenant's first retained event on, so a
// transition says the same whatever range is asked for.
//
// Reads hold no consumer on the server (see Reader), and at most
// MaxConcurrentReads of them run at once; more wait for their turn, as
// long as their context allows.
type History struct {
	reader   *Reader
	evidence *Evidence
	turns    chan struct{}
}

var _ substate.HistoryReader = (*History)(nil)

// MaxConcurrentReads is how many history reads a History runs at once:
// each holds up to a batch of answers (about 1 MiB) and the tenant's fold,
// so a flood of reads queues instead of taking the worker's memory.
const MaxConcurrentReads = 16

// NewHistory returns the history of the tenants whose events js holds.
func NewHistory(js jetstream.JetStream) *History {
	r := &Reader{JS: js}
	return &History{reader: r, evidence: &Evidence{Reader: r, EventID: mapping.EventID}, turns: make(chan struct{}, MaxConcurrentReads)}
}

// History returns one page of a tenant's transitions.
func (h *History) History(ctx context.Context, q substate.HistoryQuery) (substate.HistoryPage, error) {
	page := substate.HistoryPage{TenantID: q.TenantID, Transitions: []substate.Transition{}, Actions: []substate.AuditEvent{}}
	select {
	case h.turns <- struct{}{}:
		defer func() { <-h.turns }()
	case <-ctx.Done():
		return page, substate.WrapError(substate.EUNAVAILABLE, ctx.Err(), "history of %q: gave up waiting for a turn among %d reads", q.TenantID, MaxConcurrentReads)
	}
	var rec state.Record
	var lookups []Lookup
	from := q.Since // the page's span starts after the transition it follows
	for m, err := range h.reader.Events(ctx, q.TenantID, Range{Until: q.Until}) {
		if err != nil {
			return page, err
		}
		if m.Err == nil && m.Event.Data.TenantID != q.TenantID {
			continue // on the tenant's subject, but the projector files it elsewhere
		}
		var t substate.Transition
		t, rec = fold(rec, &m)
		if m.Seq <= q.AfterSeq || m.Stored.Before(q.Since) {
			if m.Seq <= q.AfterSeq && m.Stored.After(from) {
				from = m.Stored.Add(time.Nanosecond)
			}
			continue
		}
		if q.Limit > 0 && len(page.Transitions) == q.Limit {
			page.NextAfterSeq = page.Transitions[q.Limit-1].Seq
			break
		}
		page.Transitions = append(page.Transitions, t)
		lookups = append(lookups, Lookup{EventID: t.EventID, Ref: m.RawRef(), StoredAt: m.Stored})
	}
	if err := h.actions(ctx, &page, q, from); err != nil {
		return page, err
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

// actions puts on the page the tenant's operator actions in its span:
// from the transition before it (or since) up to its last transition
// when more pages follow, else up to until.
func (h *History) actions(ctx context.Context, page *substate.HistoryPage, q substate.HistoryQuery, from time.Time) error {
	until := q.Until
	if page.NextAfterSeq != 0 {
		until = page.Transitions[len(page.Transitions)-1].StoredAt
	}
	acts, cut, err := h.reader.Actions(ctx, q.TenantID, from, until)
	if err != nil {
		return err
	}
	page.Actions, page.ActionsCut = acts, cut
	return nil
}

// fold applies one stream message to a tenant's record and describes it:
// a message that is not a canonical event changes nothing and is told as
// invalid.
func fold(rec state.Record, m *Event) (substate.Transition, state.Record) {
	if m.Err != nil {
		s := substate.StateOf(rec.View)
		return substate.Transition{
			Seq: m.Seq, StoredAt: m.Stored.UTC(), EventID: m.Header.Get(substate.HeaderMsgID),
			Outcome: substate.OutcomeInvalid, Reason: m.Err.Error(), Old: s, New: s,
		}, rec
	}
	t, next := state.Fold(rec, &m.Event, m.Stored)
	t.Seq, t.TraceID = m.Seq, substate.TraceIDOf(m.Event.TraceParent)
	return t, next
}
