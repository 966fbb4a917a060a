package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// A scan reads a long run of a stream through one consumer of its own, not
// with direct gets: the server delivers each message with the headers it
// was stored with, where a direct get's answer is rebuilt with six headers
// more, and the scan costs about half the CPU per message, server side
// included (BenchmarkScan). The consumer acknowledges nothing, lives in
// the server's memory on one replica, is deleted when the scan ends, and
// the server drops one a killed process left after scanInactive.
const (
	// scanBatch is how many messages one pull asks for.
	scanBatch = 1024
	// scanMinBytes is the least a pull's answer may carry; a pull asks for
	// at least twice the server's largest message, so one always fits.
	scanMinBytes = 4 << 20
	// scanInactive is how long the server keeps a consumer no scan reads.
	scanInactive = 30 * time.Second
)

// ScanDescription is the description of a scan's consumer, which tells it
// from the worker's durable consumers.
const ScanDescription = "substate scan: deleted when the read ends"

// errLostDelivery is a scan that missed a message the consumer delivered
// (the client dropped it): what it read is not the whole range.
var errLostDelivery = errors.New("a message the server delivered did not arrive")

// Scan yields the messages of a stream whose subject matches subject ("" for
// every one), in stream order, like Messages, but reads them through a
// consumer of its own (see scanBatch): for the long reads of a check that
// visit every message of a range. An error is yielded once, last.
func (r *Reader) Scan(ctx context.Context, stream, subject string, rg Range) iter.Seq2[Message, error] {
	return func(yield func(Message, error) bool) {
		s, err := r.openScan(ctx, stream, subject, rg)
		if err != nil {
			yield(Message{}, err)
			return
		}
		defer s.close()
		for {
			m, ok, err := s.next(ctx)
			if err != nil {
				yield(Message{}, fmt.Errorf("read %s: %w", stream, err))
				return
			}
			if !ok || !yield(m, nil) {
				return
			}
		}
	}
}

// ScanEvents yields the canonical events of every tenant in stream order,
// like Events, read as Scan reads.
func (r *Reader) ScanEvents(ctx context.Context, rg Range) iter.Seq2[Event, error] {
	return eventsOf(r.Scan(ctx, substate.StreamEvents, "", rg))
}

// scan is one read of a stream through its own consumer.
type scan struct {
	js       jetstream.JetStream
	stream   string
	cons     jetstream.Consumer // nil when the range holds nothing
	batch    jetstream.MessageBatch
	rg       Range
	last     uint64 // the range's last sequence, as of the start
	pending  uint64 // messages the consumer has still to deliver, as last said
	consumed uint64 // the consumer sequence of the last message read
	got      int    // messages the current pull has delivered
	maxBytes int
	idle     time.Duration
}

// openScan creates the consumer of one scan, starting at rg's first
// sequence (or time) and ending at its last, or at the stream's last as
// of now.
func (r *Reader) openScan(ctx context.Context, stream, subject string, rg Range) (*scan, error) {
	st, err := r.JS.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", stream, err)
	}
	info := st.CachedInfo()
	s := &scan{js: r.JS, stream: stream, rg: rg, last: info.State.LastSeq, idle: cmp.Or(r.IdleTimeout, DefaultIdleTimeout),
		maxBytes: max(scanMinBytes, 2*int(r.JS.Conn().MaxPayload()))}
	if rg.ToSeq > 0 {
		s.last = min(s.last, rg.ToSeq)
	}
	if info.State.Msgs == 0 || s.last < max(rg.FromSeq, info.State.FirstSeq) {
		return s, nil
	}
	cfg := jetstream.ConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: max(rg.FromSeq, 1),
		AckPolicy: jetstream.AckNonePolicy, FilterSubject: subject, Replicas: 1, MemoryStorage: true,
		InactiveThreshold: scanInactive, Description: ScanDescription,
	}
	if rg.FromSeq == 0 && !rg.Since.IsZero() {
		since := rg.Since
		cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, 0, &since
	}
	if s.cons, err = st.CreateConsumer(ctx, cfg); err != nil {
		return nil, fmt.Errorf("read %s: create its scan's consumer: %w", stream, err)
	}
	s.pending = s.cons.CachedInfo().NumPending
	return s, nil
}

// next returns the next message of the range; ok is false at its end.
func (s *scan) next(ctx context.Context) (Message, bool, error) {
	for {
		if s.cons == nil {
			return Message{}, false, nil
		}
		if s.batch == nil {
			if s.pending == 0 {
				return Message{}, false, nil // the stream holds nothing more
			}
			b, err := s.cons.Fetch(scanBatch, jetstream.FetchMaxBytes(s.maxBytes), jetstream.FetchMaxWait(s.idle))
			if err != nil {
				return Message{}, false, err
			}
			s.batch, s.got = b, 0
		}
		var msg jetstream.Msg
		var ok bool
		select {
		case <-ctx.Done():
			return Message{}, false, ctx.Err()
		case msg, ok = <-s.batch.Messages():
		}
		if !ok {
			if err := s.pullEnded(); err != nil {
				return Message{}, false, err
			}
			continue
		}
		s.got++
		m, more, err := s.message(msg)
		switch {
		case err != nil:
			return Message{}, false, err
		case m.Seq > s.last, !s.rg.Until.IsZero() && m.Stored.After(s.rg.Until):
			s.end()
			return Message{}, false, nil
		}
		if !more || m.Seq == s.last {
			s.end()
		}
		return m, true, nil
	}
}

// message turns a delivered message into the stored one; more is false
// when the consumer had nothing more to deliver.
func (s *scan) message(msg jetstream.Msg) (m Message, more bool, err error) {
	meta, err := msg.Metadata()
	if err != nil {
		return m, false, err
	}
	if meta.Sequence.Consumer != s.consumed+1 {
		return m, false, fmt.Errorf("%w (delivery %d after %d)", errLostDelivery, meta.Sequence.Consumer, s.consumed)
	}
	s.consumed, s.pending = meta.Sequence.Consumer, meta.NumPending
	h := msg.Headers()
	if len(h) == 0 {
		h = nil
	}
	return Message{Seq: meta.Sequence.Stream, Subject: msg.Subject(), Stored: meta.Timestamp, Header: h, Data: msg.Data()}, meta.NumPending > 0, nil
}

// pullEnded says whether a pull that delivered all it will is an error:
// the server refused it, or sent nothing within the idle timeout while
// the consumer still had messages to deliver.
func (s *scan) pullEnded() error {
	err, got := s.batch.Error(), s.got
	s.batch = nil
	switch {
	case err != nil && !errors.Is(err, nats.ErrTimeout):
		return err
	case got == 0:
		return fmt.Errorf("%w within %s (%d messages pending)", errNoAnswer, s.idle, s.pending)
	}
	return nil
}

// end makes every next call report the end of the range.
func (s *scan) end() { s.pending, s.batch = 0, nil }

// close deletes the scan's consumer, within the idle timeout even when
// the read's context is done.
func (s *scan) close() {
	if s.cons == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.idle)
	defer cancel()
	_ = s.js.DeleteConsumer(ctx, s.stream, s.cons.CachedInfo().Name)
}
