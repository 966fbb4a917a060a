package publishers

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/tracing"
)

// Defaults of a ChangeFeed.
const (
	DefaultFeedWindow     = 1024
	DefaultFeedAckTimeout = 10 * time.Second
	DefaultFeedRetryDelay = time.Second
)

// ChangeFeed drains a view's change outbox into the stream SUBSTATE_CHANGES:
// every change the view committed is published on its ChangeSubject with
// Nats-Msg-Id = its sequence, and removed from the outbox only after the
// server acknowledged it. A crash before the removal publishes it again
// after the restart, which the stream drops as a duplicate inside its
// dedupe window: no change is lost and none is stored twice.
//
// Per-tenant order: a round publishes the oldest change of each tenant
// among the outbox's oldest Window changes, and the next round starts only
// after every publish of this one was acknowledged or failed, so a
// tenant's change is stored only after its previous one was.
type ChangeFeed struct {
	JetStream jetstream.JetStream
	Outbox    substate.ChangeOutbox
	// Window caps the changes of one round; 0 means DefaultFeedWindow.
	Window int
	// AckTimeout bounds the wait for a round's acknowledgements; 0 means
	// DefaultFeedAckTimeout.
	AckTimeout time.Duration
	// RetryDelay is the pause after a failed round; 0 means
	// DefaultFeedRetryDelay.
	RetryDelay time.Duration
	// Published, when set, is called with the number of changes each round
	// stored (a metric).
	Published func(n int)
	// SchemaBase is the worker's base URL: changes carry the change schema
	// there as their dataschema (substate.SchemaURL).
	SchemaBase string
	// Tracer, when set, makes a span of each change's publish (nil: no
	// tracing).
	Tracer *tracing.Tracer
	Logger *slog.Logger

	// fault, in tests, is called at each step of a round; an error
	// abandons the round there, as a crash would.
	fault func(step string, n int) error

	ackOnce sync.Once
	acks    *acks // on JetStream's connection
}

// Steps of a round that a test can fail at.
const (
	stepPublishing = "publishing" // n changes of the round were sent
	stepAcked      = "acked"      // every change was acknowledged, none removed yet
)

// Run drains the outbox until ctx is done: at once, after every commit
// that wrote changes, and once a second in case a signal was missed.
func (f *ChangeFeed) Run(ctx context.Context) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		n, err := f.Drain(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			f.logger().Warn("change feed publish failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(cmp.Or(f.RetryDelay, DefaultFeedRetryDelay)):
			}
			continue
		case n > 0:
			continue // there may be more
		}
		select {
		case <-ctx.Done():
			return nil
		case <-f.Outbox.ChangesWaiting():
		case <-tick.C:
		}
	}
}

// Drain publishes one round of the outbox's oldest changes and removes
// those the server acknowledged; it returns how many it removed.
func (f *ChangeFeed) Drain(ctx context.Context) (int, error) {
	pending, err := f.Outbox.PendingChanges(ctx, cmp.Or(f.Window, DefaultFeedWindow))
	if err != nil || len(pending) == 0 {
		return 0, err
	}
	round := onePerTenant(pending)
	acked, err := f.publish(ctx, round)
	if len(acked) > 0 {
		if ferr := f.fail(stepAcked, len(acked)); ferr != nil {
			return 0, ferr
		}
		if rerr := f.Outbox.RemoveChanges(ctx, acked); rerr != nil {
			return 0, errors.Join(err, rerr)
		}
		if f.Published != nil {
			f.Published(len(acked))
		}
	}
	return len(acked), err
}

// onePerTenant returns the first change of each tenant, in order: a
// later change of a tenant waits for the next round.
func onePerTenant(changes []substate.Change) []substate.Change {
	seen := make(map[string]bool, len(changes))
	out := changes[:0]
	for _, c := range changes {
		if !seen[c.TenantID] {
			seen[c.TenantID] = true
			out = append(out, c)
		}
	}
	return out
}

