package replay_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/internal/cputime"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/replay"
)

// publishRaw puts n Step Functions status changes on SUBSTATE_RAW, every
// one under its own id, and maps them onto SUBSTATE_EVENTS.
func publishRaw(tb testing.TB, b *bus.Bus, n int) {
	tb.Helper()
	pub := publishers.NewJetStream(b.JetStream)
	body := fixtures.Provider("sfn-status-failed.json")
	for i := range n {
		if err := pub.PublishRaw(context.Background(), substate.RawEvent{Kind: substate.RawEventBridge, ID: fmt.Sprintf("raw-%d", i), Body: body}); err != nil {
			tb.Fatal(err)
		}
	}
	renormalize(tb, newRenormalizer(b, testMapper(tb)), replay.Range{})
}

// A check reads raw messages in batches that span several of the check's
// batches, with raw messages gone from the middle: every event is
// classified as if each were read alone.
func TestCheckReadsRawInBatches(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	publishRaw(t, b, 1300)
	raw, err := b.JetStream.Stream(context.Background(), substate.StreamRaw)
	if err != nil {
		t.Fatal(err)
	}
	gone := []uint64{1, 2, 600, 601, 602, 1024, 1300}
	for _, seq := range gone {
		if err := raw.DeleteMsg(context.Background(), seq); err != nil {
			t.Fatal(err)
		}
	}
	// An event linked to a raw message far away from its neighbours, and
	// one linked to a sequence past the stream's end.
	far := substate.RawRef{Seq: 700, ID: "raw-699"}
	var farEvent replay.Event
	for e, err := range newReader(b).Events(context.Background(), "", replay.Range{}) {
		if err != nil {
			t.Fatal(err)
		}
		if e.RawRef() == far {
			farEvent = e
		}
	}
	forge(t, b, "copy", farEvent.Event, far)
	forge(t, b, "beyond", farEvent.Event, substate.RawRef{Seq: 1 << 40, ID: "raw-x"})

	res := check(t, newChecker(t, b, prometheus.NewRegistry()))
	got := res.Counts
	// The stream's first two are gone as retention removes them: expired.
	want := map[string]int{replay.CheckVerified: 1300 - len(gone) + 1, replay.CheckExpired: 2, replay.CheckMissing: len(gone) - 2 + 1}
	for _, o := range []string{replay.CheckVerified, replay.CheckExpired, replay.CheckMissing, replay.CheckForged} {
		if got[o] != want[o] {
			t.Errorf("%s: got %d, want %d (all counts %v)", o, got[o], want[o], got)
		}
	}
}

// BenchmarkCheck measures the evidence check's rate: raw messages read,
// mapped again and compared, per second of one check.
func BenchmarkCheck(b *testing.B) {
	const n = 5000
	bs := newBus(b, bus.DefaultTopology())
	publishRaw(b, bs, n)
	c := newChecker(b, bs, prometheus.NewRegistry())
	b.ReportAllocs()
	events, cpu := 0, cputime.Process()
	for b.Loop() {
		res := check(b, c)
		if res.Counts[replay.CheckVerified] != n {
			b.Fatalf("counts %v, want %d verified", res.Counts, n)
		}
		events += n
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
	b.ReportMetric(float64((cputime.Process()-cpu).Microseconds())/float64(events), "cpu-µs/event")
}
