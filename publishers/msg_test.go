package publishers

import (
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
)

// TestMsgBuilderReuseForgetsTheLastMessage: a message built in the same
// builder as the one before carries nothing of it.
func TestMsgBuilderReuseForgetsTheLastMessage(t *testing.T) {
	var b msgBuilder
	first := substate.Change{Seq: 1, TenantID: "a", TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	first.New.Provider, first.New.WorkflowSubState = substate.ProviderEngine, substate.StateRunning
	first.New.WorkflowErrorMessage = strings.Repeat("longer than the next body ", 20)
	if err := b.change(&first, ""); err != nil {
		t.Fatal(err)
	}
	if b.m.Header.Get(substate.HeaderTraceParent) == "" {
		t.Fatal("first message has no traceparent")
	}
	b.m.Header.Set("X-Extra", "set by a tracer") // as the tracer's header
	b.m.Reply = "_INBOX.x.1.0"
	second := substate.Change{Seq: 2, TenantID: "b"}
	second.New.Provider, second.New.WorkflowSubState = substate.ProviderEngine, substate.StateSucceeded
	if err := b.change(&second, ""); err != nil {
		t.Fatal(err)
	}
	want, err := ChangeMsg(&second, "")
	if err != nil {
		t.Fatal(err)
	}
	if b.m.Subject != want.Subject || string(b.m.Data) != string(want.Data) || b.m.Reply != "" {
		t.Fatalf("second message %q %q %q, want %q %q", b.m.Subject, b.m.Data, b.m.Reply, want.Subject, want.Data)
	}
	if len(b.m.Header) != len(want.Header) {
		t.Fatalf("second message's headers %v, want %v", b.m.Header, want.Header)
	}
	for k := range want.Header {
		if b.m.Header.Get(k) != want.Header.Get(k) {
			t.Fatalf("header %s = %q, want %q", k, b.m.Header.Get(k), want.Header.Get(k))
		}
	}

	p := &JetStream{}
	ev := substate.NewEvent("e1", substate.EventData{TenantID: "a", Provider: substate.ProviderEngine, SubState: substate.StateRunning})
	ev.Raw = substate.RawRef{Seq: 7, ID: "raw-1"}
	ev.Data.ErrorMessage = strings.Repeat("longer than the next body ", 20)
	if err := p.eventMsg(&b, &ev); err != nil {
		t.Fatal(err)
	}
	ev2 := substate.NewEvent("e2", substate.EventData{TenantID: "b", Provider: substate.ProviderEngine, SubState: substate.StateRunning})
	if err := p.eventMsg(&b, &ev2); err != nil {
		t.Fatal(err)
	}
	if got := b.m.Header.Get(substate.HeaderRawID); got != "" {
		t.Fatalf("second event carries the first's raw id %q", got)
	}
	if got := b.m.Header.Get(substate.HeaderMsgID); got != "e2" {
		t.Fatalf("second event's id %q", got)
	}
	if body, err := substate.MarshalEvent(ev2); err != nil || string(b.m.Data) != string(body) {
		t.Fatalf("second event's body\n%s\nwant\n%s (%v)", b.m.Data, body, err)
	}
}

// A raw builder goes back to the pool holding nothing of its event: no
// body, no header value (a webhook's signature is one).
func TestPutRawBuilderForgetsTheEvent(t *testing.T) {
	p := &JetStream{Now: time.Now}
	var b msgBuilder
	ev := substate.RawEvent{Kind: substate.RawRestate, ID: "msg_1", Body: []byte(`{"id":"inv_1"}`),
		Header: map[string]string{"Webhook-Signature": "v1,secret"}}
	if err := p.rawMsg(&b, ev); err != nil {
		t.Fatal(err)
	}
	putRawBuilder(&b)
	if b.m.Data != nil || len(b.m.Header) != 0 {
		t.Fatalf("pooled message keeps %q, headers %v", b.m.Data, b.m.Header)
	}
	for i, v := range b.vals[:cap(b.vals)] {
		if v != "" {
			t.Fatalf("pooled header value %d is %q", i, v)
		}
	}
}
