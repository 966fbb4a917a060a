package ingress_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/ingress"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

const testAPIKey = "s3cret-key"

// eventBridgeBody is the body an EventBridge API destination posts.
func eventBridgeBody(tb testing.TB) []byte {
	tb.Helper()
	var req struct {
		Body json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(fixtures.Provider("eventbridge-api-destination-request.json"), &req); err != nil {
		tb.Fatal(err)
	}
	return req.Body
}

func newIngress(tb testing.TB, b *bus.Bus) (*ingress.Ingress, *httptest.Server) {
	tb.Helper()
	pub := publishers.NewJetStream(b.JetStream)
	in := &ingress.Ingress{Store: pub, DeadLetters: pub, APIKey: testAPIKey, Ready: b.Ready, Timeout: 2 * time.Second}
	srv := httptest.NewServer((&httpapi.Server{Ingest: in}).Handler())
	tb.Cleanup(srv.Close)
	return in, srv
}

type response struct {
	status int
	body   map[string]any
}

func post(tb testing.TB, url string, body []byte, header map[string]string) response {
	tb.Helper()
	return postWith(tb, url, body, header, nil)
}

// postWith posts like post and hands the response headers to seen.
func postWith(tb testing.TB, url string, body []byte, header map[string]string, seen func(http.Header)) response {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if seen != nil {
		seen(resp.Header)
	}
	raw, _ := io.ReadAll(resp.Body)
	r := response{status: resp.StatusCode}
	if err := json.Unmarshal(raw, &r.body); err != nil {
		tb.Fatalf("response body is not JSON: %q", raw)
	}
	return r
}

// errorCode returns the code of a {"error":{"code":…}} body.
func (r response) errorCode() string {
	e, _ := r.body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func (r response) errorMessage() string {
	e, _ := r.body["error"].(map[string]any)
	msg, _ := e["message"].(string)
	return msg
}

func TestIngressEventBridge(t *testing.T) {
	b := bustest.Open(t)
	_, srv := newIngress(t, b)
	url := srv.URL + "/v1/ingest/eventbridge"
	key := map[string]string{"X-Api-Key": testAPIKey}
	body := eventBridgeBody(t)

	t.Run("OK", func(t *testing.T) {
		r := post(t, url, body, key)
		if r.status != http.StatusAccepted || r.body["accepted"] != 1.0 {
			t.Fatalf("got %d %v, want 202 accepted 1", r.status, r.body)
		}
		msgs := bustest.Msgs(t, b.JetStream, substate.StreamRaw)
		if len(msgs) != 1 {
			t.Fatalf("raw stream holds %d messages, want 1", len(msgs))
		}
		m := msgs[0]
		if got, want := m.Subject, substate.RawSubject(substate.RawEventBridge); got != want {
			t.Errorf("subject = %q, want %q", got, want)
		}
		if got := m.Header.Get(substate.HeaderMsgID); got != "c3d9b1e5-7f20-4a8c-2b6d-1e9f0a3c5d84" {
			t.Errorf("Nats-Msg-Id = %q, want the EventBridge id", got)
		}
		if !bytes.Equal(m.Data, body) {
			t.Errorf("raw body changed:\n%s\nwant\n%s", m.Data, body)
		}
	})
	t.Run("Duplicate", func(t *testing.T) {
		for range 3 {
			if r := post(t, url, body, key); r.status != http.StatusAccepted {
				t.Fatalf("redelivery: got %d %v, want 202", r.status, r.body)
			}
		}
		if n := bustest.Count(t, b.JetStream, substate.StreamRaw); n != 1 {
			t.Fatalf("raw stream holds %d messages after redeliveries, want 1", n)
		}
	})
	t.Run("Array", func(t *testing.T) {
		arr := []byte(`[` + strings.Replace(string(body), `"c3d9b1e5`, `"a1`, 1) + `,` + strings.Replace(string(body), `"c3d9b1e5`, `"a2`, 1) + `]`)
		r := post(t, url, arr, key)
		if r.status != http.StatusAccepted || r.body["accepted"] != 2.0 {
			t.Fatalf("got %d %v, want 202 accepted 2", r.status, r.body)
		}
		if n := bustest.Count(t, b.JetStream, substate.StreamRaw); n != 3 {
			t.Fatalf("raw stream holds %d messages, want 3", n)
		}
	})
}

func TestIngressErrors(t *testing.T) {
	b := bustest.Open(t)
	_, srv := newIngress(t, b)
	url := srv.URL + "/v1/ingest/eventbridge"
	key := map[string]string{"X-Api-Key": testAPIKey}
	big := append([]byte(`{"id":"x","pad":"`), bytes.Repeat([]byte("a"), ingress.MaxIngestBody)...)
	big = append(big, `"}`...)
	for _, tc := range []struct {
		name   string
		body   []byte
		header map[string]string
		status int
		code   string
		msg    string
	}{
		{"ErrNoKey", eventBridgeBody(t), nil, 401, substate.EUNAUTHORIZED, "X-Api-Key"},
		{"ErrWrongKey", eventBridgeBody(t), map[string]string{"X-Api-Key": "nope"}, 401, substate.EUNAUTHORIZED, "X-Api-Key"},
		{"ErrNotJSON", []byte(`{"id": "x",`), key, 400, substate.EINVALID, "not valid JSON"},
		{"ErrEmpty", nil, key, 400, substate.EINVALID, "empty body"},
		{"ErrScalar", []byte(`42`), key, 400, substate.EINVALID, "JSON object"},
		{"ErrNoID", []byte(`{"detail-type":"Step Functions Execution Status Change"}`), key, 400, substate.EINVALID, `missing "id"`},
		{"ErrEmptyArray", []byte(`[]`), key, 400, substate.EINVALID, "no events"},
		{"ErrArrayItem", []byte(`[{"id":"a"}, 7]`), key, 400, substate.EINVALID, "event 1"},
		// A sender of a large body asks first (curl does above 1 MiB): the
		// server answers 413 from the headers and closes the connection, and
		// a client still writing the body can see the reset before the answer.
		{"ErrTooLarge", big, map[string]string{"X-Api-Key": testAPIKey, "Expect": "100-continue"}, 413, substate.ETOOLARGE, "limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := post(t, url, tc.body, tc.header)
			if r.status != tc.status || r.errorCode() != tc.code || !strings.Contains(r.errorMessage(), tc.msg) {
				t.Fatalf("got %d %v, want %d code %q message containing %q", r.status, r.body, tc.status, tc.code, tc.msg)
			}
		})
	}
	if n := bustest.Count(t, b.JetStream, substate.StreamRaw); n != 0 {
		t.Fatalf("rejected requests stored %d raw messages", n)
	}
	// The six malformed bodies are kept as dead letters; the unauthenticated
	// and the oversized ones are not.
	dlq := bustest.Msgs(t, b.JetStream, substate.StreamDLQ)
	if len(dlq) != 6 {
		t.Fatalf("DLQ holds %d dead letters, want the 6 malformed bodies", len(dlq))
	}
	for _, m := range dlq {
		h := m.Header
		if m.Subject != substate.DLQSubject(substate.StageIngest) || h.Get(substate.HeaderDLQStage) != substate.StageIngest ||
			h.Get(substate.HeaderDLQSubject) != "/v1/ingest/eventbridge" || !strings.HasPrefix(h.Get(substate.HeaderDLQReason), "invalid: ") {
			t.Errorf("dead letter %q: subject %q headers %v", m.Data, m.Subject, h)
		}
		if h.Get("X-Api-Key") != "" {
			t.Errorf("dead letter keeps the API key: %v", h)
		}
	}
	if got := bustest.Msgs(t, b.JetStream, substate.StreamDLQ)[0]; string(got.Data) != `{"id": "x",` ||
		!strings.Contains(got.Header.Get(substate.HeaderDLQReason), "not valid JSON") {
		t.Errorf("first dead letter: %q reason %q", got.Data, got.Header.Get(substate.HeaderDLQReason))
	}
	// The same malformed body again is refused again and kept once.
	if r := post(t, url, []byte(`{"id": "x",`), key); r.status != 400 {
		t.Fatalf("repeated malformed body: got %d %v", r.status, r.body)
	}
	if n := bustest.Count(t, b.JetStream, substate.StreamDLQ); n != 6 {
		t.Fatalf("DLQ holds %d after a repeat, want 6", n)
	}
}

// TestIngressExposed: on a non-loopback address, a route whose credential
// is not configured is closed even when the other route's is.
func TestIngressExposed(t *testing.T) {
	b := bustest.Open(t)
	in, srv := newIngress(t, b)
	in.Exposed = true
	row := fixtures.Provider("restate-invocation-running.json")
	if r := post(t, srv.URL+"/v1/ingest/restate", row, nil); r.status != 401 || !strings.Contains(r.errorMessage(), "no webhook secret") {
		t.Fatalf("restate without a secret: got %d %v, want 401", r.status, r.body)
	}
	if r := post(t, srv.URL+"/v1/ingest/eventbridge", eventBridgeBody(t), map[string]string{"X-Api-Key": testAPIKey}); r.status != 202 {
		t.Fatalf("eventbridge with its key: got %d %v, want 202", r.status, r.body)
	}
	v := fixtures.StandardWebhookVector()
	wv, err := ingress.NewWebhookVerifier(v.Secret)
	if err != nil {
		t.Fatal(err)
	}
	in.APIKey, in.Webhook = "", wv
	if r := post(t, srv.URL+"/v1/ingest/eventbridge", eventBridgeBody(t), nil); r.status != 401 || !strings.Contains(r.errorMessage(), "no API key") {
		t.Fatalf("eventbridge without a key: got %d %v, want 401", r.status, r.body)
	}
	if n := bustest.Count(t, b.JetStream, substate.StreamDLQ); n != 0 {
		t.Fatalf("refused requests left %d dead letters", n)
	}
}

func TestWebhookVerifierVector(t *testing.T) {
	v := fixtures.StandardWebhookVector()
	wv, err := ingress.NewWebhookVerifier(v.Secret)
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := strconv.ParseInt(v.Headers["webhook-timestamp"], 10, 64)
	header := http.Header{}
	for k, val := range v.Headers {
		header.Set(k, val)
	}
	for _, tc := range []struct {
		name string
		now  time.Time
		body string
		mod  func(http.Header)
		code string
	}{
		{"OK", time.Unix(ts, 0), v.Body, nil, ""},
		{"OKWithinTolerance", time.Unix(ts+299, 0), v.Body, nil, ""},
		{"ErrStale", time.Unix(ts+301, 0), v.Body, nil, substate.EUNAUTHORIZED},
		{"ErrFuture", time.Unix(ts-301, 0), v.Body, nil, substate.EUNAUTHORIZED},
		{"ErrBodyChanged", time.Unix(ts, 0), v.Body + " ", nil, substate.EUNAUTHORIZED},
		{"ErrIDChanged", time.Unix(ts, 0), v.Body, func(h http.Header) { h.Set("webhook-id", "msg_other") }, substate.EUNAUTHORIZED},
		{"ErrNoSignature", time.Unix(ts, 0), v.Body, func(h http.Header) { h.Del("webhook-signature") }, substate.EUNAUTHORIZED},
		{"OKSecondSignature", time.Unix(ts, 0), v.Body, func(h http.Header) {
			h.Set("webhook-signature", "v1,bm90IGl0 "+h.Get("webhook-signature"))
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wv.Now = func() time.Time { return tc.now }
			h := header.Clone()
			if tc.mod != nil {
				tc.mod(h)
			}
			if got := substate.ErrorCode(wv.Verify([]byte(tc.body), h)); got != tc.code {
				t.Fatalf("Verify: code %q, want %q", got, tc.code)
			}
		})
	}
	if _, err := ingress.NewWebhookVerifier("not-a-secret"); substate.ErrorCode(err) != substate.EINVALID {
		t.Fatalf("bad secret: %v, want EINVALID", err)
	}
}

// signedRestate opens the Restate route of in with the test vector's
// secret, at a clock stopped at now, and returns the route's URL and what
// signs a delivery as the sender would: the Standard Webhooks headers of
// body under id, sent at.
func signedRestate(tb testing.TB, in *ingress.Ingress, srv *httptest.Server) (url string, now time.Time, sign func(id string, at time.Time, body []byte) map[string]string) {
	tb.Helper()
	v := fixtures.StandardWebhookVector()
	wv, err := ingress.NewWebhookVerifier(v.Secret)
	if err != nil {
		tb.Fatal(err)
	}
	now = time.Now()
	wv.Now = func() time.Time { return now }
	in.Webhook = wv
	return srv.URL + "/v1/ingest/restate", now, func(id string, at time.Time, body []byte) map[string]string {
		sig := signWebhook(tb, v.Secret, id, at, body)
		return map[string]string{"webhook-id": id, "webhook-timestamp": strconv.FormatInt(at.Unix(), 10), "webhook-signature": sig}
	}
}

func TestIngressRestate(t *testing.T) {
	b := bustest.Open(t)
	in, srv := newIngress(t, b)
	url, now, sign := signedRestate(t, in, srv)
	row := fixtures.Provider("restate-invocation-running.json")

	if r := post(t, url, row, sign("msg_1", now, row)); r.status != http.StatusAccepted {
		t.Fatalf("signed row: got %d %v", r.status, r.body)
	}
	if r := post(t, url, row, sign("msg_1", now, row)); r.status != http.StatusAccepted {
		t.Fatalf("redelivered row: got %d %v", r.status, r.body)
	}
	if r := post(t, url, row, sign("msg_2", now.Add(-6*time.Minute), row)); r.status != 401 || r.errorCode() != substate.EUNAUTHORIZED {
		t.Fatalf("stale timestamp: got %d %v, want 401", r.status, r.body)
	}
	if r := post(t, url, row, sign("msg_3", now, []byte(`{"other":1}`))); r.status != 401 {
		t.Fatalf("wrong signature: got %d %v, want 401", r.status, r.body)
	}
	if r := post(t, url, []byte(`[1]`), sign("msg_4", now, []byte(`[1]`))); r.status != 400 {
		t.Fatalf("array body: got %d %v, want 400", r.status, r.body)
	}
	msgs := bustest.Msgs(t, b.JetStream, substate.StreamRaw)
	if len(msgs) != 1 || msgs[0].Header.Get(substate.HeaderMsgID) != "msg_1" || msgs[0].Subject != substate.RawSubject(substate.RawRestate) {
		t.Fatalf("raw stream: %d messages, want the one signed row with id msg_1", len(msgs))
	}
}

func TestIngressNATSUnavailable(t *testing.T) {
	ns := newRestartable(t)
	b, err := bus.Open(bus.Config{URL: ns.url()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ensureStreams(t, b.JetStream)
	_, srv := newIngress(t, b)
	url := srv.URL + "/v1/ingest/eventbridge"
	key := map[string]string{"X-Api-Key": testAPIKey}
	event := func(id string) []byte {
		return []byte(strings.Replace(string(eventBridgeBody(t)), "c3d9b1e5-7f20-4a8c-2b6d-1e9f0a3c5d84", id, 1))
	}

	if r := post(t, url, event("before"), key); r.status != http.StatusAccepted {
		t.Fatalf("before the outage: got %d %v", r.status, r.body)
	}
	ns.stop()
	pipelinetest.WaitFor(t, "the client to notice the outage", func() bool { return !b.Ready() })
	r := post(t, url, event("during"), key)
	if r.status != http.StatusServiceUnavailable || r.errorCode() != substate.EUNAVAILABLE {
		t.Fatalf("during the outage: got %d %v, want 503", r.status, r.body)
	}
	// A malformed body cannot be kept as a dead letter now: 503, so the
	// provider retries it.
	if r := post(t, url, []byte(`{"id":`), key); r.status != http.StatusServiceUnavailable {
		t.Fatalf("malformed during the outage: got %d %v, want 503", r.status, r.body)
	}
	ns.start()
	pipelinetest.WaitFor(t, "the client to reconnect", b.Ready)
	// The provider retries what got a 503.
	for _, id := range []string{"during", "after"} {
		if r := post(t, url, event(id), key); r.status != http.StatusAccepted {
			t.Fatalf("after the outage, %s: got %d %v", id, r.status, r.body)
		}
	}
	var ids []string
	for _, m := range bustest.Msgs(t, b.JetStream, substate.StreamRaw) {
		ids = append(ids, m.Header.Get(substate.HeaderMsgID))
	}
	if got, want := strings.Join(ids, ","), "before,during,after"; got != want {
		t.Fatalf("raw stream ids = %s, want %s", got, want)
	}
	if r := post(t, url, []byte(`{"id":`), key); r.status != http.StatusBadRequest {
		t.Fatalf("malformed after the outage: got %d %v, want 400", r.status, r.body)
	}
	if n := bustest.Count(t, b.JetStream, substate.StreamDLQ); n != 1 {
		t.Fatalf("DLQ holds %d, want the malformed body once", n)
	}
}
