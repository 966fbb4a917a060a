package consumers

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/testkit/bustest"
)

// A steady trickle must not hold a batch open: the linger counts from the
// batch's first message, so a message waits at most about the linger even
// when the next one always arrives before it would have run out.
func TestPullerLingerCountsFromTheFirstMessage(t *testing.T) {
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
	p := puller{consumer: c, batchSize: 1000, linger: 20 * time.Millisecond, logger: slog.New(slog.DiscardHandler)}
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
	// 20 ms holds about 20 of these messages; a linger restarted by every
	// message would have gathered all 300 in one batch.
	if sizes[0] >= sent/2 {
		t.Fatalf("batch sizes %v: the first batch waited for the trickle to end", sizes)
	}
}
