package main

import (
	"context"
	"time"

	"github.com/substatehq/substate/publishers"
)

// openChangeFeed sets up the publisher that drains the view's change
// outbox into SUBSTATE_CHANGES, unless --no-change-feed.
func (w *Worker) openChangeFeed(context.Context) error {
	if !w.Flags.ChangeFeed || w.View == nil {
		return nil
	}
	emitted := w.Metrics.ChangesEmitted
	w.changes = &publishers.ChangeFeed{
		JetStream: w.Bus.JetStream, Outbox: w.View,
		Published: func(n int) { emitted.Add(float64(n)) },
		Logger:    w.Logger.With("component", "changefeed"),
	}
	return nil
}

// changeFeedDrainTimeout bounds the last drain of the outbox on shutdown.
const changeFeedDrainTimeout = 5 * time.Second

// drainChangeFeed publishes what the projector's last commits left in the
// outbox before the worker stops. What it cannot publish stays in the
// outbox, durable, for the next start.
func (w *Worker) drainChangeFeed() {
	if w.changes == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), changeFeedDrainTimeout)
	defer cancel()
	for {
		n, err := w.changes.Drain(ctx)
		if err != nil {
			w.Logger.Warn("change feed not drained on shutdown; the rest is published at the next start", "err", err)
			return
		}
		if n == 0 {
			return
		}
	}
}
