package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/substatehq/substate"
)

// rawEvent wraps an engine event as the raw event published for it.
func rawEvent(ev substate.EngineEvent) (substate.RawEvent, error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return substate.RawEvent{}, err
	}
	return substate.RawEvent{Kind: substate.RawEngine, ID: ev.ID, Body: body}, nil
}

// flush publishes rec's pending events in order, retrying each until the
// publisher acknowledges it, then records that nothing is pending. It
// returns an error only when ctx ends first.
func (e *Engine) flush(ctx context.Context, rec *record) error {
	if len(rec.Pending) == 0 {
		return nil
	}
	for _, ev := range rec.Pending {
		if err := e.publish(ctx, ev); err != nil {
			return err
		}
	}
	rec.Pending = nil
	if err := e.db.putExecution(rec); err != nil {
		// The events are out; a restart would only publish them again
		// under the same ids, which JetStream drops as duplicates.
		e.Logger.Warn("record published events", "execution", rec.ID, "err", err)
	}
	return nil
}

// publish publishes one event, retrying with a growing pause (real time:
// this waits for NATS, not for the workflow) until it succeeds or ctx ends.
func (e *Engine) publish(ctx context.Context, ev substate.EngineEvent) error {
	raw, err := rawEvent(ev)
	if err != nil {
		return err
	}
	pause := 100 * time.Millisecond
	for {
		err := e.Publisher.PublishRaw(ctx, raw)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.Logger.Warn("publish engine event; retrying", "id", ev.ID, "err", err, "in", pause)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		pause = min(pause*2, 5*time.Second)
	}
}
