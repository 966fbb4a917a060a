package publishers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// JetStream publishes substate's messages on JetStream and waits for the
// server's acknowledgement, so a nil error means the message is stored.
type JetStream struct {
	JS jetstream.JetStream
	// MaxInFlight bounds the asynchronous publishes of one PublishEvents
	// call that await their acknowledgement; 0 means 1024.
	MaxInFlight int
	// Now stamps the received-at header of raw events.
	Now func() time.Time
	// SchemaBase is the worker's base URL (SchemaURL): events without a
	// dataschema get the event schema there. Empty leaves them without.
	SchemaBase string
	// AckTimeout bounds the wait for a round of PublishEvents'
	// acknowledgements, and for StoreRaw's; 0 means DefaultAckTimeout.
	AckTimeout time.Duration

	raw     atomic.Pointer[jetstream.Stream] // SUBSTATE_RAW, looked up once by RawBody
	ackOnce sync.Once
	acks    *acks // PublishEvents' and StoreRaw's acknowledgements, on JS's connection
}

// DefaultAckTimeout is how long a publish waits for the server's
// acknowledgement before it counts as failed (and is retried: its
// Nats-Msg-Id makes the retry harmless).
const DefaultAckTimeout = 10 * time.Second

var (
	_ substate.RawPublisher        = (*JetStream)(nil)
	_ substate.EventPublisher      = (*JetStream)(nil)
	_ substate.DeadLetterPublisher = (*JetStream)(nil)
)

// NewJetStream returns a publisher on js with the default settings.
func NewJetStream(js jetstream.JetStream) *JetStream {
	return &JetStream{JS: js, MaxInFlight: 1024, Now: time.Now}
}

// PublishRaw publishes a raw provider payload on substate.raw.<kind> with
// the provider's event id as Nats-Msg-Id. A payload whose id the server
// already holds is acknowledged as a duplicate and stored once.
func (p *JetStream) PublishRaw(ctx context.Context, ev substate.RawEvent) error {
	_, _, err := p.StoreRaw(ctx, ev)
	return err
}

// StoreRaw publishes a raw event as PublishRaw does and returns the
// sequence of SUBSTATE_RAW that holds its id, and whether that message was
// there already: JetStream dropped this one as a duplicate (within the
// duplicate window) and answered with the sequence of the first.
//
// The answer is awaited on the connection's acknowledgement collector (a
// round of one), as PublishEvents awaits its rounds, not with a request
// of its own: the ingress stores every accepted delivery this way.
func (p *JetStream) StoreRaw(ctx context.Context, ev substate.RawEvent) (uint64, bool, error) {
	b := rawBuilders.Get().(*msgBuilder)
	defer putRawBuilder(b)
	if err := p.rawMsg(b, ev); err != nil {
		return 0, false, err
	}
	m := b.m
	a := p.eventAcks()
	r, err := a.round(1)
	if err != nil {
		return 0, false, err
	}
	sent := 1
	if err := a.publish(r, 0, m); err != nil {
		a.wait(ctx, r, 0, 0) // forget the round
		return 0, false, unavailable(err, "publish raw event")
	}
	res := a.wait(ctx, r, sent, p.ackTimeout())
	if err := p.settled(ctx, res, "publish raw event"); err != nil {
		return 0, false, err
	}
	return res[0].Seq, res[0].Duplicate, nil
}

// RawBody returns the body of the message at seq in SUBSTATE_RAW. The
// ingress calls it for every repeated id, so the stream is looked up once
// and each call is one direct get.
func (p *JetStream) RawBody(ctx context.Context, seq uint64) ([]byte, error) {
	s, err := p.rawStream(ctx)
	if err != nil {
		return nil, unavailable(err, "read raw stream")
	}
	m, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, substate.WrapError(substate.ENOTFOUND, err, "raw message %d", seq)
	} else if err != nil {
		p.raw.Store(nil) // the stream may have been created again: look it up anew
		return nil, unavailable(err, "read raw message")
	}
	return m.Data, nil
}

// rawStream returns SUBSTATE_RAW, looked up on first use.
func (p *JetStream) rawStream(ctx context.Context) (jetstream.Stream, error) {
	if s := p.raw.Load(); s != nil {
		return *s, nil
	}
	s, err := p.JS.Stream(ctx, substate.StreamRaw)
	if err != nil {
		return nil, err
	}
	p.raw.Store(&s)
	return s, nil
}

