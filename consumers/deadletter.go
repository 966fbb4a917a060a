package consumers

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// stageDLQ is how one stage gives up on a message, bound once when the
// stage starts (like watermill's poison-queue middleware, which binds its
// publisher and topic once): the stage's name, where its dead letters go,
// the redelivery policy of its transient failures, its metrics and its
// logger. The zero retry policy is the defaults of Retry.
type stageDLQ struct {
	stage   string
	pub     substate.DeadLetterPublisher
	retry   Retry
	metrics *Metrics
	log     *slog.Logger
}

// fail handles a transient failure of msg: a delayed redelivery, or the
// dead-letter stream once its deliveries are used up.
func (d stageDLQ) fail(ctx context.Context, msg jetstream.Msg, err error) {
	meta, merr := msg.Metadata()
	if merr == nil && meta.NumDelivered >= d.retry.maxDeliveries() {
		err = substate.WrapError(substate.EUNAVAILABLE, err, "gave up after %d deliveries", meta.NumDelivered)
		d.deadLetter(ctx, msg, err)
		return
	}
	var deliveries uint64 = 1
	if merr == nil {
		deliveries = meta.NumDelivered
	}
	delay := d.retry.Delay(deliveries)
	d.log.Warn("transient failure, redelivering later", "stage", d.stage, "subject", msg.Subject(), "deliveries", deliveries, "delay", delay, "err", err)
	d.metrics.countNak(d.stage)
	if nerr := msg.NakWithDelay(delay); nerr != nil {
		d.log.Warn("nak failed; the message is redelivered after the ack wait", "err", nerr)
	}
}

// deadLetter stores msg on the dead-letter stream with the reason and acks
// it once that store is acknowledged. If the dead-letter stream cannot take
// it either, the message is handed back for a later attempt: never dropped.
func (d stageDLQ) deadLetter(ctx context.Context, msg jetstream.Msg, err error) {
	if d.storeOrNak(ctx, msg, err, "") {
		d.ack(msg)
	}
}

// storeOrNak stores msg on the dead-letter stream as store does and
// reports whether it was stored; when it was not, msg is handed back for a
// later attempt, never dropped.
func (d stageDLQ) storeOrNak(ctx context.Context, msg jetstream.Msg, err error, id string) bool {
	if d.store(ctx, msg, err, id) == nil {
		return true
	}
	if nerr := msg.NakWithDelay(d.retry.Delay(1)); nerr != nil {
		d.log.Warn("nak failed; the message is redelivered after the ack wait", "err", nerr)
	}
	return false
}

// store stores msg on the dead-letter stream with the reason and counts
// it; acknowledging msg is the caller's. A dead letter with an id is
// stored once within the stream's duplicate window, whatever message it
// holds; without one, the id is msg's stream sequence. It returns the
// error of a dead-letter publish that failed.
func (d stageDLQ) store(ctx context.Context, msg jetstream.Msg, err error, id string) error {
	dl := substate.DeadLetter{Stage: d.stage, Reason: substate.DeadLetterReason(err), Subject: msg.Subject(), Body: msg.Data(), Header: msg.Headers(), ID: id}
	if meta, merr := msg.Metadata(); merr == nil {
		dl.Seq = meta.Sequence.Stream
	}
	if perr := d.pub.PublishDeadLetter(ctx, dl); perr != nil {
		d.log.Error("dead-letter publish failed, redelivering later", "stage", d.stage, "subject", msg.Subject(), "err", perr)
		return perr
	}
	d.log.Warn("dead-lettered", "stage", d.stage, "subject", msg.Subject(), "seq", dl.Seq, "reason", dl.Reason)
	d.metrics.countDeadLetter(d.stage, substate.ErrorCode(err))
	return nil
}

// ack acknowledges msg; an ack that fails is logged, and the redelivery
// it leads to is deduplicated.
func (d stageDLQ) ack(msg jetstream.Msg) {
	if err := msg.Ack(); err != nil {
		d.log.Warn("ack failed; the message will be redelivered and deduplicated", "subject", msg.Subject(), "err", err)
	}
}
