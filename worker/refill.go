package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/replay"
)

// refillLookback is how long before the last event SUBSTATE_EVENTS still
// holds ahead of a loss the raw messages mapped again after the loss
// begin: the normalizer may publish a raw message's events after later
// ones' (a redelivery), as the evidence search allows for too.
const refillLookback = time.Hour

// refill maps again, from SUBSTATE_RAW, the events a loss took from
// SUBSTATE_EVENTS, and publishes those the stream does not hold (a
// replay.Renormalizer: what "substate renormalize --since" does): the raw
// messages stored from refillLookback before the last event the stream
// still holds ahead of the loss, every one when it holds none. Without
// this a rebuild would fold only what is left, and the view and verify
// would agree on tenants the stream no longer knows about.
func (w *Worker) refill(ctx context.Context, loss *streamLoss) error {
	if !loss.refill {
		return nil
	}
	since, err := w.refillSince(ctx, loss)
	if err != nil {
		return err
	}
	rules, err := mapping.ParseTenantRules(w.Flags.TenantRule...)
	if err != nil {
		return err
	}
	r := &replay.Renormalizer{
		Reader: &replay.Reader{JS: w.Bus.JetStream}, Mapper: mapping.New(mapping.Config{Tenants: rules}),
		EventID: mapping.EventID, Events: publishers.NewJetStream(w.Bus.JetStream),
	}
	res, err := r.Run(ctx, replay.Range{Since: since})
	if err != nil {
		return fmt.Errorf("map %s again after the loss of events: %w", substate.StreamRaw, err)
	}
	w.Logger.Warn("mapped "+substate.StreamRaw+" again to refill what "+substate.StreamEvents+" lost",
		"since", since, "raw", res.Raw, "raw_first", res.FirstSeq, "raw_last", res.LastSeq, "events", res.Mapped,
		"still_held", res.Present, "published", res.Published, "rejected", res.Rejected)
	return nil
}

// refillSince is where the raw messages to map again begin: refillLookback
// before the last event ahead of the loss was stored; zero (every raw
// message) when there is none or it cannot be read.
func (w *Worker) refillSince(ctx context.Context, loss *streamLoss) (time.Time, error) {
	if loss.after == 0 {
		return time.Time{}, nil
	}
	m, err := (&replay.Reader{JS: w.Bus.JetStream}).Get(ctx, substate.StreamEvents, loss.after)
	switch {
	case substate.ErrorCode(err) == substate.ENOTFOUND:
		return time.Time{}, nil
	case err != nil:
		return time.Time{}, err
	}
	return m.Stored.Add(-refillLookback), nil
}

// refuseHint is what an operator does about a loss the worker refuses to
// start on.
func (w *Worker) refuseHint(ctx context.Context, loss *streamLoss) string {
	rebuild := fmt.Sprintf("with the worker stopped, rebuild the view from what the stream holds with: substate rebuild --out %s --force, or start with --on-stream-loss=rebuild", w.View.Path)
	if !loss.refill {
		return rebuild
	}
	since, err := w.refillSince(ctx, loss)
	flag := ""
	if err == nil && !since.IsZero() {
		flag = " --since " + since.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%s may still hold the lost events' evidence: map it again with: substate renormalize%s, once a worker runs (substate verify names what is still missing), or start with --on-stream-loss=rebuild, which does so when it finds the loss; to go on without them, %s",
		substate.StreamRaw, flag, rebuild)
}