// RawRound is a round of raw publishes awaited together: a caller that
// keeps many raw events in flight (a load generator, a bulk import)
// publishes each without waiting and then awaits them all at once, on the
// connection's acknowledgement collector as StoreRaw is. A round is used by
// one goroutine.
type RawRound struct {
	p    *JetStream
	a    *acks
	r    *ackRound
	sent int
	b    msgBuilder // each message is sent before the next is built
}

// NewRawRound starts a round of at most n raw publishes.
func (p *JetStream) NewRawRound(n int) (*RawRound, error) {
	a := p.eventAcks()
	r, err := a.round(n)
	if err != nil {
		return nil, err
	}
	return &RawRound{p: p, a: a, r: r}, nil
}

// Len is how many raw events the round has sent.
func (rr *RawRound) Len() int { return rr.sent }

// Publish sends ev as PublishRaw does, without waiting for its answer. An
// event past the round's size is an EINVALID error.
func (rr *RawRound) Publish(ev substate.RawEvent) error {
	if rr.sent >= len(rr.r.results) {
		return substate.Errorf(substate.EINVALID, "raw round: full at %d events", rr.sent)
	}
	if err := rr.p.rawMsg(&rr.b, ev); err != nil {
		return err
	}
	if err := rr.a.publish(rr.r, rr.sent, rr.b.m); err != nil {
		return unavailable(err, "publish raw event")
	}
	rr.sent++
	return nil
}

// Wait awaits the answers to every event sent, and returns how many were
// duplicates of one stored before: an error when any was refused or left
// without an answer. A round is waited for once.
func (rr *RawRound) Wait(ctx context.Context) (duplicates int, err error) {
	res := rr.a.wait(ctx, rr.r, rr.sent, rr.p.ackTimeout())
	if err := rr.p.settled(ctx, res, "publish raw event"); err != nil {
		return 0, err
	}
	for _, r := range res {
		if r.Duplicate {
			duplicates++
		}
	}
	return duplicates, nil
}

// rawMsg builds in b (see reuse) the message of a raw event: its body,
// its evidence headers, the id to deduplicate on and the time it was
// received.
func (p *JetStream) rawMsg(b *msgBuilder, ev substate.RawEvent) error {
	if ev.ID == "" {
		return substate.Errorf(substate.EINVALID, "raw event has no id")
	}
	b.reuse(substate.RawSubject(ev.Kind), ev.Body, len(ev.Header)+2)
	for k, v := range ev.Header {
		b.set(k, v)
	}
	b.set(substate.HeaderMsgID, ev.ID)
	b.set(substate.HeaderReceivedAt, p.Now().UTC().Format(time.RFC3339Nano))
	return nil
}

// rawBuilders keep the messages of StoreRaw, which every ingress request
// calls, between calls: a message is sent before StoreRaw waits for its
// answer, so it is free again when StoreRaw returns.
var rawBuilders = sync.Pool{New: func() any { return new(msgBuilder) }}

// putRawBuilder returns b to rawBuilders holding none of its last event:
// neither its body nor its header values (evidence headers can carry a
// provider's signature).
func putRawBuilder(b *msgBuilder) {
	if b.m != nil {
		clear(b.vals[:cap(b.vals)])
		b.reuse("", nil, 0)
	}
	rawBuilders.Put(b)
}

// PublishEvents publishes canonical events as structured CloudEvents on
// substate.events.<tenant> in rounds of at most MaxInFlight, each sent
// whole before its acknowledgements are awaited, and returns once every
// one is acknowledged: stored, or found a duplicate of one stored.
func (p *JetStream) PublishEvents(ctx context.Context, events []substate.Event) error {
	limit := p.MaxInFlight
	if limit <= 0 {
		limit = 1024
	}
	for len(events) > 0 {
		n := min(limit, len(events))
		if err := p.publishRound(ctx, events[:n]); err != nil {
			return err
		}
		events = events[n:]
	}
	return nil
}

// publishRound sends events and awaits their acknowledgements.
func (p *JetStream) publishRound(ctx context.Context, events []substate.Event) error {
	a := p.eventAcks()
	r, err := a.round(len(events))
	if err != nil {
		return err
	}
	sent, sendErr := 0, error(nil)
	var b msgBuilder // one message, sent before the next is built
	for i := range events {
		err := p.eventMsg(&b, &events[i])
		if err == nil {
			err = a.publish(r, i, b.m)
			if err != nil {
				err = unavailable(err, "publish event")
			}
		}
		if err != nil {
			sendErr = err
			break
		}
		sent++
	}
	if err := p.settled(ctx, a.wait(ctx, r, sent, p.ackTimeout()), "publish event"); err != nil {
		return err
	}
	return sendErr
}

