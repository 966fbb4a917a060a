package consumers

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// Forwarder is a durable pull consumer on SUBSTATE_EVENTS that forwards
// canonical events to another bus (an Amazon EventBridge event bus). It has
// its own consumer, so an outage of that bus delays only the forwarding,
// never the view; a batch is acknowledged after the bus accepted it and
// retried with growing delays, then dead-lettered, when it does not.
type Forwarder struct {
	Consumer    jetstream.Consumer
	Publisher   substate.EventPublisher
	DeadLetters substate.DeadLetterPublisher
	Retry       Retry
	BatchSize   int           // 0 means 100
	Linger      time.Duration // a batch ends when this passes without a message; 0 means 2 ms
	LingerMax   time.Duration // a small batch waits at most this long after its first; 0 means 2 ms
	Metrics     *Metrics
	Logger      *slog.Logger

	dlq stageDLQ
}

// Run forwards until ctx is done, then finishes the batch in hand.
func (f *Forwarder) Run(ctx context.Context) error {
	f.dlq = stageDLQ{stage: substate.StageForward, pub: f.DeadLetters, retry: f.Retry, metrics: f.Metrics, log: f.logger()}
	p := puller{consumer: f.Consumer, batchSize: cmp.Or(f.BatchSize, 100), linger: f.Linger, lingerMax: f.LingerMax, logger: f.logger()}
	return p.run(ctx, f.handle)
}

func (f *Forwarder) handle(ctx context.Context, batch []jetstream.Msg) {
	f.Metrics.observeBatch(substate.StageForward, len(batch))
	var msgs []jetstream.Msg
	var events []substate.Event
	for _, m := range batch {
		e, err := substate.UnmarshalEvent(m.Data())
		if err != nil {
			f.dlq.deadLetter(ctx, m, err)
			continue
		}
		msgs, events = append(msgs, m), append(events, e)
	}
	err := f.Publisher.PublishEvents(ctx, events)
	switch {
	case err == nil:
		for _, m := range msgs {
			f.dlq.ack(m)
		}
	case permanent(err):
		// Some event was refused for good: send them one by one so only
		// the refused ones are dead-lettered.
		for i, m := range msgs {
			f.forwardOne(ctx, m, events[i])
		}
	default:
		for _, m := range msgs {
			f.dlq.fail(ctx, m, err)
		}
	}
}

func (f *Forwarder) forwardOne(ctx context.Context, m jetstream.Msg, e substate.Event) {
	err := f.Publisher.PublishEvents(ctx, []substate.Event{e})
	switch {
	case err == nil:
		f.dlq.ack(m)
	case permanent(err):
		f.dlq.deadLetter(ctx, m, err)
	default:
		f.dlq.fail(ctx, m, err)
	}
}

// permanent reports an error that retrying cannot fix.
func permanent(err error) bool {
	switch substate.ErrorCode(err) {
	case substate.EINVALID, substate.ETOOLARGE:
		return true
	}
	return false
}

func (f *Forwarder) logger() *slog.Logger {
	return cmp.Or(f.Logger, slog.New(slog.DiscardHandler))
}
