package replay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/consumers"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/testkit/bustest"
)

// newBus starts an embedded NATS server with substate's streams in topology t.
func newBus(tb testing.TB, t bus.Topology) *bus.Bus { tb.Helper(); return bustest.Open(tb, t) }

// t0 is the start of every generated timeline.
var t0 = time.Date(2025, 3, 4, 9, 0, 0, 0, time.UTC)

func newReader(b *bus.Bus) *replay.Reader {
	return &replay.Reader{JS: b.JetStream, IdleTimeout: time.Second}
}

// openView opens a fresh view in the test's temporary directory.
func openView(tb testing.TB, name string, configure ...func(*state.DB)) *state.DB {
	tb.Helper()
	db := state.NewDB(filepath.Join(tb.TempDir(), name))
	for _, f := range configure {
		f(db)
	}
	if err := db.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Error(err)
		}
	})
	return db
}

// publish puts canonical events on SUBSTATE_EVENTS, each with a unique id
// so that duplicates of the same event are stored as the stream would hold
// them after the duplicate window.
func publish(tb testing.TB, b *bus.Bus, events ...substate.EventData) {
	tb.Helper()
	out := make([]substate.Event, len(events))
	for i, d := range events {
		out[i] = substate.NewEvent(fmt.Sprintf("ev-%d-%d", time.Now().UnixNano(), i), d)
	}
	if err := publishers.NewJetStream(b.JetStream).PublishEvents(context.Background(), out); err != nil {
		tb.Fatal(err)
	}
}

// publishMsg puts any bytes on a subject.
func publishMsg(tb testing.TB, js jetstream.JetStream, subject string, data []byte, header map[string]string) uint64 {
	tb.Helper()
	m := nats.NewMsg(subject)
	m.Data = data
	for k, v := range header {
		m.Header.Set(k, v)
	}
	ack, err := js.PublishMsg(context.Background(), m)
	if err != nil {
		tb.Fatal(err)
	}
	return ack.Sequence
}

// runProjector runs the live projector on db until the test ends.
func runProjector(tb testing.TB, b *bus.Bus, db *state.DB) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := bus.ProjectorConsumerConfig("", 30*time.Second, 1)
	c, err := bus.ConsumerFrom(ctx, b.JetStream, substate.StreamEvents, cfg, 0)
	if err != nil {
		tb.Fatal(err)
	}
	stream, err := b.JetStream.Stream(ctx, substate.StreamEvents)
	if err != nil {
		tb.Fatal(err)
	}
	p := &consumers.Projector{Consumer: c, Stream: stream, Store: db, DeadLetters: publishers.NewJetStream(b.JetStream), BatchSize: 64, Linger: time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("projector: %v", err)
		}
	})
}

// waitApplied waits until db reflects stream sequence seq.
func waitApplied(tb testing.TB, db *state.DB, seq uint64) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for db.Applied() < seq {
		if time.Now().After(deadline) {
			tb.Fatalf("view applied %d, want %d", db.Applied(), seq)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lastSeq returns the last sequence of SUBSTATE_EVENTS.
func lastSeq(tb testing.TB, b *bus.Bus) uint64 {
	tb.Helper()
	_, last, _, err := newReader(b).Bounds(context.Background(), substate.StreamEvents)
	if err != nil {
		tb.Fatal(err)
	}
	return last
}

// allTenants reads every tenant of a view, page by page.
func allTenants(tb testing.TB, v substate.ViewStore) []substate.TenantView {
	tb.Helper()
	var out []substate.TenantView
	f := substate.TenantFilter{Limit: 7} // small pages, to page
	for {
		page, err := v.Tenants(context.Background(), f)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, page.Tenants...)
		if page.NextPageToken == "" {
			return out
		}
		f.PageToken = page.NextPageToken
	}
}

// rebuild folds SUBSTATE_EVENTS within rg into a fresh view.
func rebuild(tb testing.TB, b *bus.Bus, rg replay.Range) (*state.DB, replay.Progress) {
	tb.Helper()
	rb := &replay.Rebuild{Reader: newReader(b)}
	db := openView(tb, "rebuilt.db", func(db *state.DB) { db.NoSync, db.Now = true, rb.Now })
	rb.View = db
	p, err := rb.Run(context.Background(), rg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := db.Sync(); err != nil {
		tb.Fatal(err)
	}
	return db, p
}

// randomEvents returns n events of a few tenants and executions, with
// random sub-states, revisions, retries and errors, duplicates and events
// out of order: what a real stream holds.
func randomEvents(r *rand.Rand, n int) []substate.EventData {
	out := make([]substate.EventData, 0, n)
	for len(out) < n {
		if len(out) > 0 && r.IntN(6) == 0 {
			out = append(out, out[r.IntN(len(out))]) // a duplicate, late
			continue
		}
		out = append(out, randomEvent(r))
	}
	return out
}

func randomEvent(r *rand.Rand) substate.EventData {
	exec := r.IntN(3)
	rev := substate.Revision(1 + r.IntN(12))
	d := substate.EventData{
		TenantID:           fmt.Sprintf("tenant-%d", r.IntN(6)),
		Provider:           substate.Providers[r.IntN(len(substate.Providers))],
		ExecutionID:        fmt.Sprintf("exec-%d", exec),
		Workflow:           "provision",
		SubState:           substate.SubStates[r.IntN(len(substate.SubStates))],
		ProviderState:      fmt.Sprintf("native-%d", r.IntN(4)),
		OccurredAt:         t0.Add(time.Duration(exec)*time.Hour + time.Duration(rev)*time.Second),
		ExecutionStartedAt: t0.Add(time.Duration(exec) * time.Hour),
		Revision:           rev,
	}
	if r.IntN(3) == 0 {
		d.RetryCount, d.RetryCountKnown = r.IntN(4), true
	}
	if r.IntN(3) == 0 {
		d.ErrorMessage, d.ErrorType = fmt.Sprintf("boom %d", r.IntN(3)), "TaskFailed"
	}
	d.Normalize()
	return d
}
