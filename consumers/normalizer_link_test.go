package consumers_test

import (
	"strconv"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// TestNormalizerLinksEventsToRawEvidence checks the headers that let an
// audit find the provider payload behind each canonical event.
func TestNormalizerLinksEventsToRawEvidence(t *testing.T) {
	b := newBus(t)
	pipelinetest.RunNormalizer(t, b, nil)
	publishRaw(t, b.JetStream, substate.RawEventBridge, "eb-linked", fixtures.Provider("sfn-status-failed.json"))
	publishRaw(t, b.JetStream, substate.RawEventBridge, "", fixtures.Provider("sfn-status-running.json"))
	pipelinetest.WaitFor(t, "raw messages acked", pipelinetest.Settled(t, b.JetStream, substate.StreamRaw, bus.ConsumerNormalizer))

	msgs := streamMsgs(t, b.JetStream, substate.StreamEvents)
	if len(msgs) != 2 {
		t.Fatalf("events stream holds %d, want 2", len(msgs))
	}
	for i, want := range []struct{ seq, id string }{{"1", "eb-linked"}, {"2", "seq:2"}} {
		h := msgs[i].Header
		if got := h.Get(substate.HeaderRawSeq); got != want.seq {
			t.Errorf("event %d %s = %q, want %q", i, substate.HeaderRawSeq, got, want.seq)
		}
		if got := h.Get(substate.HeaderRawID); got != want.id {
			t.Errorf("event %d %s = %q, want %q", i, substate.HeaderRawID, got, want.id)
		}
	}
	raw := streamMsgs(t, b.JetStream, substate.StreamRaw)
	if got := strconv.FormatUint(raw[0].Sequence, 10); got != msgs[0].Header.Get(substate.HeaderRawSeq) {
		t.Errorf("raw sequence %s is not the linked one", got)
	}
}
