package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
)

// TestSubscriberReadsChangeFeed: the read-only subscriber identity runs a
// durable consumer of its own with a subject filter on SUBSTATE_CHANGES,
// and may not publish on the feed.
func TestSubscriberReadsChangeFeed(t *testing.T) {
	s := newSecured(t)
	ctx := context.Background()
	failed := substate.Change{Seq: 7, TenantID: "acme.eu", New: substate.TenantView{WorkflowSubState: substate.StateFailed, Provider: substate.ProviderRestate}}
	running := substate.Change{Seq: 8, TenantID: "other", New: substate.TenantView{WorkflowSubState: substate.StateRunning, Provider: substate.ProviderRestate}}
	for _, c := range []substate.Change{failed, running} {
		m := nats.NewMsg(substate.ChangeSubject(&c))
		m.Header.Set(substate.HeaderMsgID, substate.ChangeMsgID(&c))
		if _, err := s.b.JetStream.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	sub := s.connect(t, bus.Subscriber)
	js, err := jetstream.New(sub.nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, substate.StreamChanges, jetstream.ConsumerConfig{
		Durable: "subscriber-1", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: substate.SubjectChangesPrefix + "failed.>"})
	if err != nil {
		t.Fatalf("create a filtered consumer on %s: %v", substate.StreamChanges, err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := msg.Subject(), substate.ChangeSubject(&failed); got != want {
		t.Fatalf("filtered consumer delivered %s, want %s", got, want)
	}
	if err := msg.DoubleAck(ctx); err != nil {
		t.Fatalf("ack its own consumer: %v", err)
	}
	if info, err := cons.Info(ctx); err != nil || info.NumPending != 0 {
		t.Fatalf("after the failure: %d pending (%v), want 0: the running change is filtered out", info.NumPending, err)
	}
	subject := substate.ChangeSubject(&running)
	sub.denied(t, subject, func(context.Context) { _ = sub.nc.Publish(subject, []byte(`{}`)) })
	if n := s.count(t, substate.StreamChanges); n != 2 {
		t.Errorf("%s holds %d messages, want the 2 the worker published", substate.StreamChanges, n)
	}
}
