package consumers

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/testkit/bustest"
)

// A steady trickle must not hold a batch open: the longest linger counts
// from the batch's first message, so a message waits at most about that
// even when the next one always arrives before a linger runs out.
func TestPullerLingerMaxCountsFromTheFirstMessage(t *testing.T) {
	b := bustest.Open(t)
	ctx := context.Background()
	c, err := bus.EnsureConsumer(ctx, b.JetStream, substate.StreamEvents, bus.ConsumerConfig("trickle", time.Minute, 1))
	if err != nil {
		t.Fatal(err)
	}
	const sent = 300
	go func() { // one message every millisecond: always within the linger of the last
		for i := range sent {
			if _, err := b.JetStream.Publish(ctx, substate.EventsSubject("t"), []byte{byte(i)}); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var mu sync.Mutex
	var sizes []int
	got := 0
	p := puller{consumer: c, batchSize: 1000, linger: 5 * time.Millisecond, lingerMax: 20 * time.Millisecond, logger: slog.New(slog.DiscardHandler)}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- p.run(runCtx, func(_ context.Context, batch []jetstream.Msg) {
			mu.Lock()
			defer mu.Unlock()
			sizes = append(sizes, len(batch))
			if got += len(batch); got == sent {
				cancel()
			}
			for _, m := range batch {
				_ = m.Ack()
			}
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("received %d of %d messages", got, sent)
	}
	// 20 ms holds about 20 of these messages; the 5 ms linger alone, never
	// quiet for that long, would have gathered all 300 in one batch.
	if sizes[0] >= sent/2 {
		t.Fatalf("batch sizes %v: the first batch waited for the trickle to end", sizes)
	}
}

// A closed connection ends run with ErrPullStopped, not nil: the worker
// must not go on, or exit 0, with a stage that no longer reads.
func TestPullerStopsWithAnErrorWhenTheConnectionCloses(t *testing.T) {
	b := bustest.Open(t)
	ctx := context.Background()
	nc := bustest.Connect(t, b, bus.Worker)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := bus.EnsureConsumer(ctx, js, substate.StreamEvents, bus.ConsumerConfig("closing", time.Minute, 1))
	if err != nil {
		t.Fatal(err)
	}
	p := puller{consumer: c, batchSize: 10, logger: slog.New(slog.DiscardHandler)}
	done := make(chan error, 1)
	go func() { done <- p.run(ctx, func(context.Context, []jetstream.Msg) {}) }()
	time.Sleep(100 * time.Millisecond)
	nc.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrPullStopped) {
			t.Fatalf("run returned %v, want ErrPullStopped", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its connection closed")
	}
}

// Batches are at most batchSize long, and cancelling hands over what was
// already delivered before run returns nil, each message once. (A message
// the server sends while the client unsubscribes is not received at all:
// it stays unacknowledged until its ack wait, then comes again; see
// TestBatcherHandsOverWhatIsBuffered for what was received.)
func TestPullerBatchesAndDrains(t *testing.T) {
	b := bustest.Open(t)
	ctx := context.Background()
	c, err := bus.EnsureConsumer(ctx, b.JetStream, substate.StreamEvents, bus.ConsumerConfig("drain", time.Minute, 1))
	if err != nil {
		t.Fatal(err)
	}
	const sent, size = 500, 16
	for i := range sent {
		if _, err := b.JetStream.Publish(ctx, substate.EventsSubject("t"), []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	p := puller{consumer: c, batchSize: size, logger: slog.New(slog.DiscardHandler)}
	runCtx, cancel := context.WithCancel(ctx)
	seen := map[string]int{}
	var largest int
	err = p.run(runCtx, func(_ context.Context, batch []jetstream.Msg) {
		largest = max(largest, len(batch))
		for _, m := range batch {
			seen[string(m.Data())]++
			if err := m.Ack(); err != nil {
				t.Error(err)
			}
		}
		if len(seen) >= sent/5 {
			cancel() // mid-stream, with messages delivered and not yet handled
			time.Sleep(50 * time.Millisecond)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if largest > size {
		t.Errorf("a batch of %d messages, want at most %d", largest, size)
	}
	if len(seen) < sent/5 || len(seen) == sent {
		t.Errorf("%d of %d messages handled: the cancel did not stop it mid-stream", len(seen), sent)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("message %s handled %d times", k, n)
		}
	}
}

// testMsg is a message of the batcher's tests: only its identity counts.
type testMsg struct {
	jetstream.Msg
	n int
}

// Once consuming has stopped, what the callback had buffered is still
// handed over, in batches of at most the batch's capacity, and fill reports
// closed only when nothing is left; a linger ends a batch that is not full.
func TestBatcherHandsOverWhatIsBuffered(t *testing.T) {
	for _, tc := range []struct {
		name     string
		buffered int
		closed   bool
		want     []int // batch sizes
		last     bool  // the last fill reports closed
	}{
		{"closed with nothing buffered", 0, true, []int{0}, true},
		{"closed with less than a batch", 3, true, []int{3}, true},
		{"closed with exactly a batch", 4, true, []int{4}, true},
		{"closed with more than a batch", 10, true, []int{4, 4, 2}, true},
		{"open, linger ends a short batch", 3, false, []int{3}, false},
		{"open, full batches", 8, false, []int{4, 4}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := make(chan jetstream.Msg, 16)
			for i := range tc.buffered {
				msgs <- testMsg{n: i}
			}
			closed := make(chan struct{})
			if tc.closed {
				close(closed)
			}
			b := batcher{msgs: msgs, closed: closed, linger: 5 * time.Millisecond, lingerMax: 50 * time.Millisecond, timer: time.NewTimer(time.Hour), batch: make([]jetstream.Msg, 0, 4)}
			b.timer.Stop()
			next := 0
			for i, want := range tc.want {
				done := b.fill()
				if len(b.batch) != want {
					t.Fatalf("batch %d has %d messages, want %d", i, len(b.batch), want)
				}
				for _, m := range b.batch {
					if m.(testMsg).n != next {
						t.Fatalf("batch %d: message %d, want %d", i, m.(testMsg).n, next)
					}
					next++
				}
				b.batch = b.batch[:0]
				if wantDone := tc.last && i == len(tc.want)-1; done != wantDone {
					t.Fatalf("fill %d reported closed=%v, want %v", i, done, wantDone)
				}
			}
		})
	}
}

// A batch goes on while messages keep coming within a linger of each
// other: here one every 10 ms for twice the linger of 200 ms, so all of
// them are in the first batch, which ends a quiet linger after the last.
func TestBatcherGoesOnWhileMessagesCome(t *testing.T) {
	const n = 40
	msgs := make(chan jetstream.Msg, n)
	go func() {
		for i := range n {
			msgs <- testMsg{n: i}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	b := batcher{msgs: msgs, closed: make(chan struct{}), linger: 200 * time.Millisecond, lingerMax: time.Hour, enough: 1000,
		timer: time.NewTimer(time.Hour), batch: make([]jetstream.Msg, 0, 100)}
	b.timer.Stop()
	if b.fill() {
		t.Fatal("fill reported closed")
	}
	if len(b.batch) != n {
		t.Fatalf("the first batch holds %d messages, want all %d: it ended while they still came", len(b.batch), n)
	}
}

// flow passes a message a millisecond until the test ends.
func flow(t *testing.T) <-chan jetstream.Msg {
	msgs := make(chan jetstream.Msg)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for i := 0; ; i++ {
			select {
			case msgs <- testMsg{n: i}:
			case <-stop:
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return msgs
}

// Messages that keep coming do not hold a batch past lingerMax: the clock
// here jumps past it at the first linger's end, while a message a
// millisecond still flows, and the batch ends there, far from full.
func TestBatcherEndsAtLingerMax(t *testing.T) {
	msgs := flow(t)
	start := time.Now()
	calls := 0
	clock := func() time.Time { // the batch's start, then two hours on
		calls++
		if calls == 1 {
			return start
		}
		return start.Add(2 * time.Hour)
	}
	b := batcher{msgs: msgs, closed: make(chan struct{}), linger: 20 * time.Millisecond, lingerMax: time.Hour, enough: 1 << 30,
		timer: time.NewTimer(time.Hour), batch: make([]jetstream.Msg, 0, 3000), now: clock}
	b.timer.Stop()
	if b.fill() {
		t.Fatal("fill reported closed")
	}
	if calls < 2 {
		t.Fatalf("the clock was read %d times: the batch ended before its first linger ran out", calls)
	}
	if len(b.batch) == cap(b.batch) {
		t.Fatal("the batch filled: lingerMax did not end it")
	}
}

// A batch that holds enough messages after a linger ends there, as
// batches under load always did, though more keep coming and lingerMax is
// far: waiting longer for a large batch would save nothing.
func TestBatcherEndsWhenLargeEnough(t *testing.T) {
	msgs := flow(t)
	b := batcher{msgs: msgs, closed: make(chan struct{}), linger: 20 * time.Millisecond, lingerMax: time.Hour, enough: 3,
		timer: time.NewTimer(time.Hour), batch: make([]jetstream.Msg, 0, 3000)}
	b.timer.Stop()
	if b.fill() {
		t.Fatal("fill reported closed")
	}
	if len(b.batch) < 3 || len(b.batch) == cap(b.batch) {
		t.Fatalf("the batch holds %d messages: want it to end at the first linger with at least 3", len(b.batch))
	}
}
