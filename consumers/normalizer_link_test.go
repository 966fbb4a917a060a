package consumers_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/mapping"
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

// TestNormalizerBatchKeepsEachMessagesEvents: messages normalized in one
// batch, some mapping to one event and a Restate page of two rows to two,
// each keep their own events: every canonical event carries the id the
// mapping gives it from its own raw message and that message's link.
func TestNormalizerBatchKeepsEachMessagesEvents(t *testing.T) {
	b := newBus(t)
	page := []byte(`{"rows":[` + string(restateRow(t, "restate-invocation-running.json")) + `,` +
		string(restateRow(t, "restate-invocation-backing-off.json")) + `]}`)
	raws := []struct {
		kind  substate.RawKind
		id    string
		body  []byte
		count int
	}{
		{substate.RawEventBridge, "eb-1", fixtures.Provider("sfn-status-running.json"), 1},
		{substate.RawRestate, "page-1", page, 2},
		{substate.RawEventBridge, "eb-2", fixtures.Provider("sfn-status-failed.json"), 1},
	}
	for _, r := range raws { // stored before the normalizer starts: one batch
		publishRaw(t, b.JetStream, r.kind, r.id, r.body)
	}
	pipelinetest.RunNormalizer(t, b, nil)
	pipelinetest.WaitFor(t, "raw messages acked", pipelinetest.Settled(t, b.JetStream, substate.StreamRaw, bus.ConsumerNormalizer))

	msgs := streamMsgs(t, b.JetStream, substate.StreamEvents)
	var want []string // each event's id, then its raw id and sequence
	for seq, r := range raws {
		for i := range r.count {
			raw := substate.RawEvent{Kind: r.kind, ID: r.id}
			want = append(want, mapping.EventID(raw, i)+" "+r.id+" "+strconv.Itoa(seq+1))
		}
	}
	if len(msgs) != len(want) {
		t.Fatalf("events stream holds %d, want %d", len(msgs), len(want))
	}
	for i, m := range msgs {
		got := m.Header.Get(substate.HeaderMsgID) + " " + m.Header.Get(substate.HeaderRawID) + " " + m.Header.Get(substate.HeaderRawSeq)
		if got != want[i] {
			t.Errorf("event %d: id, raw id, raw seq %q, want %q", i, got, want[i])
		}
		e, err := substate.UnmarshalEvent(m.Data)
		if err != nil || e.ID != m.Header.Get(substate.HeaderMsgID) {
			t.Errorf("event %d: body id %q (%v), header %q", i, e.ID, err, m.Header.Get(substate.HeaderMsgID))
		}
	}
}

// restateRow is the one row of a recorded Restate admin-API page.
func restateRow(tb testing.TB, name string) json.RawMessage {
	tb.Helper()
	var page struct {
		Rows []json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(fixtures.Provider(name), &page); err != nil || len(page.Rows) != 1 {
		tb.Fatalf("%s: %d rows, %v", name, len(page.Rows), err)
	}
	return page.Rows[0]
}
