package restatetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Send invokes a handler without waiting for its result (the ingress's
// /send), after delay when it is positive, and returns the invocation id.
// key is empty for a keyless service.
func (s *Server) Send(tb testing.TB, service, key, handler string, input any, delay time.Duration) string {
	tb.Helper()
	path := "/" + url.PathEscape(service)
	if key != "" {
		path += "/" + url.PathEscape(key)
	}
	path += "/" + url.PathEscape(handler) + "/send"
	if delay > 0 {
		path += "?delay=" + url.QueryEscape(fmt.Sprintf("%dms", delay.Milliseconds()))
	}
	return s.send(tb, path, input, nil)
}

// SendIdempotent invokes a handler of a keyless service without waiting
// for its result, with an idempotency key (the idempotency-key header),
// which Restate keeps in the invocation's idempotency_key column, and
// returns the invocation id.
func (s *Server) SendIdempotent(tb testing.TB, service, handler, idempotencyKey string, input any) string {
	tb.Helper()
	path := "/" + url.PathEscape(service) + "/" + url.PathEscape(handler) + "/send"
	return s.send(tb, path, input, http.Header{"Idempotency-Key": {idempotencyKey}})
}

// send posts input to an ingress path ending in /send and returns the
// invocation id it answers.
func (s *Server) send(tb testing.TB, path string, input any, header http.Header) string {
	tb.Helper()
	b, err := s.callWith(http.MethodPost, s.IngressURL+path, input, header)
	if err != nil {
		tb.Fatalf("send %s: %v", path, err)
	}
	var out struct {
		InvocationID string `json:"invocationId"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.InvocationID == "" {
		tb.Fatalf("send %s: answer %s: %v", path, b, err)
	}
	return out.InvocationID
}

// Call invokes a handler and returns its JSON result.
func (s *Server) Call(tb testing.TB, service, handler string, input any) json.RawMessage {
	tb.Helper()
	b, err := s.call(http.MethodPost, s.IngressURL+"/"+url.PathEscape(service)+"/"+url.PathEscape(handler), input)
	if err != nil {
		tb.Fatalf("call %s/%s: %v", service, handler, err)
	}
	return b
}

// Query runs SQL on the admin API and returns the rows as Restate sent them.
func (s *Server) Query(tb testing.TB, sql string) []json.RawMessage {
	tb.Helper()
	b, err := s.call(http.MethodPost, s.AdminURL+"/query", map[string]string{"query": sql})
	if err != nil {
		tb.Fatalf("query %q: %v", sql, err)
	}
	var page struct {
		Rows []json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		tb.Fatalf("query %q: answer %s: %v", sql, b, err)
	}
	return page.Rows
}

// Row returns the sys_invocation row of an invocation, decoded, or nil.
func (s *Server) Row(tb testing.TB, id string) map[string]any {
	tb.Helper()
	rows := s.Query(tb, "SELECT * FROM sys_invocation WHERE id = '"+id+"'")
	if len(rows) == 0 {
		return nil
	}
	var row map[string]any
	if err := json.Unmarshal(rows[0], &row); err != nil {
		tb.Fatal(err)
	}
	return row
}

// Kill, Cancel and Resume act on an invocation through the admin API.
func (s *Server) Kill(tb testing.TB, id string)   { s.act(tb, id, "kill") }
func (s *Server) Cancel(tb testing.TB, id string) { s.act(tb, id, "cancel") }
func (s *Server) Resume(tb testing.TB, id string) { s.act(tb, id, "resume") }

func (s *Server) act(tb testing.TB, id, action string) {
	tb.Helper()
	if _, err := s.call(http.MethodPatch, s.AdminURL+"/invocations/"+url.PathEscape(id)+"/"+action, nil); err != nil {
		tb.Fatalf("%s %s: %v", action, id, err)
	}
}

// Gate sets the gate of the Provision object key: "fail" makes flaky fail,
// "open" lets stuck succeed.
func (s *Server) Gate(tb testing.TB, key, gate string) {
	tb.Helper()
	if _, err := s.call(http.MethodGet, s.ControlURL+"/gate?key="+url.QueryEscape(key)+"&gate="+url.QueryEscape(gate), nil); err != nil {
		tb.Fatalf("gate %s=%s: %v", key, gate, err)
	}
}

// Attempts returns how many attempts of invocation id the test service
// has started: the truth a retry count is checked against.
func (s *Server) Attempts(tb testing.TB, id string) int {
	tb.Helper()
	b, err := s.call(http.MethodGet, s.ControlURL+"/attempts?id="+url.QueryEscape(id), nil)
	if err != nil {
		tb.Fatalf("attempts of %s: %v", id, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		tb.Fatalf("attempts of %s: answer %q", id, b)
	}
	return n
}

// WaitRow polls an invocation's row until ok accepts it, and returns it.
func (s *Server) WaitRow(tb testing.TB, id, what string, ok func(map[string]any) bool) map[string]any {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		row := s.Row(tb, id)
		if row != nil && ok(row) {
			return row
		}
		if time.Now().After(deadline) {
			tb.Fatalf("invocation %s: no row %s within a minute; last %v", id, what, row)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
