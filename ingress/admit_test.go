package ingress_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/ingress"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/testkit/bustest"
)

// withID is the test EventBridge event under another id.
func withID(tb testing.TB, id string) []byte {
	return []byte(strings.Replace(string(eventBridgeBody(tb)), `"c3d9b1e5-7f20-4a8c-2b6d-1e9f0a3c5d84"`, `"`+id+`"`, 1))
}

// The normalizer's real durable consumer, with nobody reading it: every
// event posted stays in the backlog, and once it reaches the bound the
// ingress answers 429 with Retry-After and stores nothing more.
func TestIngressThrottlesOnBacklog(t *testing.T) {
	b := bustest.Open(t)
	ctx := context.Background()
	c, err := bus.EnsureConsumer(ctx, b.JetStream, substate.StreamRaw, bus.ConsumerConfig(bus.ConsumerNormalizer, time.Minute, 1))
	if err != nil {
		t.Fatal(err)
	}
	in, srv := newIngress(t, b)
	in.Admission = &ingress.Admission{MaxBacklog: 3, RetryAfter: 5 * time.Second, Backlog: func() uint64 {
		info, err := c.Info(ctx)
		if err != nil {
			t.Error(err)
			return 0
		}
		return info.NumPending + uint64(info.NumAckPending)
	}}
	url := srv.URL + "/v1/ingest/eventbridge"
	key := map[string]string{"X-Api-Key": testAPIKey}
	for i := range 3 {
		if r := post(t, url, withID(t, "e"+string(rune('a'+i))), key); r.status != http.StatusAccepted {
			t.Fatalf("event %d under the bound: %d %v", i, r.status, r.body)
		}
	}
	// The consumer's pending count follows the stream a moment after a
	// publish is acknowledged: admission reads the backlog as last
	// measured, so the test waits until the measure holds all three.
	for deadline := time.Now().Add(10 * time.Second); in.Admission.Backlog() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the normalizer's backlog reads %d, want 3", in.Admission.Backlog())
		}
	}
	resp := postResp(t, url, withID(t, "over"), key)
	if resp.status != http.StatusTooManyRequests || resp.errorCode() != substate.ETHROTTLED || resp.retryAfter != "5" ||
		!strings.Contains(resp.errorMessage(), "3 raw events are waiting") {
		t.Fatalf("over the backlog bound: %d %v Retry-After %q, want 429 throttled with Retry-After 5", resp.status, resp.body, resp.retryAfter)
	}
	if n := bustest.Count(t, b.JetStream, substate.StreamRaw); n != 3 {
		t.Fatalf("raw stream holds %d, want 3", n)
	}
}

// blockingStore holds each publish until the test lets it go.
type blockingStore struct {
	ingress.RawStore
	entered chan struct{}
	release chan struct{}
}

func (s blockingStore) StoreRaw(ctx context.Context, ev substate.RawEvent) (uint64, bool, error) {
	s.entered <- struct{}{}
	<-s.release
	return s.RawStore.StoreRaw(ctx, ev)
}

// While the publishes in flight are at their bound, one more request is
// answered 429 at once; when they complete, requests are taken again.
func TestIngressThrottlesInFlight(t *testing.T) {
	b := bustest.Open(t)
	in, srv := newIngress(t, b)
	store := blockingStore{RawStore: publishers.NewJetStream(b.JetStream), entered: make(chan struct{}, 4), release: make(chan struct{})}
	in.Store = store
	in.Admission = &ingress.Admission{MaxInFlight: 2}
	url := srv.URL + "/v1/ingest/eventbridge"
	key := map[string]string{"X-Api-Key": testAPIKey}
	done := make(chan response, 1)
	go func() { done <- post(t, url, []byte("["+string(withID(t, "a"))+","+string(withID(t, "b"))+"]"), key) }()
	<-store.entered // the batch of two holds the bound
	resp := postResp(t, url, withID(t, "c"), key)
	if resp.status != http.StatusTooManyRequests || resp.retryAfter != "1" {
		t.Fatalf("over the in-flight bound: %d %v Retry-After %q, want 429", resp.status, resp.body, resp.retryAfter)
	}
	close(store.release)
	if r := <-done; r.status != http.StatusAccepted {
		t.Fatalf("the batch in flight: %d %v", r.status, r.body)
	}
	if r := post(t, url, withID(t, "c"), key); r.status != http.StatusAccepted {
		t.Fatalf("after the publishes completed: %d %v", r.status, r.body)
	}
}

// postResp posts like post and also returns the Retry-After header.
func postResp(tb testing.TB, url string, body []byte, header map[string]string) struct {
	response
	retryAfter string
} {
	tb.Helper()
	var ra string
	r := postWith(tb, url, body, header, func(h http.Header) { ra = h.Get("Retry-After") })
	return struct {
		response
		retryAfter string
	}{r, ra}
}
