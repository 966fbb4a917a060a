package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/replay"
)

func compactJSON(tb testing.TB, b []byte) string {
	tb.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		tb.Fatal(err)
	}
	return buf.String()
}

// lookups returns what Evidence.Find needs for every event in the stream.
func lookups(tb testing.TB, b *bus.Bus) []replay.Lookup {
	tb.Helper()
	var out []replay.Lookup
	for m, err := range newReader(b).Events(context.Background(), "", replay.Range{}) {
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, replay.Lookup{EventID: m.Event.ID, Ref: m.RawRef(), StoredAt: m.Stored})
	}
	return out
}

func TestEvidenceFollowsTheRawLink(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	publishRawFixtures(t, b)
	renormalize(t, newRenormalizer(b, testMapper(t)), replay.Range{})
	e := &replay.Evidence{Reader: newReader(b)}
	got, err := e.Find(context.Background(), lookups(t, b))
	if err != nil {
		t.Fatal(err)
	}
	first := got[0]
	if first.Missing != "" || first.Seq != 1 || first.ID != "raw-1" || first.Kind != substate.RawEventBridge {
		t.Fatalf("evidence %+v", first)
	}
	if want := compactJSON(t, fixtures.Provider(fixtures.Providers("sfn-status-*.json")[0])); string(first.Body) != want {
		t.Errorf("body %s, want the compact payload %s", first.Body, want)
	}
}

// TestEvidenceFindsUnlinkedEventsByID covers events published without the
// link headers: their raw message is found by the deterministic event id.
func TestEvidenceFindsUnlinkedEventsByID(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	m := testMapper(t)
	body := fixtures.Provider("restate-invocation-backing-off.json")
	raw := substate.RawEvent{Kind: substate.RawRestate, ID: "wh-7", Body: body}
	if err := publishers.NewJetStream(b.JetStream).PublishRaw(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	publishMsg(t, b.JetStream, substate.RawSubject(substate.RawEngine), []byte(`"noise"`), map[string]string{substate.HeaderMsgID: "other"})
	data, err := m.Map(raw)
	if err != nil {
		t.Fatal(err)
	}
	unlinked := substate.NewEvent(mapping.EventID(raw, 0), data[0]) // no Raw: no headers
	if err := publishers.NewJetStream(b.JetStream).PublishEvents(context.Background(), []substate.Event{unlinked}); err != nil {
		t.Fatal(err)
	}
	ls := lookups(t, b)
	if ls[0].Ref != (substate.RawRef{}) {
		t.Fatalf("event has a link %+v", ls[0].Ref)
	}
	e := &replay.Evidence{Reader: newReader(b), EventID: mapping.EventID}
	got, err := e.Find(context.Background(), ls)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Missing != "" || got[0].ID != "wh-7" || string(got[0].Body) != compactJSON(t, body) {
		t.Fatalf("evidence %+v", got[0])
	}

	e.EventID = nil // without the id function nothing matches
	got, err = e.Find(context.Background(), ls)
	if err != nil || got[0].Missing == "" {
		t.Fatalf("evidence %+v, %v: want it missing", got[0], err)
	}
}

func TestEvidenceExplainsWhatIsMissing(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	publishMsg(t, b.JetStream, substate.RawSubject(substate.RawEngine), []byte("not json"), map[string]string{substate.HeaderMsgID: "a"})
	e := &replay.Evidence{Reader: newReader(b)}
	got, err := e.Find(context.Background(), []replay.Lookup{
		{EventID: "x", Ref: substate.RawRef{Seq: 1, ID: "a"}},
		{EventID: "y", Ref: substate.RawRef{Seq: 1, ID: "b"}},
		{EventID: "z", Ref: substate.RawRef{Seq: 99, ID: "c"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Missing != "" || string(got[0].Body) != `"not json"` {
		t.Errorf("a payload that is not JSON: %+v", got[0])
	}
	if !strings.Contains(got[1].Missing, "another message") {
		t.Errorf("a sequence that holds another id: %+v", got[1])
	}
	if !strings.Contains(got[2].Missing, "retention") {
		t.Errorf("a sequence no longer held: %+v", got[2])
	}
}

// A raw message is mapped again with the headers its mapping reads, as the
// normalizer read them: a stop cause, a traceparent.
func TestRawEventOfKeepsTheMappingsHeaders(t *testing.T) {
	m := replay.Message{Seq: 7, Subject: substate.RawSubject(substate.RawRestate), Data: []byte(`{}`), Header: nats.Header{
		"Nats-Msg-Id": {"row-1/stopped"}, "Substate-Stop-Cause": {"not needed"}, "Substate-Received-At": {"2026-01-01T00:00:00Z"},
	}}
	raw := replay.RawEventOf(m)
	if raw.ID != "row-1/stopped" || raw.Kind != substate.RawRestate || raw.Header[substate.HeaderStopCause] != "not needed" || len(raw.Header) != 1 {
		t.Fatalf("RawEventOf = %+v", raw)
	}
}
