package consumers_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/consumers"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// keylessRow is the recorded row of an invocation of a keyless Restate
// service (no tenant under the test rules) with its id and status
// replaced.
func keylessRow(tb testing.TB, id, status, modifiedAt string) []byte {
	tb.Helper()
	var page struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(fixtures.Provider("restate-keyless-completed.json"), &page); err != nil {
		tb.Fatal(err)
	}
	row := page.Rows[0]
	row["id"], row["status"], row["modified_at"] = id, status, modifiedAt
	if status != "completed" {
		delete(row, "completion_result")
	}
	b, err := json.Marshal(row)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Every change of a keyless invocation is another row; only the first
// of each invocation becomes a dead letter. A payload of several rows is
// dead-lettered whole, whatever its rows' invocations.
func TestNormalizerUnresolvedOncePerExecution(t *testing.T) {
	b := newBus(t)
	metrics := consumers.NewMetrics(nil)
	pipelinetest.RunNormalizer(t, b, func(n *consumers.Normalizer) { n.Metrics = metrics })
	const a, c = "inv_1aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "inv_1ccccccccccccccccccccccccccccccccc"
	steps := []struct{ id, status, at string }{
		{a, "scheduled", "2026-11-23T22:55:19.161Z"}, {c, "running", "2026-11-23T22:55:19.200Z"},
		{a, "running", "2026-11-23T22:55:20.000Z"}, {a, "suspended", "2026-11-23T22:55:21.000Z"},
		{c, "completed", "2026-11-23T22:55:22.000Z"}, {a, "completed", "2026-11-23T22:55:23.000Z"},
	}
	for i, s := range steps {
		publishRaw(t, b.JetStream, substate.RawRestate, "row-"+string(rune('a'+i)), keylessRow(t, s.id, s.status, s.at))
	}
	keyed := fixtures.Provider("restate-invocation-running.json")
	var page struct {
		Rows []json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(keyed, &page); err != nil {
		t.Fatal(err)
	}
	both := `{"rows":[` + string(page.Rows[0]) + `,` + string(keylessRow(t, a, "completed", "2026-11-23T22:55:23.000Z")) + `]}`
	publishRaw(t, b.JetStream, substate.RawRestate, "page", []byte(both))
	pipelinetest.WaitFor(t, "raw messages acked", pipelinetest.Settled(t, b.JetStream, substate.StreamRaw, bus.ConsumerNormalizer))

	dlq := streamMsgs(t, b.JetStream, substate.StreamDLQ)
	if got, want := len(dlq), 3; got != want {
		t.Fatalf("%d dead letters, want %d (one per keyless invocation, one for the page)", got, want)
	}
	for i, want := range []struct{ original, names string }{{"row-a", a}, {"row-b", c}, {"page", a}} {
		m := dlq[i]
		reason := m.Header.Get(substate.HeaderDLQReason)
		if got := m.Header.Get(substate.HeaderOriginalMsgID); got != want.original {
			t.Errorf("dead letter %d is of %q, want %q", i, got, want.original)
		}
		if !strings.HasPrefix(reason, substate.ENOTENANT+": no tenant for execution") || !strings.Contains(reason, want.names) {
			t.Errorf("dead letter %d reason %q", i, reason)
		}
		once := strings.Contains(reason, "later events are kept in SUBSTATE_RAW")
		if got, want := once, want.original != "page"; got != want {
			t.Errorf("dead letter %d reason %q: says later events are not dead-lettered: %v, want %v", i, reason, got, want)
		}
	}
	if got, want := pipelinetest.Counter(t, metrics.UnresolvedRepeats, "restate"), 4.0; got != want {
		t.Errorf("repeats counted %v, want %v", got, want)
	}
	if got := streamCount(t, b.JetStream, substate.StreamRaw); got != uint64(len(steps)+1) {
		t.Errorf("SUBSTATE_RAW holds %d messages, want every row (%d)", got, len(steps)+1)
	}
}

// The memory is the stream's, not the normalizer's: an execution another
// worker (or this one before a restart) dead-lettered is not
// dead-lettered again, long after the dead letters' duplicate window.
func TestNormalizerUnresolvedSharedMemory(t *testing.T) {
	b := newBus(t)
	if err := bus.DefaultTopology().EnsureUnresolvedStream(t.Context(), b.JetStream); err != nil {
		t.Fatal(err)
	}
	const known, other = "inv_1kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk", "inv_1ooooooooooooooooooooooooooooooooo"
	elsewhere := &publishers.Unresolved{JS: b.JetStream}
	if err := elsewhere.Remember(t.Context(), substate.ProviderRestate, known); err != nil {
		t.Fatal(err)
	}
	pipelinetest.RunNormalizer(t, b, nil)
	publishRaw(t, b.JetStream, substate.RawRestate, "known", keylessRow(t, known, "running", "2026-11-23T22:55:20.000Z"))
	publishRaw(t, b.JetStream, substate.RawRestate, "other", keylessRow(t, other, "running", "2026-11-23T22:55:20.000Z"))
	pipelinetest.WaitFor(t, "raw messages acked", pipelinetest.Settled(t, b.JetStream, substate.StreamRaw, bus.ConsumerNormalizer))
	dlq := streamMsgs(t, b.JetStream, substate.StreamDLQ)
	if len(dlq) != 1 || dlq[0].Header.Get(substate.HeaderOriginalMsgID) != "other" {
		t.Fatalf("%d dead letters, want only the one of the execution nobody reported", len(dlq))
	}
	if ok, err := elsewhere.Reported(t.Context(), substate.ProviderRestate, other); err != nil || !ok {
		t.Errorf("the execution dead-lettered is not remembered for the others: %v, %v", ok, err)
	}
}

// A memory that cannot answer never costs a dead letter: with
// SUBSTATE_UNRESOLVED deleted under the running normalizer, every
// execution's event is dead-lettered (its repeats are the same dead
// letter, deduplicated by its id), and every raw message is acked.
func TestNormalizerUnresolvedMemoryGone(t *testing.T) {
	b := newBus(t)
	pipelinetest.RunNormalizer(t, b, nil)
	if err := b.JetStream.DeleteStream(t.Context(), substate.StreamUnresolved); err != nil {
		t.Fatal(err)
	}
	const one, two = "inv_1aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "inv_1bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	for i, s := range []struct{ id, status, at string }{
		{one, "running", "2026-11-23T22:55:20.000Z"}, {two, "running", "2026-11-23T22:55:20.000Z"},
		{one, "completed", "2026-11-23T22:55:21.000Z"}, {two, "completed", "2026-11-23T22:55:21.000Z"},
	} {
		publishRaw(t, b.JetStream, substate.RawRestate, "row-"+string(rune('a'+i)), keylessRow(t, s.id, s.status, s.at))
	}
	pipelinetest.WaitFor(t, "raw messages acked", pipelinetest.Settled(t, b.JetStream, substate.StreamRaw, bus.ConsumerNormalizer))
	dlq := streamMsgs(t, b.JetStream, substate.StreamDLQ)
	if len(dlq) != 2 || dlq[0].Header.Get(substate.HeaderOriginalMsgID) != "row-a" || dlq[1].Header.Get(substate.HeaderOriginalMsgID) != "row-b" {
		t.Fatalf("%d dead letters, want one per execution, of its first event", len(dlq))
	}
}
