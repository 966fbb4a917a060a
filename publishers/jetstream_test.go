package publishers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/testkit/bustest"
)

func event(tenant string, i int) substate.Event {
	d := substate.EventData{TenantID: tenant, Provider: substate.ProviderEngine, ExecutionID: "x", SubState: substate.StateRunning}
	d.Normalize()
	return substate.NewEvent(fmt.Sprintf("id-%s-%d", tenant, i), d)
}

func TestPublishEvents(t *testing.T) {
	b := bustest.Open(t)
	p := publishers.NewJetStream(b.JetStream)
	p.MaxInFlight = 7 // fewer than the events, so the publisher waits in between
	var events []substate.Event
	for i := range 50 {
		events = append(events, event("tenant.with dots", i))
	}
	ctx := context.Background()
	if err := p.PublishEvents(ctx, events); err != nil {
		t.Fatal(err)
	}
	if err := p.PublishEvents(ctx, events[:10]); err != nil { // republished: deduplicated by id
		t.Fatal(err)
	}
	if n := bustest.Count(t, b.JetStream, substate.StreamEvents); n != 50 {
		t.Fatalf("events stream holds %d, want 50", n)
	}
	s, _ := b.JetStream.Stream(ctx, substate.StreamEvents)
	m, err := s.GetLastMsgForSubject(ctx, substate.EventsSubject("tenant.with dots"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := substate.UnmarshalEvent(m.Data)
	if err != nil || e.Data.TenantID != "tenant.with dots" || e.ID != "id-tenant.with dots-49" {
		t.Fatalf("last event %+v, %v", e, err)
	}
}

func TestPublishRawNeedsID(t *testing.T) {
	b := bustest.Open(t)
	err := publishers.NewJetStream(b.JetStream).PublishRaw(context.Background(), substate.RawEvent{Kind: substate.RawEngine, Body: []byte("{}")})
	if substate.ErrorCode(err) != substate.EINVALID {
		t.Fatalf("got %v, want EINVALID", err)
	}
}

func TestRawRound(t *testing.T) {
	b := bustest.Open(t)
	p := publishers.NewJetStream(b.JetStream)
	ctx := context.Background()
	raw := substate.RawEvent{Kind: substate.RawEngine, ID: "exec-1/1", Body: []byte(`{"id":"exec-1/1"}`),
		Header: map[string]string{"Webhook-Id": "msg_1"}}
	other := substate.RawEvent{Kind: substate.RawEngine, ID: "exec-1/2", Body: []byte(`{"id":"exec-1/2"}`)}
	r, err := p.NewRawRound(3)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []substate.RawEvent{raw, other, raw} { // the third is a redelivery of the first
		if err := r.Publish(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Publish(other); substate.ErrorCode(err) != substate.EINVALID {
		t.Fatalf("a fourth event in a round of three: %v, want EINVALID", err)
	}
	if dup, err := r.Wait(ctx); err != nil || dup != 1 || r.Len() != 3 {
		t.Fatalf("round: %d duplicates of %d, %v; want 1 of 3", dup, r.Len(), err)
	}
	s, _ := b.JetStream.Stream(ctx, substate.StreamRaw)
	m, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Subject, substate.RawSubject(substate.RawEngine); got != want {
		t.Errorf("subject %q, want %q", got, want)
	}
	for _, h := range []string{substate.HeaderMsgID, substate.HeaderReceivedAt, "Webhook-Id"} {
		if m.Header.Get(h) == "" {
			t.Errorf("header %s missing: %v", h, m.Header)
		}
	}
	if info, _ := s.Info(ctx); info.State.Msgs != 2 {
		t.Errorf("%d messages stored, want 2", info.State.Msgs)
	}
	// The round builds each message in the last one's place: the second
	// carries its own body and id and none of the first's headers; so
	// does a StoreRaw after it, whose messages are pooled.
	if _, _, err := p.StoreRaw(ctx, raw); err != nil {
		t.Fatal(err)
	}
	third := substate.RawEvent{Kind: substate.RawEngine, ID: "exec-1/3", Body: []byte(`{"id":"exec-1/3"}`)}
	if _, _, err := p.StoreRaw(ctx, third); err != nil {
		t.Fatal(err)
	}
	for seq, ev := range map[uint64]substate.RawEvent{2: other, 3: third} {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) != string(ev.Body) || m.Header.Get(substate.HeaderMsgID) != ev.ID || m.Header.Get("Webhook-Id") != "" {
			t.Errorf("message %d: %s, headers %v; want %s with id %s alone", seq, m.Data, m.Header, ev.Body, ev.ID)
		}
	}
	r, _ = p.NewRawRound(1)
	if err := r.Publish(substate.RawEvent{Kind: substate.RawEngine}); substate.ErrorCode(err) != substate.EINVALID {
		t.Fatalf("no id: got %v, want EINVALID", err)
	}
	if dup, err := r.Wait(ctx); err != nil || dup != 0 {
		t.Fatalf("a round with nothing sent: %d, %v", dup, err)
	}
}

// TestStoreRawRefused shows StoreRaw reports what the server answered
// when it stores nothing: no stream for the subject, and a message over
// the stream's size limit.
func TestStoreRawRefused(t *testing.T) {
	b := bustest.Open(t)
	ctx := context.Background()
	p := publishers.NewJetStream(b.JetStream)
	s, err := b.JetStream.Stream(ctx, substate.StreamRaw)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxMsgSize = 512
	if _, err := b.JetStream.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	big := substate.RawEvent{Kind: substate.RawEngine, ID: "big", Body: []byte(`{"x":"` + strings.Repeat("a", 1024) + `"}`)}
	if _, _, err := p.StoreRaw(ctx, big); substate.ErrorCode(err) != substate.EUNAVAILABLE || !strings.Contains(err.Error(), "message size exceeds maximum") {
		t.Fatalf("over the stream's size: %v, want the server's refusal", err)
	}
	if err := b.JetStream.DeleteStream(ctx, substate.StreamRaw); err != nil {
		t.Fatal(err)
	}
	small := substate.RawEvent{Kind: substate.RawEngine, ID: "small", Body: []byte(`{}`)}
	if _, _, err := p.StoreRaw(ctx, small); substate.ErrorCode(err) != substate.EUNAVAILABLE {
		t.Fatalf("no stream: %v, want EUNAVAILABLE", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := p.StoreRaw(cctx, small); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled context: %v", err)
	}
}

func TestPublishDeadLetterOnce(t *testing.T) {
	b := bustest.Open(t)
	p := publishers.NewJetStream(b.JetStream)
	d := substate.DeadLetter{Stage: substate.StageNormalize, Reason: "invalid: bad", Subject: "substate.raw.x", Seq: 7,
		Body: []byte("{"), Header: nats.Header{substate.HeaderMsgID: {"src-1"}, "X-Other": {"a", "b"}}}
	for range 2 {
		if err := p.PublishDeadLetter(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	if n := bustest.Count(t, b.JetStream, substate.StreamDLQ); n != 1 {
		t.Fatalf("DLQ holds %d, want 1", n)
	}
	s, _ := b.JetStream.Stream(context.Background(), substate.StreamDLQ)
	m, err := s.GetMsg(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	h := m.Header
	if h.Get("Substate-Original-Msg-Id") != "src-1" || len(h.Values("X-Other")) != 2 || h.Get(substate.HeaderDLQReason) != "invalid: bad" ||
		h.Get(substate.HeaderDLQSeq) != "7" || h.Get(substate.HeaderDLQStage) != substate.StageNormalize || string(m.Data) != "{" {
		t.Fatalf("dead letter headers %v body %q", h, m.Data)
	}
}

// TestPublishDeadLetterByID keeps input that came from no stream once per id.
func TestPublishDeadLetterByID(t *testing.T) {
	b := bustest.Open(t)
	p := publishers.NewJetStream(b.JetStream)
	for _, id := range []string{"ingest/a", "ingest/a", "ingest/b", ""} {
		d := substate.DeadLetter{Stage: substate.StageIngest, Reason: "invalid: bad", Subject: "/v1/ingest/restate", ID: id, Body: []byte("{")}
		if err := p.PublishDeadLetter(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	if n := bustest.Count(t, b.JetStream, substate.StreamDLQ); n != 3 {
		t.Fatalf("DLQ holds %d, want 3: a and b once, the one without an id", n)
	}
}

// The ingress reads a duplicate's stored body back for every repeated id
// (the 409 check): that costs one direct get, not a JetStream API request
// (a stream lookup) each time.
func TestRawBodyOfDuplicates(t *testing.T) {
	b := bustest.Open(t)
	p := publishers.NewJetStream(b.JetStream)
	ctx := context.Background()
	raw := substate.RawEvent{Kind: substate.RawEngine, ID: "exec-1/1", Body: []byte(`{"id":"exec-1/1"}`)}
	if _, dup, err := p.StoreRaw(ctx, raw); err != nil || dup {
		t.Fatalf("first store: duplicate %v, %v", dup, err)
	}
	apiRequests := func() uint64 {
		info, err := b.JetStream.AccountInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.API.Total
	}
	before := apiRequests()
	for range 20 {
		seq, dup, err := p.StoreRaw(ctx, raw)
		if err != nil || !dup {
			t.Fatalf("repeat: duplicate %v, %v", dup, err)
		}
		body, err := p.RawBody(ctx, seq)
		if err != nil || string(body) != string(raw.Body) {
			t.Fatalf("stored body %q, %v", body, err)
		}
	}
	if n := apiRequests() - before; n > 2 { // the stream looked up once, and the account info itself
		t.Fatalf("%d JetStream API requests for 20 duplicates read back, want at most 2", n)
	}
	if _, err := p.RawBody(ctx, 99); substate.ErrorCode(err) != substate.ENOTFOUND {
		t.Fatalf("a sequence not stored: %v, want ENOTFOUND", err)
	}
}
