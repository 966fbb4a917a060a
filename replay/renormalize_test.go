package replay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/replay"
)

// testMapper resolves the fixtures' tenants: their inputs carry a customerId.
func testMapper(tb testing.TB) *mapping.Mapper {
	tb.Helper()
	rules, err := mapping.ParseTenantRules("input:$.tenantId", "input:$.customerId", "restate:key", "engine:tenant")
	if err != nil {
		tb.Fatal(err)
	}
	return mapping.New(mapping.Config{Tenants: rules})
}

// publishRawFixtures puts every Step Functions status and Restate row
// fixture on SUBSTATE_RAW, plus one payload the mapping rejects.
func publishRawFixtures(tb testing.TB, b *bus.Bus) int {
	tb.Helper()
	pub := publishers.NewJetStream(b.JetStream)
	n := 0
	put := func(kind substate.RawKind, names []string) {
		for _, name := range names {
			n++
			ev := substate.RawEvent{Kind: kind, ID: fmt.Sprintf("raw-%d", n), Body: fixtures.Provider(name)}
			if err := pub.PublishRaw(context.Background(), ev); err != nil {
				tb.Fatal(err)
			}
		}
	}
	put(substate.RawEventBridge, fixtures.Providers("sfn-status-*.json"))
	put(substate.RawRestate, fixtures.Providers("restate-invocation-*.json"))
	if err := pub.PublishRaw(context.Background(), substate.RawEvent{Kind: substate.RawEngine, ID: "bad", Body: []byte("{}")}); err != nil {
		tb.Fatal(err)
	}
	return n
}

func newRenormalizer(b *bus.Bus, m substate.Mapper) *replay.Renormalizer {
	return &replay.Renormalizer{Reader: newReader(b), Mapper: m, EventID: mapping.EventID, Events: publishers.NewJetStream(b.JetStream)}
}

func eventCount(tb testing.TB, b *bus.Bus) uint64 {
	tb.Helper()
	_, _, n, err := newReader(b).Bounds(context.Background(), substate.StreamEvents)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func renormalize(tb testing.TB, r *replay.Renormalizer, rg replay.Range) replay.RenormalizeResult {
	tb.Helper()
	res, err := r.Run(context.Background(), rg)
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

func TestRenormalizeTwiceIsOnce(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	n := publishRawFixtures(t, b)
	r := newRenormalizer(b, testMapper(t))

	first := renormalize(t, r, replay.Range{})
	if first.Raw != n+1 || first.Rejected != 1 || first.Published != n || first.Present != 0 {
		t.Fatalf("first run %+v, want %d raw, 1 rejected, %d published", first, n+1, n)
	}
	if first.FirstRejection == "" {
		t.Error("no reason for the rejected payload")
	}
	second := renormalize(t, r, replay.Range{})
	if second.Published != 0 || second.Present != n {
		t.Fatalf("second run %+v, want nothing published and %d present", second, n)
	}
	if got := eventCount(t, b); got != uint64(n) {
		t.Fatalf("events stream holds %d, want %d", got, n)
	}
	for m, err := range newReader(b).Events(context.Background(), "", replay.Range{}) {
		if err != nil || m.Err != nil {
			t.Fatal(err, m.Err)
		}
		if ref := m.RawRef(); ref.Seq == 0 || ref.ID == "" {
			t.Errorf("event %d has no raw link: %+v", m.Seq, ref)
		}
	}
}

// TestRenormalizeTwiceIsOnceBeyondDuplicateWindow runs the second pass
// after JetStream's duplicate window closed: the renormalizer's own id
// check must keep the stream as it was.
func TestRenormalizeTwiceIsOnceBeyondDuplicateWindow(t *testing.T) {
	topo := bus.DefaultTopology()
	topo.Duplicates = 200 * time.Millisecond
	b := newBus(t, topo)
	n := publishRawFixtures(t, b)
	r := newRenormalizer(b, testMapper(t))
	renormalize(t, r, replay.Range{})
	time.Sleep(400 * time.Millisecond)
	if res := renormalize(t, r, replay.Range{}); res.Published != 0 {
		t.Fatalf("second run beyond the window published %d: %+v", res.Published, res)
	}
	if got := eventCount(t, b); got != uint64(n) {
		t.Fatalf("events stream holds %d, want %d", got, n)
	}

	// Proof that the window alone would not have sufficed: the same ids
	// published again now are stored again.
	var again []substate.Event
	for m, err := range newReader(b).Events(context.Background(), "", replay.Range{ToSeq: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		again = append(again, m.Event)
	}
	if err := publishers.NewJetStream(b.JetStream).PublishEvents(context.Background(), again); err != nil {
		t.Fatal(err)
	}
	if got := eventCount(t, b); got != uint64(n+2) {
		t.Fatalf("after the window the server stored %d, want %d", got, n+2)
	}
}

// TestRenormalizeWithNewMappingVersionPublishes checks the purpose: a
// corrected mapping (new version, new ids) publishes its events once.
func TestRenormalizeWithNewMappingVersionPublishes(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	n := publishRawFixtures(t, b)
	r := newRenormalizer(b, testMapper(t))
	renormalize(t, r, replay.Range{})
	r.EventID = func(raw substate.RawEvent, i int) string { return mapping.EventID(raw, i) + "-v2" }
	for range 2 {
		renormalize(t, r, replay.Range{})
	}
	if got := eventCount(t, b); got != uint64(2*n) {
		t.Fatalf("events stream holds %d, want %d", got, 2*n)
	}
}

func TestRenormalizeSinceAndDryRun(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	publishRawFixtures(t, b)
	r := newRenormalizer(b, testMapper(t))
	r.DryRun = true
	res := renormalize(t, r, replay.Range{FromSeq: 3})
	if res.FirstSeq != 3 || res.Published == 0 {
		t.Fatalf("dry run %+v", res)
	}
	if got := eventCount(t, b); got != 0 {
		t.Fatalf("a dry run published %d events", got)
	}
	future := replay.Range{Since: time.Now().Add(time.Hour)}
	if res := renormalize(t, r, future); res.Raw != 0 {
		t.Fatalf("a range after the last message read %+v", res)
	}
}