// publish sends the round, then awaits its acknowledgements, and returns
// the changes the server acknowledged (stored or found a duplicate), with
// the first error. They are gathered at the front of round, which the
// caller does not use again.
func (f *ChangeFeed) publish(ctx context.Context, round []substate.Change) ([]substate.Change, error) {
	a := f.changeAcks()
	r, err := a.round(len(round))
	if err != nil {
		return nil, err
	}
	var spans tracing.Spans // one a change sent, when tracing is on
	defer func() { spans.End(errNotAcked) }()
	sent, sendErr := 0, error(nil)
	var b msgBuilder // one message, sent before the next is built
	for i := range round {
		if err := f.fail(stepPublishing, i); err != nil {
			a.wait(ctx, r, 0, 0) // forget the round
			return nil, err
		}
		if err := b.change(&round[i], f.SchemaBase); err != nil {
			sendErr = err
			break
		}
		spans = f.Tracer.PublishChange(spans, &round[i], b.m)
		if err := a.publish(r, i, b.m); err != nil {
			sendErr = unavailable(err, "publish change")
			spans.EndAt(i, sendErr)
			break
		}
		sent++
	}
	timeout := cmp.Or(f.AckTimeout, DefaultFeedAckTimeout)
	acked := round[:0] // in place: the i-th answer's change is at i or later
	var ackErr error
	for i, res := range a.wait(ctx, r, sent, timeout) {
		switch {
		case res.answered && res.Err == nil:
			acked = append(acked, round[i])
			spans.EndAt(i, nil)
		case res.answered:
			ackErr = cmp.Or(ackErr, res.Err)
			spans.EndAt(i, ackErr)
		case ctx.Err() != nil:
			return acked, ctx.Err()
		default:
			var late error = substate.Errorf(substate.EUNAVAILABLE, "publish change: no acknowledgement within %s", timeout)
			return acked, cmp.Or(ackErr, late)
		}
	}
	return acked, cmp.Or(ackErr, sendErr)
}

// changeAcks returns the collector of the feed's acknowledgements.
func (f *ChangeFeed) changeAcks() *acks {
	f.ackOnce.Do(func() { f.acks = newAcks(f.JetStream.Conn()) })
	return f.acks
}

// errNotAcked ends the span of a change whose publish was not
// acknowledged within the round.
var errNotAcked = substate.Errorf(substate.EUNAVAILABLE, "publish change: not acknowledged")

// ChangeMsg is the change-feed message of a change: a structured
// CloudEvent on its ChangeSubject, with its sequence as Nats-Msg-Id and
// the traceparent of the event that made it.
func ChangeMsg(c *substate.Change, schemaBase string) (*nats.Msg, error) {
	var b msgBuilder
	if err := b.change(c, schemaBase); err != nil {
		return nil, err
	}
	return b.m, nil
}

// change builds the change-feed message of c in b (see reuse).
func (b *msgBuilder) change(c *substate.Change, schemaBase string) error {
	e := substate.NewChangeEvent(*c, schemaBase) // as MarshalChangeEvent, keeping its id for the header
	body, err := substate.AppendChangeEvent(b.body[:0], &e)
	if err != nil {
		return substate.WrapError(substate.EINTERNAL, err, "encode change")
	}
	b.body = body
	b.reuse(substate.ChangeSubject(c), body, 3)
	b.set(substate.HeaderContentType, substate.CloudEventsMediaType)
	b.set(substate.HeaderMsgID, e.ID)
	if c.TraceParent != "" {
		b.set(substate.HeaderTraceParent, c.TraceParent)
	}
	return nil
}

func (f *ChangeFeed) fail(step string, n int) error {
	if f.fault == nil {
		return nil
	}
	return f.fault(step, n)
}

func (f *ChangeFeed) logger() *slog.Logger {
	return cmp.Or(f.Logger, slog.New(slog.DiscardHandler))
}
