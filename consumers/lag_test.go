package consumers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/consumers"
)

// TestOldestUnprocessed reads a consumer's oldest unprocessed message as
// it acknowledges its messages one by one, with and without a filter
// subject, across a deleted message.
func TestOldestUnprocessed(t *testing.T) {
	b := newBus(t)
	ctx := context.Background()
	js := b.JetStream
	kinds := []substate.RawKind{substate.RawRestate, substate.RawEventBridge, substate.RawRestate, substate.RawRestate}
	for i, k := range kinds {
		publishRaw(t, js, k, string(rune('a'+i)), []byte(`{}`))
	}
	s, err := js.Stream(ctx, substate.StreamRaw)
	if err != nil {
		t.Fatal(err)
	}
	stored := func(seq uint64) time.Time {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		return m.Time
	}
	if err := s.DeleteMsg(ctx, 3); err != nil { // removed before any consumer saw it
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		filter string
		want   []uint64 // the oldest unprocessed sequence before each ack, then 0
	}{
		{"All", "", []uint64{1, 2, 4, 0}},
		{"Filtered", substate.RawSubject(substate.RawRestate), []uint64{1, 4, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := js.CreateConsumer(ctx, substate.StreamRaw, jetstream.ConsumerConfig{
				Durable: "age-" + strings.ToLower(tc.name), AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: tc.filter})
			if err != nil {
				t.Fatal(err)
			}
			for i, seq := range tc.want {
				info, err := c.Info(ctx)
				if err != nil {
					t.Fatal(err)
				}
				got, err := consumers.OldestUnprocessed(ctx, s, info)
				if err != nil {
					t.Fatal(err)
				}
				want := time.Time{}
				if seq != 0 {
					want = stored(seq)
				}
				if !got.Equal(want) {
					t.Fatalf("after %d acks: oldest stored at %v, want %v (sequence %d)", i, got, want, seq)
				}
				if seq == 0 {
					break
				}
				msgs, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				for m := range msgs.Messages() {
					if err := m.DoubleAck(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

func TestConsumerAges(t *testing.T) {
	now := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	a := &consumers.ConsumerAges{Now: func() time.Time { return now }}
	a.Set("substate-normalizer", now.Add(-90*time.Second))
	a.Set("substate-projector", time.Time{})
	a.Set("substate-eventbridge", now.Add(time.Second)) // a server clock ahead of ours
	want := `
# HELP substate_consumer_oldest_unprocessed_age_seconds Age of the oldest message a durable consumer has not processed (stored on its stream after the consumer's ack floor), 0 when it has none: the consumer's lag as a time.
# TYPE substate_consumer_oldest_unprocessed_age_seconds gauge
substate_consumer_oldest_unprocessed_age_seconds{consumer="substate-eventbridge"} 0
substate_consumer_oldest_unprocessed_age_seconds{consumer="substate-normalizer"} 90
substate_consumer_oldest_unprocessed_age_seconds{consumer="substate-projector"} 0
`
	if err := testutil.CollectAndCompare(a, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
