package replay_test

import (
	"context"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/replay"
)

func TestHistory(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	publish(t, b,
		engineEvent("a", 1, substate.StateRunning),
		engineEvent("other", 1, substate.StateRunning),
		engineEvent("a", 3, substate.StateError),
		engineEvent("a", 2, substate.StateRunning), // late
	)
	publishMsg(t, b.JetStream, substate.EventsSubject("a"), []byte("not an event"), map[string]string{substate.HeaderMsgID: "junk-1"})
	h := replay.NewHistory(b.JetStream)
	ctx := context.Background()

	t.Run("OK", func(t *testing.T) {
		page, err := h.History(ctx, substate.HistoryQuery{TenantID: "a"})
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			seq      uint64
			outcome  string
			old, new substate.SubState
		}{
			{1, substate.OutcomeChanged, "", substate.StateRunning},
			{3, substate.OutcomeChanged, substate.StateRunning, substate.StateError},
			{4, substate.OutcomeStale, substate.StateError, substate.StateError},
			{5, substate.OutcomeInvalid, substate.StateError, substate.StateError},
		}
		if len(page.Transitions) != len(want) || page.NextAfterSeq != 0 {
			t.Fatalf("page %+v, want %d transitions", page, len(want))
		}
		for i, w := range want {
			got := page.Transitions[i]
			if got.Seq != w.seq || got.Outcome != w.outcome || got.Old.SubState != w.old || got.New.SubState != w.new {
				t.Errorf("transition %d: seq %d %s %s → %s, want seq %d %s %s → %s",
					i, got.Seq, got.Outcome, got.Old.SubState, got.New.SubState, w.seq, w.outcome, w.old, w.new)
			}
		}
		if inv := page.Transitions[3]; inv.EventID != "junk-1" || inv.Reason == "" {
			t.Errorf("invalid message told as %+v, want its id and the reason", inv)
		}
	})
	t.Run("Pages", func(t *testing.T) {
		// A later page folds from the tenant's first event all the same.
		first, err := h.History(ctx, substate.HistoryQuery{TenantID: "a", Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(first.Transitions) != 2 || first.NextAfterSeq != 3 {
			t.Fatalf("first page %+v, want 2 transitions, next after 3", first)
		}
		next, err := h.History(ctx, substate.HistoryQuery{TenantID: "a", AfterSeq: first.NextAfterSeq})
		if err != nil {
			t.Fatal(err)
		}
		if len(next.Transitions) != 2 || next.Transitions[0].Seq != 4 || next.Transitions[0].Old.SubState != substate.StateError {
			t.Fatalf("next page %+v, want seq 4 folded on the error", next)
		}
	})
	t.Run("Raw", func(t *testing.T) {
		page, err := h.History(ctx, substate.HistoryQuery{TenantID: "a", Limit: 1, Raw: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Transitions) != 1 || page.Transitions[0].Raw == nil || page.Transitions[0].Raw.Missing == "" {
			t.Fatalf("page %+v, want the evidence told missing (the event was published without a raw message)", page)
		}
	})
}
