package consumers_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/consumers"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

func TestForwarder(t *testing.T) {
	b := newBus(t)
	aws := awstest.New(t)
	var throttles atomic.Int32 // the slow tenant's event is throttled three times
	aws.FailEntries(func(e awstest.PutEventsEntry) (string, string) {
		switch {
		case strings.Contains(e.Detail, `"tenantId":"bad"`):
			return "MalformedDetail", "detail is not accepted"
		case strings.Contains(e.Detail, `"tenantId":"slow"`) && throttles.Add(1) <= 3:
			return "ThrottlingException", "rate exceeded"
		}
		return "", ""
	})
	eb := publishers.NewEventBridge(eventbridge.NewFromConfig(aws.Config()), "tenants")
	eb.MaxAttempts, eb.Backoff = 1, func(int) time.Duration { return 0 }
	c, err := bus.EnsureConsumer(context.Background(), b.JetStream, substate.StreamEvents, bus.ConsumerConfig(bus.ConsumerEventBridge, time.Minute, 1))
	if err != nil {
		t.Fatal(err)
	}
	pub := publishers.NewJetStream(b.JetStream)
	f := &consumers.Forwarder{Consumer: c, Publisher: eb, DeadLetters: pub, Linger: 20 * time.Millisecond,
		Retry: consumers.Retry{Base: 10 * time.Millisecond, MaxDeliveries: 100}}
	pipelinetest.RunInBackground(t, f.Run)

	var events []substate.Event
	for _, tenant := range []string{"good", "bad", "slow"} {
		d := substate.EventData{TenantID: tenant, Provider: substate.ProviderEngine, ExecutionID: "x-" + tenant, SubState: substate.StateRunning}
		d.Normalize()
		events = append(events, substate.NewEvent("id-"+tenant, d))
	}
	if err := pub.PublishEvents(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	pipelinetest.WaitFor(t, "the refused event dead-lettered", func() bool { return streamCount(t, b.JetStream, substate.StreamDLQ) == 1 })
	pipelinetest.WaitFor(t, "everything acknowledged", pipelinetest.Settled(t, b.JetStream, substate.StreamEvents, bus.ConsumerEventBridge))
	var tenants []string
	for _, e := range aws.Events() {
		for _, t := range []string{"good", "slow", "bad"} {
			if strings.Contains(e.Detail, `"tenantId":"`+t+`"`) {
				tenants = append(tenants, t)
			}
		}
	}
	// While the batch is throttled it is resent whole, so good may arrive
	// more than once: delivery to EventBridge is at least once.
	if got := strings.Join(tenants, ","); !strings.HasPrefix(got, "good") || !strings.HasSuffix(got, "slow") || strings.Contains(got, "bad") {
		t.Fatalf("eventbridge accepted %s, want good (maybe repeated) then slow, never bad", got)
	}
	dl := streamMsgs(t, b.JetStream, substate.StreamDLQ)[0]
	if r := dl.Header.Get(substate.HeaderDLQReason); !strings.Contains(r, "MalformedDetail") || dl.Header.Get(substate.HeaderDLQStage) != substate.StageForward {
		t.Fatalf("dead letter reason %q stage %q", r, dl.Header.Get(substate.HeaderDLQStage))
	}
}
