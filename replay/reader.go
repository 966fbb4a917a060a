package replay

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// DefaultIdleTimeout is how long a read waits for a message the stream said
// would come before it takes the read as finished.
const DefaultIdleTimeout = 5 * time.Second

// Reader reads substate's streams in stream order.
type Reader struct {
	JS jetstream.JetStream
	// IdleTimeout ends a read when a message announced as pending does not
	// arrive (retention removed it meanwhile); 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
}

// Range bounds a read, all bounds inclusive. Sequences are stream
// sequences; times are when the stream stored a message. Zero values are
// unbounded. A read never goes past the stream's last sequence as of its
// start, so it ends even while a worker keeps publishing.
type Range struct {
	FromSeq, ToSeq uint64
	Since, Until   time.Time
}

// Message is one message stored in a stream.
type Message struct {
	Seq     uint64
	Subject string
	Stored  time.Time
	Header  nats.Header
	Data    []byte
}

// Event is one message of SUBSTATE_EVENTS with its canonical event decoded;
// Err says why a message is not a canonical event (the projector
// dead-letters such messages and so does not apply them).
type Event struct {
	Message
	Event substate.Event
	Err   error
}

// RawRef returns the link to the raw message the event was mapped from, as
// its headers give it; the zero RawRef when it has none.
func (m *Message) RawRef() substate.RawRef {
	seq, _ := strconv.ParseUint(m.Header.Get(substate.HeaderRawSeq), 10, 64)
	return substate.RawRef{Seq: seq, ID: m.Header.Get(substate.HeaderRawID)}
}

// Bounds returns a stream's first and last sequence and its message count.
func (r *Reader) Bounds(ctx context.Context, stream string) (first, last, msgs uint64, err error) {
	s, err := r.JS.Stream(ctx, stream)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("read %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("read %s: %w", stream, err)
	}
	return info.State.FirstSeq, info.State.LastSeq, info.State.Msgs, nil
}

// Events yields the canonical events of one tenant, or of every tenant when
// tenant is "", in stream order. An error is yielded once, last.
func (r *Reader) Events(ctx context.Context, tenant string, rg Range) iter.Seq2[Event, error] {
	var filter []string
	if tenant != "" {
		filter = []string{substate.EventsSubject(tenant)}
	}
	return func(yield func(Event, error) bool) {
		for m, err := range r.Messages(ctx, substate.StreamEvents, filter, rg) {
			if err != nil {
				yield(Event{}, err)
				return
			}
			e, derr := substate.UnmarshalEvent(m.Data)
			if !yield(Event{Message: m, Event: e, Err: derr}, nil) {
				return
			}
		}
	}
}

// Messages yields the messages of a stream whose subject matches one of
// filter (every message when filter is empty), in stream order. An error is
// yielded once, last.
func (r *Reader) Messages(ctx context.Context, stream string, filter []string, rg Range) iter.Seq2[Message, error] {
	return r.messages(ctx, stream, filter, rg, false)
}

// messages is Messages, with only the headers of each message when
// headersOnly is set.
func (r *Reader) messages(ctx context.Context, stream string, filter []string, rg Range, headersOnly bool) iter.Seq2[Message, error] {
	return func(yield func(Message, error) bool) {
		stopped := false
		err := r.read(ctx, stream, filter, rg, headersOnly, func(m Message) bool {
			stopped = !yield(m, nil)
			return !stopped
		})
		if err != nil && !stopped {
			yield(Message{}, err)
		}
	}
}

// read delivers the messages of rg to each until it returns false.
func (r *Reader) read(ctx context.Context, stream string, filter []string, rg Range, headersOnly bool, each func(Message) bool) error {
	s, err := r.JS.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("read %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return fmt.Errorf("read %s: %w", stream, err)
	}
	last := info.State.LastSeq
	if rg.ToSeq > 0 {
		last = min(last, rg.ToSeq)
	}
	if info.State.Msgs == 0 || last < max(rg.FromSeq, info.State.FirstSeq) {
		return nil
	}
	cfg := consumerConfig(filter, rg)
	cfg.HeadersOnly = headersOnly
	cons, err := s.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("read %s: %w", stream, err)
	}
	if ci := cons.CachedInfo(); ci != nil && ci.NumPending == 0 {
		return nil
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return fmt.Errorf("read %s: %w", stream, err)
	}
	defer it.Stop()
	defer context.AfterFunc(ctx, it.Stop)()
	return r.drain(ctx, it, rg, last, each)
}

// drain hands over the iterator's messages up to sequence last.
func (r *Reader) drain(ctx context.Context, it jetstream.MessagesContext, rg Range, last uint64, each func(Message) bool) error {
	idle := r.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	for {
		msg, err := it.Next(jetstream.NextMaxWait(idle))
		switch {
		case errors.Is(err, nats.ErrTimeout):
			return nil // announced messages are gone: nothing more to read
		case errors.Is(err, jetstream.ErrMsgIteratorClosed):
			return ctx.Err()
		case err != nil:
			return fmt.Errorf("read stream: %w", err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("read stream: %w", err)
		}
		seq := meta.Sequence.Stream
		if seq > last || (!rg.Until.IsZero() && meta.Timestamp.After(rg.Until)) {
			return nil
		}
		if meta.Timestamp.Before(rg.Since) {
			continue
		}
		m := Message{Seq: seq, Subject: msg.Subject(), Stored: meta.Timestamp, Header: msg.Headers(), Data: msg.Data()}
		if !each(m) || seq >= last || meta.NumPending == 0 {
			return nil
		}
	}
}

// consumerConfig starts an ordered consumer where rg starts.
func consumerConfig(filter []string, rg Range) jetstream.OrderedConsumerConfig {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: filter, DeliverPolicy: jetstream.DeliverAllPolicy}
	switch {
	case rg.FromSeq > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, rg.FromSeq
	case !rg.Since.IsZero():
		since := rg.Since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	return cfg
}

// Get returns the message at seq in stream, or an ENOTFOUND error when the
// stream no longer holds it.
func (r *Reader) Get(ctx context.Context, stream string, seq uint64) (Message, error) {
	s, err := r.JS.Stream(ctx, stream)
	if err != nil {
		return Message{}, fmt.Errorf("read %s: %w", stream, err)
	}
	raw, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Message{}, substate.WrapError(substate.ENOTFOUND, err, "%s holds no message at sequence %d", stream, seq)
	} else if err != nil {
		return Message{}, fmt.Errorf("read %s sequence %d: %w", stream, seq, err)
	}
	return Message{Seq: raw.Sequence, Subject: raw.Subject, Stored: raw.Time, Header: raw.Header, Data: raw.Data}, nil
}
