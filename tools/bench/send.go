package bench

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/timex"
	"github.com/substatehq/substate/publishers"
)

// sender publishes a load's raw events on SUBSTATE_RAW as the ingress does
// (the same subject, id and headers), with many publishes in flight the way
// concurrent provider deliveries are, and records when each status change
// was first sent.
type sender struct {
	pub   *publishers.JetStream
	load  benchLoad
	probe *viewProbe // nil when nothing applies the events (ingest alone)
	// window bounds the events sent but not yet handed to the view: a
	// closed loop that measures the pipeline at saturation without an
	// ever-growing backlog. 0 means no bound.
	window int
	// rate, when positive, paces the sends at that many events a second.
	rate float64
	// inflight bounds the publishes awaiting their acknowledgement.
	inflight int

	base       int64 // events the view had been handed before this sender
	toView     int64 // events sent that reach the view (not dropped as duplicates)
	duplicates int   // publishes JetStream acknowledged as duplicates
	bytes      int64 // raw bytes sent
	pending    []jetstream.PubAckFuture
}

// send publishes the events in order and returns once every publish is
// acknowledged. stop, when it is done, ends the sending early.
func (s *sender) send(ctx context.Context, events []benchEvent, stop <-chan time.Time) (int, error) {
	start := time.Now()
	for i, e := range events {
		select {
		case <-stop:
			return i, s.flush(ctx, 0)
		default:
		}
		if err := s.wait(ctx, i, start); err != nil {
			return i, err
		}
		raw := s.load.raw(e, make([]byte, 0, 1024)) // the client may keep it to resend
		if s.probe != nil {
			s.probe.markSent(e.key(), time.Now())
		}
		f, err := s.pub.PublishRawAsync(raw)
		if err != nil {
			return i, err
		}
		s.pending = append(s.pending, f)
		s.bytes += int64(len(raw.Body))
		if !e.sameID || e.redelivery == 0 {
			s.toView++
		}
		if len(s.pending) >= s.inflight {
			if err := s.flush(ctx, s.inflight/2); err != nil {
				return i, err
			}
		}
	}
	return len(events), s.flush(ctx, 0)
}

// wait holds the i-th send back while the window is full or, with a rate,
// until its time has come.
func (s *sender) wait(ctx context.Context, i int, start time.Time) error {
	if s.rate > 0 {
		due := start.Add(time.Duration(float64(i) / s.rate * float64(time.Second)))
		if d := time.Until(due); d > time.Millisecond {
			if err := timex.Sleep(ctx, d); err != nil {
				return err
			}
		}
	}
	for s.window > 0 && s.probe != nil && s.toView-(s.probe.events.Load()-s.base) >= int64(s.window) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.probe.progress:
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// flush awaits the oldest acknowledgements until at most keep are pending.
func (s *sender) flush(ctx context.Context, keep int) error {
	n := max(len(s.pending)-keep, 0)
	for _, f := range s.pending[:n] {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				s.duplicates++
			}
		case err := <-f.Err():
			return substate.WrapError(substate.EUNAVAILABLE, err, "bench: publish raw event")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.pending = append(s.pending[:0], s.pending[n:]...)
	return nil
}
