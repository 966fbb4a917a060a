package replay

import (
	"cmp"
	"context"
	"iter"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultTailPoll is how often a Tail asks a stream for its last sequence
// while a reader waits.
const DefaultTailPoll = 250 * time.Millisecond

// Tail tells the readers that follow a stream when it grows. However many
// wait, it asks the server for the stream's last sequence once every Poll
// (a stream-info request, no consumer), and only while one waits.
type Tail struct {
	JS     jetstream.JetStream
	Stream string
	Poll   time.Duration // 0 means DefaultTailPoll

	mu      sync.Mutex
	last    uint64        // the stream's last sequence, as last seen
	grew    chan struct{} // closed, and replaced, when last grows
	waiters int
	polling bool // a poll goroutine runs
}

// Wait returns once the stream's last sequence is above after, or ctx's
// error when ctx ends first.
func (t *Tail) Wait(ctx context.Context, after uint64) error {
	t.mu.Lock()
	if t.grew == nil {
		t.grew = make(chan struct{})
	}
	if t.last > after {
		t.mu.Unlock()
		return nil
	}
	t.waiters++
	if !t.polling {
		t.polling = true
		go t.poll()
	}
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.waiters--
		t.mu.Unlock()
	}()
	for {
		t.mu.Lock()
		last, grew := t.last, t.grew
		t.mu.Unlock()
		if last > after {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-grew:
		}
	}
}

// poll asks for the stream's last sequence every Poll until no reader
// waits. A failed request is tried again at the next tick: the readers
// wait on (an idle follower is no error), and their own reads report a
// stream that is gone.
func (t *Tail) poll() {
	tick := time.NewTicker(cmp.Or(t.Poll, DefaultTailPoll))
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultIdleTimeout)
		last, err := t.lastSeq(ctx)
		cancel()
		t.mu.Lock()
		if err == nil && last > t.last {
			t.last = last
			close(t.grew)
			t.grew = make(chan struct{})
		}
		idle := t.waiters == 0
		t.polling = !idle
		t.mu.Unlock()
		if idle {
			return
		}
		<-tick.C
	}
}

func (t *Tail) lastSeq(ctx context.Context) (uint64, error) {
	s, err := t.JS.Stream(ctx, t.Stream)
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().State.LastSeq, nil
}

// Follow yields the messages of stream whose subject matches subject
// (every message when it is ""), from the start start says (FromSeq, or
// Since; ToSeq and Until are ignored), then each new one as the stream
// stores it, until ctx is done; it then ends without an error. Between
// reads it waits on tail, a Tail of the same stream. Like every read it
// holds no consumer on the server.
func (r *Reader) Follow(ctx context.Context, stream, subject string, start Range, tail *Tail) iter.Seq2[Message, error] {
	return func(yield func(Message, error) bool) {
		rg := Range{FromSeq: start.FromSeq, Since: start.Since}
		for {
			stopped := false
			covered, err := r.read(ctx, stream, subject, rg, func(m Message) bool {
				rg = Range{FromSeq: m.Seq + 1}
				stopped = !yield(m, nil)
				return !stopped
			})
			switch {
			case stopped:
				return
			case ctx.Err() != nil:
				return
			case err != nil:
				yield(Message{}, err)
				return
			}
			// A read by time that found nothing goes on from what it covered.
			rg = Range{FromSeq: max(rg.FromSeq, covered+1)}
			if tail.Wait(ctx, covered) != nil {
				return
			}
		}
	}
}
