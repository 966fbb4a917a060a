package bench

import (
	"context"
	"time"

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
	// The publishes awaiting their acknowledgement, in two rounds of up
	// to inflight/2: the one being sent and the one sent before it.
	current, previous *publishers.RawRound
}

// send publishes the events in order and returns once every publish is
// acknowledged. stop, when it is done, ends the sending early.
func (s *sender) send(ctx context.Context, events []benchEvent, stop <-chan time.Time) (int, error) {
	start := time.Now()
	for i, e := range events {
		select {
		case <-stop:
			return i, s.flush(ctx)
		default:
		}
		if err := s.wait(ctx, i, start); err != nil {
			return i, err
		}
		if err := s.turn(ctx); err != nil {
			return i, err
		}
		raw := s.load.raw(e, make([]byte, 0, 1024)) // the client may keep it to resend
		if s.probe != nil {
			s.probe.markSent(e.key(), time.Now())
		}
		if err := s.current.Publish(raw); err != nil {
			return i, err
		}
		s.bytes += int64(len(raw.Body))
		if !e.sameID || e.redelivery == 0 {
			s.toView++
		}
	}
	return len(events), s.flush(ctx)
}

// roundSize is how many publishes one round holds: half of what may be
// in flight, so one round is sent while the one before is answered.
func (s *sender) roundSize() int { return max(s.inflight/2, 1) }

// turn makes room for the next publish: once the current round is full,
// it awaits the round before it and starts a new one.
func (s *sender) turn(ctx context.Context) error {
	if s.current != nil && s.current.Len() < s.roundSize() {
		return nil
	}
	if err := s.settle(ctx, s.previous); err != nil {
		return err
	}
	s.previous = s.current
	r, err := s.pub.NewRawRound(s.roundSize())
	if err != nil {
		return err
	}
	s.current = r
	return nil
}

// settle awaits round r's acknowledgements and counts its duplicates.
func (s *sender) settle(ctx context.Context, r *publishers.RawRound) error {
	if r == nil {
		return nil
	}
	dup, err := r.Wait(ctx)
	if err != nil {
		return substate.WrapError(substate.EUNAVAILABLE, err, "bench: publish raw event")
	}
	s.duplicates += dup
	return nil
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

// flush awaits every publish still unanswered.
func (s *sender) flush(ctx context.Context) error {
	previous, current := s.previous, s.current
	s.previous, s.current = nil, nil
	if err := s.settle(ctx, previous); err != nil {
		return err
	}
	return s.settle(ctx, current)
}
