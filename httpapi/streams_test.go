package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/redact"
)

// eventFeed is a feed of the events it holds, which ends after them; it
// records the query it was asked.
type eventFeed struct {
	events []substate.StoredEvent
	asked  *substate.EventStreamQuery
}

func (f eventFeed) FollowEvents(_ context.Context, q substate.EventStreamQuery) iter.Seq2[substate.StoredEvent, error] {
	if f.asked != nil {
		*f.asked = q
	}
	return func(yield func(substate.StoredEvent, error) bool) {
		for _, e := range f.events {
			if !yield(e, nil) {
				return
			}
		}
	}
}

// deadLetterBox holds one page of dead letters.
type deadLetterBox []substate.StoredDeadLetter

func (d deadLetterBox) DeadLetters(context.Context, substate.DeadLetterQuery) (substate.DeadLetterPage, error) {
	return substate.DeadLetterPage{DeadLetters: append([]substate.StoredDeadLetter(nil), d...)}, nil
}

func cloudEvent(tenant string) []byte {
	return []byte(`{"specversion":"1.0","type":"io.substate.execution.failed.v1","data":{"tenantId":"` + tenant + `"}}`)
}

// TestEventStream: GET /v1/events is Server-Sent Events with each event's
// sequence as its id; a key with a tenant prefix gets its tenants' events
// only; Last-Event-ID resumes.
func TestEventStream(t *testing.T) {
	var asked substate.EventStreamQuery
	feed := eventFeed{asked: &asked, events: []substate.StoredEvent{
		{Seq: 3, Data: cloudEvent("acme-1")}, {Seq: 4, Data: cloudEvent("globex-1")}, {Seq: 5, Data: []byte("{\n\"pretty\": true\n}")},
	}}
	s := &httpapi.Server{Auth: exposedAuth(t, keyLine("reader", "read", "*", "k-reader"), keyLine("portal", "read", "acme-", "k-portal")), Events: feed}
	get := func(key, query, lastID string) (int, string) {
		req := httptest.NewRequest(http.MethodGet, "/v1/events"+query, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		if lastID != "" {
			req.Header.Set(substate.HeaderLastEventID, lastID)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	code, body := get("k-reader", "?since=2026-03-01", "")
	want := "retry: 1000\n\n" +
		"id: 3\nevent: event\ndata: " + string(cloudEvent("acme-1")) + "\n\n" +
		"id: 4\nevent: event\ndata: " + string(cloudEvent("globex-1")) + "\n\n" +
		"id: 5\nevent: event\ndata: {\"pretty\":true}\n\n"
	if code != http.StatusOK || body != want {
		t.Errorf("reader: %d\n%q\nwant\n%q", code, body, want)
	}
	if !asked.Since.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("asked %+v", asked)
	}
	if code, body := get("k-portal", "", "7"); code != http.StatusOK || strings.Contains(body, "globex") || !strings.Contains(body, "acme-1") || asked.AfterSeq != 7 {
		t.Errorf("portal: %d %q, asked %+v", code, body, asked)
	}
	for _, tc := range []struct {
		key, query string
		want       int
	}{
		{"k-portal", "?tenant=globex-1", http.StatusForbidden},
		{"k-reader", "?tenant=acme-1&fromStart=maybe", http.StatusBadRequest},
		{"k-reader", "?afterSeq=-1", http.StatusBadRequest},
		{"k-reader", "?tenantId=acme-1", http.StatusBadRequest},
		{"", "", http.StatusUnauthorized},
	} {
		if code, body := get(tc.key, tc.query, ""); code != tc.want || !strings.Contains(body, `"error"`) {
			t.Errorf("%s %s: %d %s, want %d", tc.key, tc.query, code, body, tc.want)
		}
	}
}

// TestDeadLetterVisibility: a payload needs read:raw and is redacted
// below admin; a key with a tenant prefix sees its tenants' dead letters.
func TestDeadLetterVisibility(t *testing.T) {
	payload := `{"tenantId":"acme-1","detail":{"input":"{\"tenantId\":\"acme-1\",\"dbPassword\":\"hunter2\"}"}}`
	box := deadLetterBox{
		{Seq: 1, Stage: "normalize", TenantID: "acme-1", Payload: json.RawMessage(payload)},
		{Seq: 2, Stage: "ingest", Payload: json.RawMessage(`"not json"`)},
	}
	auth := exposedAuth(t, keyLine("reader", "read", "*", "k-reader"), keyLine("raw", "read:raw", "*", "k-raw"),
		keyLine("admin", "admin", "*", "k-admin"), keyLine("portal", "read:raw", "acme-", "k-portal"))
	policy, err := redact.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &httpapi.Server{Auth: auth, DeadLetters: box, Redaction: policy}
	get := func(key string) substate.DeadLetterPage {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/v1/deadletters?stage=normalize&limit=10&since=1h", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		var page substate.DeadLetterPage
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &page) != nil {
			t.Fatalf("%s: %d %s", key, rec.Code, rec.Body)
		}
		return page
	}
	if p := get("k-reader"); len(p.DeadLetters) != 2 || p.DeadLetters[0].Payload != nil || p.DeadLetters[0].PayloadOmitted == "" {
		t.Errorf("read: %+v", p)
	}
	if p := get("k-raw"); strings.Contains(string(p.DeadLetters[0].Payload), "hunter2") || !p.DeadLetters[0].Redacted || string(p.DeadLetters[1].Payload) != `"[redacted]"` {
		t.Errorf("read:raw: %+v", p)
	}
	if p := get("k-admin"); !strings.Contains(string(p.DeadLetters[0].Payload), "hunter2") || p.DeadLetters[0].Redacted {
		t.Errorf("admin: %+v", p)
	}
	if p := get("k-portal"); len(p.DeadLetters) != 1 || p.DeadLetters[0].TenantID != "acme-1" {
		t.Errorf("portal: %+v", p)
	}
}

func TestDeadLetterQuery(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	want := substate.DeadLetterQuery{Stage: "project", Since: now.Add(-time.Hour), AfterSeq: 9, Limit: 5}
	got, err := httpapi.ParseDeadLetterQuery(httpapi.EncodeDeadLetterQuery(want), now)
	if err != nil || got != want {
		t.Errorf("round trip: %+v %v, want %+v", got, err, want)
	}
	for _, q := range []string{"afterSeq=x", "limit=-1", "since=tuesday", "stage=" + strings.Repeat("x", 65), "page=2"} {
		v, _ := url.ParseQuery(q)
		if _, err := httpapi.ParseDeadLetterQuery(v, now); substate.ErrorCode(err) != substate.EINVALID {
			t.Errorf("%s: %v", q, err)
		}
	}
}

// exposedAuth is the Authorizer of a server on a public address with the
// keys of lines.
func exposedAuth(t *testing.T, lines ...string) *httpapi.Authorizer {
	t.Helper()
	a, err := httpapi.NewAuthorizer("0.0.0.0:8080", keyFile(t, lines...))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// blockingFeed yields nothing until its context ends.
type blockingFeed struct{}

func (blockingFeed) FollowEvents(ctx context.Context, _ substate.EventStreamQuery) iter.Seq2[substate.StoredEvent, error] {
	return func(func(substate.StoredEvent, error) bool) { <-ctx.Done() }
}

// TestEventStreamCapAndClose: past MaxEventStreams a stream is answered
// 503 at once, and closing the server ends the streams it serves.
func TestEventStreamCapAndClose(t *testing.T) {
	s := &httpapi.Server{Addr: "127.0.0.1:0", Limits: httpapi.Limits{MaxEventStreams: 1}, Events: blockingFeed{}}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	first, err := http.Get(s.URL() + "/v1/events")
	if err != nil || first.StatusCode != http.StatusOK {
		t.Fatalf("first stream: %v %v", first, err)
	}
	defer first.Body.Close()
	second, err := http.Get(s.URL() + "/v1/events")
	if err != nil || second.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second stream: %v %v", second, err)
	}
	second.Body.Close()
	ended := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(first.Body)
		ended <- err
	}()
	closed := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
		if d := time.Since(closed); d > 5*time.Second {
			t.Errorf("the stream ended %s after Close", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Close left the stream open")
	}
}