// ackTimeout is how long a round waits for its acknowledgements.
func (p *JetStream) ackTimeout() time.Duration { return cmp.Or(p.AckTimeout, DefaultAckTimeout) }

// settled returns nil when the server stored every message of results
// (or found it a duplicate), otherwise the first refusal, ctx's error, or
// an EUNAVAILABLE error for a message left without an answer.
func (p *JetStream) settled(ctx context.Context, results []pubResult, op string) error {
	for _, res := range results {
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case res.Err != nil:
			return res.Err
		case !res.answered:
			return substate.Errorf(substate.EUNAVAILABLE, "%s: no acknowledgement within %s", op, p.ackTimeout())
		}
	}
	return nil
}

// eventAcks returns the collector of the acknowledgements of
// PublishEvents and StoreRaw.
func (p *JetStream) eventAcks() *acks {
	p.ackOnce.Do(func() { p.acks = newAcks(p.JS.Conn()) })
	return p.acks
}

// eventMsg builds in b (see reuse) the message of a canonical event: the
// structured CloudEvent, its id to deduplicate on, the raw evidence it was
// mapped from and the hop's trace context.
func (p *JetStream) eventMsg(b *msgBuilder, e *substate.Event) error {
	if e.DataSchema == "" {
		e.DataSchema = substate.SchemaURL(p.SchemaBase, substate.EventSchema)
	}
	body, err := substate.AppendEvent(b.body[:0], e)
	if err != nil {
		return fmt.Errorf("encode event %s: %w", e.ID, err)
	}
	b.body = body
	b.reuse(substate.EventsSubject(e.Data.TenantID), body, 5)
	b.set(substate.HeaderMsgID, e.ID)
	b.set(substate.HeaderContentType, substate.CloudEventsMediaType)
	if e.Raw.Seq > 0 {
		b.set(substate.HeaderRawSeq, strconv.FormatUint(e.Raw.Seq, 10))
	}
	if e.Raw.ID != "" {
		b.set(substate.HeaderRawID, e.Raw.ID)
	}
	if tp := cmp.Or(e.Hop, e.TraceParent); tp != "" {
		b.set(substate.HeaderTraceParent, tp) // the hop's context; the body keeps the trace's start
	}
	return nil
}

// PublishDeadLetter stores d on substate.dlq.<stage> with its original
// headers and the reason, stage, subject and sequence as headers. A dead
// letter of a stream message has a deterministic id, so dead-lettering it
// twice (after a crash) keeps one copy.
func (p *JetStream) PublishDeadLetter(ctx context.Context, d substate.DeadLetter) error {
	m := nats.NewMsg(substate.DLQSubject(d.Stage))
	m.Data = d.Body
	for k, vs := range d.Header {
		if k == substate.HeaderMsgID {
			k = substate.HeaderOriginalMsgID // keep it without deduplicating on it
		}
		m.Header[k] = append([]string(nil), vs...)
	}
	m.Header.Set(substate.HeaderDLQReason, d.Reason)
	m.Header.Set(substate.HeaderDLQStage, d.Stage)
	m.Header.Set(substate.HeaderDLQSubject, d.Subject)
	if d.Seq > 0 {
		m.Header.Set(substate.HeaderDLQSeq, strconv.FormatUint(d.Seq, 10))
		m.Header.Set(substate.HeaderMsgID, d.Stage+"/"+d.Subject+"/"+strconv.FormatUint(d.Seq, 10))
	}
	if d.ID != "" {
		m.Header.Set(substate.HeaderMsgID, d.ID)
	}
	if _, err := p.JS.PublishMsg(ctx, m); err != nil {
		return unavailable(err, "publish dead letter")
	}
	return nil
}

// unavailable marks a publish failure as EUNAVAILABLE unless the server
// rejected the message itself.
func unavailable(err error, op string) error {
	if errors.Is(err, nats.ErrMaxPayload) {
		return substate.WrapError(substate.ETOOLARGE, err, "%s: message too large for the nats server", op)
	}
	return substate.WrapError(substate.EUNAVAILABLE, err, "%s", op)
}
