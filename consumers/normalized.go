package consumers

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Normalized says how far the normalizer has come in SUBSTATE_RAW, so
// that the deadline loop does not report stuck a tenant whose move on was
// accepted but is not yet normalized: the normalizer behind, draining a
// backlog after a restart, or down in another process.
type Normalized struct {
	Raw      jetstream.Stream // SUBSTATE_RAW
	Consumer string           // the normalizer's durable consumer on it
}

// normalizedUpTo returns a time up to which every raw message stored has
// been normalized: just before the stored time of the first message the
// normalizer has not acknowledged (the first after its consumer's ack
// floor, see OldestUnprocessed), and never after now or the server's time
// of the consumer's info. Under a steady ingest the raw stream is never
// caught up with, so the answer is a time, not "nothing pending". It
// takes one consumer info and one direct get per filter subject.
func (n *Normalized) normalizedUpTo(ctx context.Context, now time.Time) (time.Time, error) {
	c, err := n.Raw.Consumer(ctx, n.Consumer)
	if err != nil {
		return time.Time{}, fmt.Errorf("read consumer %s: %w", n.Consumer, err)
	}
	info := c.CachedInfo()
	upTo := now
	if ts := info.TimeStamp; !ts.IsZero() && ts.Before(upTo) {
		upTo = ts // the server's clock, which stores the raw messages' times
	}
	first, err := OldestUnprocessed(ctx, n.Raw, info)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the first message after %s's ack floor: %w", n.Consumer, err)
	}
	if !first.IsZero() && first.Add(-time.Nanosecond).Before(upTo) {
		upTo = first.Add(-time.Nanosecond) // a deadline at its stored time waits for it
	}
	return upTo, nil
}
