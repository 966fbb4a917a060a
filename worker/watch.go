package worker

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate/consumers"
)

// The worker's watchers: actors of its run group that keep an eye on NATS,
// its store and its consumers.

// watchBus returns when the NATS connection closed on its own (see
// bus.Bus.Lost): the worker cannot do anything without it, so it exits
// non-zero and its supervisor restarts it.
func (w *Worker) watchBus(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-w.Bus.Lost():
		return w.Bus.LostErr()
	}
}

// watchStore lets the bus check the embedded server's store every second
// and recover it after a full disk (see bus.Bus.WatchStore).
func (w *Worker) watchStore(ctx context.Context) error { return w.Bus.WatchStore(ctx, time.Second) }

// watchBacklog measures SUBSTATE_RAW's unprocessed backlog (what the
// normalizer has not been given or not acknowledged) every second, for the
// ingress's admission control.
func (w *Worker) watchBacklog(ctx context.Context) error {
	return every(ctx, time.Second, func() {
		if info, err := w.Normalizer.Consumer.Info(ctx); err == nil {
			w.backlog.Store(info.NumPending + uint64(info.NumAckPending))
		}
	})
}

// lagEvery is how often watchLag looks at the consumers.
const lagEvery = 5 * time.Second

// watchLag updates the consumers' lag every few seconds: as a count of
// messages, and as the age of the oldest unprocessed one, found with one
// consumer info and one direct get by sequence per consumer.
func (w *Worker) watchLag(ctx context.Context) error {
	streams := map[string]jetstream.Stream{}
	return every(ctx, lagEvery, func() {
		for _, c := range w.pullConsumers() {
			info, err := c.Info(ctx)
			if err != nil {
				continue
			}
			w.Metrics.ConsumerLag.WithLabelValues(info.Name).Set(float64(info.NumPending + uint64(info.NumAckPending)))
			s := streams[info.Stream]
			if s == nil {
				if s, err = w.Bus.JetStream.Stream(ctx, info.Stream); err != nil {
					continue
				}
				streams[info.Stream] = s
			}
			if oldest, err := consumers.OldestUnprocessed(ctx, s, info); err == nil {
				w.Metrics.ConsumerAges.Set(info.Name, oldest)
			}
		}
	})
}

// every calls fn at once, then every period until ctx is done.
func every(ctx context.Context, period time.Duration, fn func()) error {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		fn()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
