// Package pipelinetest gives tests the part of a worker that provider
// events flow through — an embedded NATS server with substate's streams,
// the normalizer, the projector and a bbolt view — for the tests of the
// stages, of the ingress and of the pollers that feed them, and the small
// helpers those tests share: waiting for a condition, running a component
// until the test ends, a clock that sleeps by moving forward, a log
// buffer and a counter reader.
package pipelinetest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/consumers"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/testkit/bustest"
)

// Pipeline is the part of the worker a poller or the ingress feeds: an
// embedded NATS server with the streams, the normalizer, the projector
// and a bbolt view.
type Pipeline struct {
	Bus  *bus.Bus
	View *state.DB
	Pub  *publishers.JetStream
}

// New starts a pipeline that runs until the test ends.
func New(tb testing.TB) *Pipeline {
	tb.Helper()
	return NewWith(tb, nil)
}

// NewWith starts a pipeline whose normalizer configure changes (its
// tenant rules, say) before it starts, as RunNormalizer does.
func NewWith(tb testing.TB, configure func(*consumers.Normalizer)) *Pipeline {
	tb.Helper()
	b := bustest.Open(tb)
	RunNormalizer(tb, b, configure)
	view := OpenView(tb)
	ctx := context.Background()
	c, err := bus.ConsumerFrom(ctx, b.JetStream, substate.StreamEvents, bus.ProjectorConsumerConfig("", 30*time.Second, 1), 0)
	if err != nil {
		tb.Fatal(err)
	}
	stream, err := b.JetStream.Stream(ctx, substate.StreamEvents)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := b.JetStream.Stream(ctx, substate.StreamRaw)
	if err != nil {
		tb.Fatal(err)
	}
	pub := publishers.NewJetStream(b.JetStream)
	proj := &consumers.Projector{Consumer: c, Stream: stream, Store: view, DeadLetters: pub, Linger: time.Millisecond,
		Normalized: &consumers.Normalized{Raw: raw, Consumer: bus.ConsumerNormalizer}}
	RunInBackground(tb, proj.Run)
	return &Pipeline{Bus: b, View: view, Pub: pub}
}

// Publish puts a raw event on SUBSTATE_RAW.
func (p *Pipeline) Publish(tb testing.TB, raw substate.RawEvent) {
	tb.Helper()
	if err := p.Pub.PublishRaw(context.Background(), raw); err != nil {
		tb.Fatal(err)
	}
}

// Settle waits until every raw message was normalized and every event
// applied to the view.
func (p *Pipeline) Settle(tb testing.TB) {
	tb.Helper()
	WaitFor(tb, "the normalizer to settle", Settled(tb, p.Bus.JetStream, substate.StreamRaw, bus.ConsumerNormalizer))
	WaitFor(tb, "the projector to settle", Settled(tb, p.Bus.JetStream, substate.StreamEvents, bus.ProjectorConsumer("")))
}

// Tenant returns a tenant's view.
func (p *Pipeline) Tenant(tb testing.TB, id string) substate.TenantView {
	tb.Helper()
	v, err := p.View.Tenant(context.Background(), id)
	if err != nil {
		tb.Fatalf("tenant %s: %v", id, err)
	}
	return v
}

// WaitTenant waits until a tenant's view satisfies ok.
func (p *Pipeline) WaitTenant(tb testing.TB, id string, what string, ok func(substate.TenantView) bool) substate.TenantView {
	tb.Helper()
	var v substate.TenantView
	WaitFor(tb, "tenant "+id+" "+what, func() bool {
		var err error
		v, err = p.View.Tenant(context.Background(), id)
		return err == nil && ok(v)
	})
	return v
}

// Mapper resolves the fixtures' tenants: their inputs carry a customerId.
func Mapper(tb testing.TB) *mapping.Mapper {
	tb.Helper()
	rules, err := mapping.ParseTenantRules("input:$.tenantId", "input:$.customerId", "restate:key", "engine:tenant")
	if err != nil {
		tb.Fatal(err)
	}
	return mapping.New(mapping.Config{Tenants: rules})
}

// RunNormalizer runs a normalizer on b until the test ends, remembering
// the executions without tenant it dead-lettered in SUBSTATE_UNRESOLVED
// as the worker's does; configure, when not nil, changes it before it
// starts.
func RunNormalizer(tb testing.TB, b *bus.Bus, configure func(*consumers.Normalizer)) *consumers.Normalizer {
	tb.Helper()
	ctx := context.Background()
	c, err := bus.EnsureConsumer(ctx, b.JetStream, substate.StreamRaw, bus.ConsumerConfig(bus.ConsumerNormalizer, 30*time.Second, 1))
	if err != nil {
		tb.Fatal(err)
	}
	if err := bus.DefaultTopology().EnsureUnresolvedStream(ctx, b.JetStream); err != nil {
		tb.Fatal(err)
	}
	pub := publishers.NewJetStream(b.JetStream)
	n := &consumers.Normalizer{Consumer: c, Mapper: Mapper(tb), EventID: mapping.EventID, Events: pub, DeadLetters: pub,
		Unresolved: &publishers.Unresolved{JS: b.JetStream}, Linger: time.Millisecond}
	if configure != nil {
		configure(n)
	}
	RunInBackground(tb, n.Run)
	return n
}

// OpenView opens a bbolt view in a temporary directory and checks the file
// is consistent when the test ends.
func OpenView(tb testing.TB) *state.DB {
	tb.Helper()
	db := state.NewDB(filepath.Join(tb.TempDir(), "view.db"))
	if err := db.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// RunInBackground runs fn until the test ends, then cancels it and waits.
func RunInBackground(tb testing.TB, fn func(context.Context) error) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("run: %v", err)
		}
	})
}

// ConsumerInfo returns the state of a durable consumer.
func ConsumerInfo(tb testing.TB, js jetstream.JetStream, stream, name string) *jetstream.ConsumerInfo {
	tb.Helper()
	c, err := js.Consumer(context.Background(), stream, name)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return info
}

// Settled reports whether a consumer has been delivered every message of
// its stream and has acknowledged them all: its ack floor is the stream's
// last sequence (pending counts alone can read zero before the consumer
// has seen a message just stored).
func Settled(tb testing.TB, js jetstream.JetStream, stream, name string) func() bool {
	return func() bool {
		s, err := js.Stream(context.Background(), stream)
		if err != nil {
			tb.Fatal(err)
		}
		info := ConsumerInfo(tb, js, stream, name)
		return info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream >= s.CachedInfo().State.LastSeq
	}
}

// WaitFor polls cond until it holds or ten seconds pass.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
