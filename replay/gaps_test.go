package replay_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/replay"
)

func gaps(tb testing.TB, b *bus.Bus, normalized uint64) replay.GapResult {
	tb.Helper()
	g := &replay.Gaps{Reader: newReader(b), Mapper: testMapper(tb), EventID: mapping.EventID}
	if normalized > 0 {
		g.Normalized = func(context.Context) (uint64, error) { return normalized, nil }
	}
	res, err := g.Run(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

// The raw messages whose events the events stream lost are found; a raw
// message the mapping rejects, or one the normalizer dead-lettered, is in
// no gap, and neither is one the normalizer has not handled yet.
func TestGaps(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	events := genuine(t, b) // every raw fixture mapped, and one rejected
	ctx := context.Background()
	_, rawLast, _, err := newReader(b).Bounds(ctx, substate.StreamRaw)
	if err != nil {
		t.Fatal(err)
	}
	if res := gaps(t, b, rawLast); res.Failed() || res.FirstSeq != 1 || res.LastSeq != rawLast {
		t.Fatalf("a whole stream: %+v, want raw 1 to %d and no gap", res, rawLast)
	}

	// The events of two raw messages are lost from the events stream.
	s, err := b.JetStream.Stream(ctx, substate.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	lost := map[uint64]bool{events[1].RawRef().Seq: true, events[len(events)-1].RawRef().Seq: true}
	n := 0
	for _, e := range events {
		if lost[e.RawRef().Seq] {
			if err := s.DeleteMsg(ctx, e.Seq); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	res := gaps(t, b, rawLast)
	if res.Count != 2 || res.Events != n || len(res.Gaps) != 2 || !lost[res.Gaps[0].Raw.Seq] || !lost[res.Gaps[1].Raw.Seq] || res.Gaps[0].Of != res.Gaps[0].Events {
		t.Fatalf("gaps %+v, want raw messages %v with %d events", res, lost, n)
	}
	if res := gaps(t, b, 0); res.Count != 1 {
		t.Fatalf("up to the last raw message an event names: %+v, want only the first gap", res)
	}

	// The normalizer dead-lettered one of them (an event too large for
	// the server, say): its events never were in the stream.
	dead := events[1].RawRef().Seq
	publishMsg(t, b.JetStream, substate.DLQSubject(substate.StageNormalize), []byte("{}"), map[string]string{
		substate.HeaderDLQSubject: substate.RawSubject(substate.RawEventBridge), substate.HeaderDLQSeq: strconv.FormatUint(dead, 10)})
	if res := gaps(t, b, rawLast); res.Count != 1 || res.Gaps[0].Raw.Seq == dead {
		t.Fatalf("with a dead letter: %+v, want one gap, not raw %d", res, dead)
	}
}

// A raw message that maps to several events, of which the stream lost
// one, is in a gap of one event.
func TestGapsPartial(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	rows := `{"rows":[` + restateRow("a") + "," + restateRow("b") + "," + restateRow("c") + `]}`
	if err := publishers.NewJetStream(b.JetStream).PublishRaw(context.Background(), substate.RawEvent{Kind: substate.RawRestate, ID: "rows-1", Body: []byte(rows)}); err != nil {
		t.Fatal(err)
	}
	renormalize(t, newRenormalizer(b, testMapper(t)), replay.Range{})
	s, err := b.JetStream.Stream(context.Background(), substate.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if res := gaps(t, b, 1); res.Count != 1 || res.Events != 1 || res.Gaps[0].Of != 3 {
		t.Fatalf("gaps %+v, want 1 of the 3 events of raw 1", res)
	}
}

func restateRow(tenant string) string {
	return `{"id":"inv_` + tenant + `","target_service_key":"` + tenant + `","status":"running","created_at":"2026-11-01T10:00:00Z","modified_at":"2026-11-01T10:00:01Z"}`
}
