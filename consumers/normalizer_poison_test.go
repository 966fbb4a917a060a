package consumers_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/consumers"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// poisonEvents refuses, every time, any publish that holds an event of one
// execution, as a server refuses a message too large for it.
type poisonEvents struct {
	next     substate.EventPublisher
	poison   string
	refusals atomic.Int32
}

func (p *poisonEvents) PublishEvents(ctx context.Context, events []substate.Event) error {
	for _, e := range events {
		if strings.Contains(e.Data.ExecutionID, p.poison) {
			p.refusals.Add(1)
			return substate.Errorf(substate.ETOOLARGE, "message too large for the nats server")
		}
	}
	return p.next.PublishEvents(ctx, events)
}

// A message that fails the same way at every delivery, fetched in one
// batch with good ones, holds nobody up: the good ones are published at
// once, and it goes to the dead-letter stream with the reason after its
// bounded deliveries, after which the stage goes on with new messages.
func TestNormalizerPoisonInBatch(t *testing.T) {
	b := newBus(t)
	running := fixtures.Provider("sfn-status-running.json")
	poisoned := strings.Replace(string(running), `"executionArn": "`, `"executionArn": "poison-`, 1)
	if poisoned == string(running) {
		t.Fatal("cannot mark the fixture's execution")
	}
	publishRaw(t, b.JetStream, substate.RawEventBridge, "good-1", running)
	publishRaw(t, b.JetStream, substate.RawEventBridge, "poison", []byte(poisoned))
	publishRaw(t, b.JetStream, substate.RawEventBridge, "good-2", []byte(strings.Replace(string(running), `"executionArn": "`, `"executionArn": "other-`, 1)))
	p := &poisonEvents{next: publishers.NewJetStream(b.JetStream), poison: "poison-"}
	pipelinetest.RunNormalizer(t, b, func(n *consumers.Normalizer) {
		n.Events = p
		n.Retry = consumers.Retry{Base: 5 * time.Millisecond, MaxDeliveries: 3}
	})
	pipelinetest.WaitFor(t, "the good events", func() bool { return streamCount(t, b.JetStream, substate.StreamEvents) == 2 })
	pipelinetest.WaitFor(t, "the dead letter", func() bool { return streamCount(t, b.JetStream, substate.StreamDLQ) == 1 })
	pipelinetest.WaitFor(t, "raw acked", pipelinetest.Settled(t, b.JetStream, substate.StreamRaw, bus.ConsumerNormalizer))
	m := streamMsgs(t, b.JetStream, substate.StreamDLQ)[0]
	if r := m.Header.Get(substate.HeaderDLQReason); !strings.Contains(r, "gave up after 3 deliveries") || !strings.Contains(r, "too large") ||
		m.Subject != substate.DLQSubject(substate.StageNormalize) {
		t.Fatalf("dead letter on %s with reason %q", m.Subject, r)
	}
	publishRaw(t, b.JetStream, substate.RawEventBridge, "good-3", []byte(strings.Replace(string(running), `"executionArn": "`, `"executionArn": "third-`, 1)))
	pipelinetest.WaitFor(t, "the stage to go on", func() bool { return streamCount(t, b.JetStream, substate.StreamEvents) == 3 })
}
