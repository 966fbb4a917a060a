package consumers

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// Retry is the redelivery policy for transient failures: a message is handed
// back with a delay of Base × 2^(deliveries-1), capped at Max, and
// dead-lettered once it has been delivered MaxDeliveries times.
type Retry struct {
	Base          time.Duration // 0 means 1 s
	Max           time.Duration // 0 means 1 min
	MaxDeliveries int           // 0 means 10
}

// Delay returns the redelivery delay after the given number of deliveries.
func (r Retry) Delay(deliveries uint64) time.Duration {
	base, limit := r.Base, r.Max
	if base <= 0 {
		base = time.Second
	}
	if limit <= 0 {
		limit = time.Minute
	}
	d := base
	for i := uint64(1); i < deliveries && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

func (r Retry) maxDeliveries() uint64 {
	if r.MaxDeliveries <= 0 {
		return 10
	}
	return uint64(r.MaxDeliveries)
}

// fail handles a transient failure of msg: a delayed redelivery, or the
// dead-letter stream once its deliveries are used up.
func (r Retry) fail(ctx context.Context, msg jetstream.Msg, stage string, err error, dlq substate.DeadLetterPublisher, m *Metrics, log *slog.Logger) {
	meta, merr := msg.Metadata()
	if merr == nil && meta.NumDelivered >= r.maxDeliveries() {
		err = substate.WrapError(substate.EUNAVAILABLE, err, "gave up after %d deliveries", meta.NumDelivered)
		r.deadLetter(ctx, msg, stage, err, dlq, m, log)
		return
	}
	var deliveries uint64 = 1
	if merr == nil {
		deliveries = meta.NumDelivered
	}
	delay := r.Delay(deliveries)
	log.Warn("transient failure, redelivering later", "stage", stage, "subject", msg.Subject(), "deliveries", deliveries, "delay", delay, "err", err)
	m.countNak(stage)
	if nerr := msg.NakWithDelay(delay); nerr != nil {
		log.Warn("nak failed; the message is redelivered after the ack wait", "err", nerr)
	}
}

// deadLetter stores msg on the dead-letter stream with the reason and acks
// it once that store is acknowledged. If the dead-letter stream cannot take
// it either, the message is handed back for a later attempt: never dropped.
func (r Retry) deadLetter(ctx context.Context, msg jetstream.Msg, stage string, err error, dlq substate.DeadLetterPublisher, m *Metrics, log *slog.Logger) {
	if perr := storeDeadLetter(ctx, msg, stage, err, dlq, m, log); perr != nil {
		if nerr := msg.NakWithDelay(r.Delay(1)); nerr != nil {
			log.Warn("nak failed; the message is redelivered after the ack wait", "err", nerr)
		}
		return
	}
	ack(msg, log)
}

// storeDeadLetter stores msg on the dead-letter stream with the reason and
// counts it; acknowledging msg is the caller's. It returns the error of a
// dead-letter publish that failed.
func storeDeadLetter(ctx context.Context, msg jetstream.Msg, stage string, err error, dlq substate.DeadLetterPublisher, m *Metrics, log *slog.Logger) error {
	d := substate.DeadLetter{Stage: stage, Reason: reason(err), Subject: msg.Subject(), Body: msg.Data(), Header: msg.Headers()}
	if meta, merr := msg.Metadata(); merr == nil {
		d.Seq = meta.Sequence.Stream
	}
	if perr := dlq.PublishDeadLetter(ctx, d); perr != nil {
		log.Error("dead-letter publish failed, redelivering later", "stage", stage, "subject", msg.Subject(), "err", perr)
		return perr
	}
	log.Warn("dead-lettered", "stage", stage, "subject", msg.Subject(), "seq", d.Seq, "reason", d.Reason)
	m.countDeadLetter(stage, substate.ErrorCode(err))
	return nil
}
