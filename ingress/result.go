package ingress

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/substatehq/substate"
)

// RawStore is where the ingress stores raw events, and how it tells a
// redelivery from a reused id: the publish says whether JetStream already
// held the id (and at which sequence), and the stored body can be read
// back to compare. JetStream's own duplicate window keeps the ids; the
// stored message is the digest, so nothing more is kept in memory.
type RawStore interface {
	// StoreRaw publishes ev and returns the sequence holding its id and
	// whether it was there already (a duplicate, not stored again).
	StoreRaw(ctx context.Context, ev substate.RawEvent) (seq uint64, duplicate bool, err error)
	// RawBody returns the body stored at seq of SUBSTATE_RAW.
	RawBody(ctx context.Context, seq uint64) ([]byte, error)
}

// Outcomes of one event of an ingest request.
const (
	OutcomeAccepted  = "accepted"  // stored now
	OutcomeDuplicate = "duplicate" // the same id with the same body was stored already
)

// IngestResult is the 202 answer of an ingest request: how many events
// were stored and how many were duplicates of events already held, and
// the outcome of each event in request order.
type IngestResult struct {
	Accepted   int           `json:"accepted"`
	Duplicates int           `json:"duplicates"`
	Events     []EventResult `json:"events"`
}

// EventResult is the outcome of one event of a request.
type EventResult struct {
	ID     string `json:"id"`
	Result string `json:"result"` // OutcomeAccepted or OutcomeDuplicate
}

// publish stores the events of a request in order. An id JetStream holds
// already with another body is a conflict: that event is not stored, the
// others are all the same (a sender does not retry a 409, so an event
// after the conflicting one would otherwise never arrive), and the request
// ends with an ECONFLICT error naming the first conflicting event.
func (in *Ingress) publish(ctx context.Context, events []substate.RawEvent) (IngestResult, error) {
	res := IngestResult{Events: make([]EventResult, 0, len(events))}
	var conflict error
	conflicts := 0
	for i, ev := range events {
		span := in.Tracer.PublishRaw(ctx, &ev)
		dup, err := in.store(ctx, ev)
		span.EndStored(dup, err)
		if substate.ErrorCode(err) == substate.ECONFLICT {
			if conflicts++; conflicts == 1 {
				conflict = err
				if len(events) > 1 {
					conflict = substate.WrapError(substate.ECONFLICT, err, "event %d: %s", i, substate.ErrorMessage(err))
				}
			}
			continue
		} else if err != nil {
			return res, err
		}
		r := EventResult{ID: ev.ID, Result: OutcomeAccepted}
		if dup {
			r.Result = OutcomeDuplicate
			res.Duplicates++
		} else {
			res.Accepted++
		}
		res.Events = append(res.Events, r)
	}
	if conflicts > 1 {
		conflict = substate.WrapError(substate.ECONFLICT, conflict, "%s; %d events of the request conflict, the other %d were stored",
			substate.ErrorMessage(conflict), conflicts, len(events)-conflicts)
	}
	return res, conflict
}

// store publishes one event and reports whether it was a duplicate; a
// duplicate whose stored body differs is an ECONFLICT error.
func (in *Ingress) store(ctx context.Context, ev substate.RawEvent) (bool, error) {
	seq, dup, err := in.Store.StoreRaw(ctx, ev)
	if err != nil {
		return false, publishError(err)
	}
	if !dup || seq == 0 {
		return dup, nil
	}
	stored, err := in.Store.RawBody(ctx, seq)
	if substate.ErrorCode(err) == substate.ENOTFOUND {
		return true, nil // removed since (retention): nothing to compare with
	} else if err != nil {
		return false, publishError(err)
	}
	if !sameJSON(stored, ev.Body) {
		return false, substate.Errorf(substate.ECONFLICT,
			"source id %s was already accepted with a different body (stored at %s sequence %d): a redelivery must repeat the body, a new event needs a new id",
			substate.QuotePrefix(ev.ID, substate.QuoteLimit), substate.StreamRaw, seq)
	}
	return true, nil
}

// sameJSON reports whether two bodies are the same JSON text, ignoring
// insignificant whitespace (one event alone and the same event inside an
// array may be laid out differently).
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
