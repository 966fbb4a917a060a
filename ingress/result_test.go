package ingress_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/testkit/bustest"
)

// events returns the per-event outcomes of a 202 body as "id:result".
func (r response) events() []string {
	var out []string
	list, _ := r.body["events"].([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		out = append(out, m["id"].(string)+":"+m["result"].(string))
	}
	return out
}

// A reused Standard Webhooks id with another, validly signed body is not
// a redelivery: 409 with the JSON error, and the body kept on the DLQ
// with the reason. The same body again is a duplicate, reported as such.
func TestIngressReusedWebhookID(t *testing.T) {
	b := bustest.Open(t)
	in, srv := newIngress(t, b)
	url, now, signAt := signedRestate(t, in, srv)
	sign := func(id string, body []byte) map[string]string { return signAt(id, now, body) }
	row := fixtures.Provider("restate-invocation-running.json")
	other := []byte(strings.Replace(string(row), `"running"`, `"suspended"`, 1))
	if string(other) == string(row) {
		t.Fatal("fixture has no running status to change")
	}

	if r := post(t, url, row, sign("msg_1", row)); r.status != http.StatusAccepted || r.body["accepted"] != 1.0 || r.body["duplicates"] != 0.0 {
		t.Fatalf("first delivery: %d %v", r.status, r.body)
	}
	r := post(t, url, row, sign("msg_1", row))
	if r.status != http.StatusAccepted || r.body["accepted"] != 0.0 || r.body["duplicates"] != 1.0 || strings.Join(r.events(), ",") != "msg_1:duplicate" {
		t.Fatalf("redelivery: %d %v, want 202 with one duplicate", r.status, r.body)
	}
	r = post(t, url, other, sign("msg_1", other))
	if r.status != http.StatusConflict || r.errorCode() != substate.ECONFLICT || !strings.Contains(r.errorMessage(), `"msg_1" was already accepted with a different body`) {
		t.Fatalf("reused id, new body: %d %v, want 409 conflict", r.status, r.body)
	}
	if n := bustest.Count(t, b.JetStream, substate.StreamRaw); n != 1 {
		t.Fatalf("raw stream holds %d messages, want the first only", n)
	}
	dlq := bustest.Msgs(t, b.JetStream, substate.StreamDLQ)
	if len(dlq) != 1 || string(dlq[0].Data) != string(other) || dlq[0].Header.Get("webhook-id") != "msg_1" ||
		!strings.HasPrefix(dlq[0].Header.Get(substate.HeaderDLQReason), "conflict: source id \"msg_1\"") {
		t.Fatalf("dead letters %d, want the refused body with its id and reason", len(dlq))
	}
}

// Every event of a batch is reported, and two events sharing an id in one
// array are one stored and one duplicate, never "accepted":2.
func TestIngressBatchOutcomes(t *testing.T) {
	b := bustest.Open(t)
	_, srv := newIngress(t, b)
	url := srv.URL + "/v1/ingest/eventbridge"
	key := map[string]string{"X-Api-Key": testAPIKey}
	body := string(eventBridgeBody(t))
	withID := func(id string) string {
		return strings.Replace(body, `"c3d9b1e5-7f20-4a8c-2b6d-1e9f0a3c5d84"`, `"`+id+`"`, 1)
	}

	r := post(t, url, []byte("["+withID("a")+","+withID("a")+","+withID("b")+"]"), key)
	if r.status != http.StatusAccepted || r.body["accepted"] != 2.0 || r.body["duplicates"] != 1.0 ||
		strings.Join(r.events(), ",") != "a:accepted,a:duplicate,b:accepted" {
		t.Fatalf("batch with a repeated id: %d %v", r.status, r.body)
	}
	if n := bustest.Count(t, b.JetStream, substate.StreamRaw); n != 2 {
		t.Fatalf("raw stream holds %d, want 2", n)
	}
	// The same event laid out differently is the same event.
	r = post(t, url, []byte("[\n  "+withID("b")+"\n]"), key)
	if r.status != http.StatusAccepted || r.body["duplicates"] != 1.0 {
		t.Fatalf("redelivery with other whitespace: %d %v", r.status, r.body)
	}
	changed := strings.Replace(withID("c"), `"FAILED"`, `"SUCCEEDED"`, 1)
	r = post(t, url, []byte("["+withID("c")+","+changed+"]"), key)
	if r.status != http.StatusConflict || !strings.Contains(r.errorMessage(), "event 1: source id \"c\"") {
		t.Fatalf("two bodies under one id in a batch: %d %v, want 409 naming event 1", r.status, r.body)
	}
	if n := bustest.Count(t, b.JetStream, substate.StreamDLQ); n != 1 {
		t.Fatalf("dead letters %d, want the refused batch", n)
	}
	// A conflict does not drop the events after it: the sender does not
	// retry a 409.
	r = post(t, url, []byte("["+changed+","+withID("d")+","+changed+","+withID("e")+"]"), key)
	if r.status != http.StatusConflict || !strings.Contains(r.errorMessage(), "event 0: source id \"c\"") ||
		!strings.Contains(r.errorMessage(), "2 events of the request conflict, the other 2 were stored") {
		t.Fatalf("conflicts around new events: %d %v, want 409 naming event 0 and counting the rest", r.status, r.body)
	}
	var ids []string
	for _, m := range bustest.Msgs(t, b.JetStream, substate.StreamRaw) {
		ids = append(ids, m.Header.Get(substate.HeaderMsgID))
	}
	if got, want := strings.Join(ids, ","), "a,b,c,d,e"; got != want {
		t.Fatalf("raw stream ids %s, want %s", got, want)
	}
	if n := bustest.Count(t, b.JetStream, substate.StreamDLQ); n != 2 {
		t.Fatalf("dead letters %d, want both refused batches", n)
	}
}
