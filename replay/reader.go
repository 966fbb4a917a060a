package replay

import (
	"cmp"
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

// DefaultIdleTimeout is how long a read waits for each answer of the
// server before it fails.
const DefaultIdleTimeout = 5 * time.Second

// Reader reads substate's streams in stream order. It reads with direct
// gets, so it creates no consumer on the server: any number of reads, run
// at once or one after another, leave the streams' consumers as they were.
type Reader struct {
	JS jetstream.JetStream
	// IdleTimeout fails a read whose next answer does not come within it;
	// 0 means DefaultIdleTimeout.
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
	var subject string
	if tenant != "" {
		subject = substate.EventsSubject(tenant)
	}
	return eventsOf(r.Messages(ctx, substate.StreamEvents, subject, rg))
}

// eventsOf decodes the canonical events of messages of SUBSTATE_EVENTS.
func eventsOf(msgs iter.Seq2[Message, error]) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for m, err := range msgs {
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

// Messages yields the messages of a stream whose subject matches subject
// (which may hold wildcards; every message when it is ""), in stream
// order. An error is yielded once, last.
func (r *Reader) Messages(ctx context.Context, stream, subject string, rg Range) iter.Seq2[Message, error] {
	return func(yield func(Message, error) bool) {
		stopped := false
		_, err := r.read(ctx, stream, subject, rg, func(m Message) bool {
			stopped = !yield(m, nil)
			return !stopped
		})
		if err != nil && !stopped {
			yield(Message{}, err)
		}
	}
}

// read delivers the messages of rg to each until it returns false, asking
// the stream for them in batches of direct gets, and returns the last
// sequence the read covered: the stream's last as of its start, or
// rg.ToSeq when lower.
func (r *Reader) read(ctx context.Context, stream, subject string, rg Range, each func(Message) bool) (uint64, error) {
	s, err := r.JS.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", stream, err)
	}
	info := s.CachedInfo()
	last := info.State.LastSeq
	if rg.ToSeq > 0 {
		last = min(last, rg.ToSeq)
	}
	if info.State.Msgs == 0 || last < max(rg.FromSeq, info.State.FirstSeq) {
		return last, nil
	}
	if !info.Config.AllowDirect {
		return 0, fmt.Errorf("read %s: the stream does not allow direct gets (a worker of this version turns them on when it starts)", stream)
	}
	d, err := openDirect(r.JS, stream, cmp.Or(r.IdleTimeout, DefaultIdleTimeout))
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", stream, err)
	}
	defer d.close()
	if err := r.drain(ctx, d, subject, rg, last, each); err != nil {
		return 0, fmt.Errorf("read %s: %w", stream, err)
	}
	return last, nil
}

// drain asks for batch after batch and hands over their messages up to
// sequence last. When a batch says nothing is left, the stream's leader
// confirms it: a replica that lags behind it may have answered.
func (r *Reader) drain(ctx context.Context, d *directRead, subject string, rg Range, last uint64, each func(Message) bool) error {
	req := directRequest{Seq: max(rg.FromSeq, 1), NextFor: subject, MaxBytes: directMaxBytes}
	if rg.FromSeq == 0 && !rg.Since.IsZero() {
		since := rg.Since
		req.Seq, req.StartTime = 0, &since
	}
	// hand over one message; false ends the read.
	hand := func(m Message) bool {
		switch {
		case m.Seq > last || (!rg.Until.IsZero() && m.Stored.After(rg.Until)):
			return false
		case !m.Stored.Before(rg.Since) && !each(m):
			return false
		}
		req.Seq, req.StartTime = m.Seq+1, nil
		return m.Seq < last
	}
	for {
		more, err := r.batch(ctx, d, req, last, hand)
		if err != nil || !more {
			return err
		}
		if d.pending > 0 {
			continue
		}
		m, ok, err := d.leaderNext(ctx, req, subject)
		if err != nil || !ok || !hand(m) {
			return err
		}
	}
}

// batch asks for one batch and hands its messages over; more is false
// when hand ended the read.
func (r *Reader) batch(ctx context.Context, d *directRead, req directRequest, last uint64, hand func(Message) bool) (more bool, err error) {
	req.Batch = int(min(directBatch, last-max(req.Seq, 1)+1))
	d.pending = 0
	if err := d.request(req); err != nil {
		return false, err
	}
	for {
		m, err := d.next(ctx)
		switch {
		case errors.Is(err, errNoMessages), errors.Is(err, errEndOfBatch):
			return true, nil
		case err != nil:
			return false, err
		case !hand(m):
			return false, nil
		}
	}
}

// Get returns the message at seq in stream, or an ENOTFOUND error when the
// stream no longer holds it. Any replica may answer; one that says the
// message is not there is checked with the stream's leader.
func (r *Reader) Get(ctx context.Context, stream string, seq uint64) (Message, error) {
	s, err := r.JS.Stream(ctx, stream)
	if err != nil {
		return Message{}, fmt.Errorf("read %s: %w", stream, err)
	}
	raw, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		m, ok, lerr := leaderGet(ctx, r.JS.Conn(), apiPrefix(r.JS)+"STREAM.MSG.GET."+stream, cmp.Or(r.IdleTimeout, DefaultIdleTimeout), leaderRequest{Seq: seq})
		switch {
		case lerr != nil:
			return Message{}, fmt.Errorf("read %s sequence %d: %w", stream, seq, lerr)
		case ok:
			return m, nil
		}
		return Message{}, substate.WrapError(substate.ENOTFOUND, err, "%s holds no message at sequence %d", stream, seq)
	} else if err != nil {
		return Message{}, fmt.Errorf("read %s sequence %d: %w", stream, seq, err)
	}
	stripDirect(raw.Header)
	return Message{Seq: raw.Sequence, Subject: raw.Subject, Stored: raw.Time, Header: raw.Header, Data: raw.Data}, nil
}
