package restate

import (
	"encoding/json"
	"testing"
)

// TestEffectivePolicy picks a handler's retry policy out of a
// /services/{name} answer as a real 1.7.12 server writes it: a handler's
// unset settings are null and the service's apply.
func TestEffectivePolicy(t *testing.T) {
	service := json.RawMessage(`{"name":"Provision","handlers":[
		{"name":"ok","retry_policy":{"max_attempts":null}},
		{"name":"stuck","retry_policy":{"initial_interval":"200ms","max_attempts":3,"max_interval":"200ms","on_max_attempts":"Pause"}},
		{"name":"kills","retry_policy":{"max_attempts":5,"on_max_attempts":"Kill"}},
		{"name":"bare"}],
		"retry_policy":{"initial_interval":"500ms","exponentiation_factor":2.0,"max_attempts":70,"max_interval":"1m","on_max_attempts":"Pause"}}`)
	tests := []struct {
		service json.RawMessage
		handler string
		want    string
	}{
		{service, "stuck", `{"max_attempts":3,"on_max_attempts":"Pause"}`},
		{service, "ok", `{"max_attempts":70,"on_max_attempts":"Pause"}`},
		{service, "kills", `{"max_attempts":5,"on_max_attempts":"Kill"}`},
		{service, "bare", `{"max_attempts":70,"on_max_attempts":"Pause"}`},
		{service, "unknown", `{"max_attempts":70,"on_max_attempts":"Pause"}`},
		{json.RawMessage(`{"handlers":[{"name":"x","retry_policy":{"max_attempts":3}}]}`), "x", ""},
		{json.RawMessage(`not json`), "x", ""},
		{nil, "x", ""},
	}
	for _, tt := range tests {
		if got := string(effectivePolicy(tt.service, tt.handler)); got != tt.want {
			t.Errorf("%s of %.40s: got %s, want %s", tt.handler, tt.service, got, tt.want)
		}
	}
}

// TestAttachFailures adds the journal and the policy to a row object and
// leaves anything else alone.
func TestAttachFailures(t *testing.T) {
	events := []json.RawMessage{json.RawMessage(`{"event_type":"Paused"}`)}
	policy := json.RawMessage(`{"max_attempts":3,"on_max_attempts":"Pause"}`)
	got := attachFailures(json.RawMessage(` {"id":"inv_1","status":"paused"} `), events, policy)
	want := `{"id":"inv_1","status":"paused","sys_journal_events":[{"event_type":"Paused"}],"sys_journal_events_count":1,"handler_retry_policy":{"max_attempts":3,"on_max_attempts":"Pause"}}`
	if string(got) != want || !json.Valid(got) {
		t.Errorf("got %s\nwant %s", got, want)
	}
	for _, row := range []string{`[1]`, `{}x`, ``} {
		if got := attachFailures(json.RawMessage(row), events, policy); string(got) != row {
			t.Errorf("%q: got %s, want it unchanged", row, got)
		}
	}
	if got := attachFailures(json.RawMessage(`{"id":"inv_1"}`), nil, policy); string(got) != `{"id":"inv_1"}` {
		t.Errorf("no events: got %s", got)
	}
	if !hasPaused(events) || hasPaused([]json.RawMessage{json.RawMessage(`{"event_type":"TransientError"}`)}) {
		t.Error("hasPaused")
	}
}

// TestRestateRawID checks the raw event id of a row: the same row polled
// twice keeps it (JetStream drops the second), and a change of anything
// the view shows under one modified_at, as a real server reports retries,
// changes it.
func TestRestateRawID(t *testing.T) {
	base := map[string]any{"id": "inv_1", "status": "backing-off", "modified_at": "2026-11-23T20:35:10.667Z",
		"retry_count": 1, "next_retry_at": "2026-11-23T20:35:13.044Z", "last_failure": "[500 Internal] boom (attempt 1)"}
	id := func(change map[string]any) string {
		row := map[string]any{}
		for k, v := range base {
			row[k] = v
		}
		for k, v := range change {
			row[k] = v
		}
		b, _ := json.Marshal(row)
		return restateRaw("inv_1", "2026-11-23T20:35:10.667Z", b).ID
	}
	first := id(nil)
	if again := id(nil); again != first {
		t.Fatalf("the same row got ids %s and %s", first, again)
	}
	seen := map[string]string{first: "base"}
	for name, change := range map[string]map[string]any{
		"status":       {"status": "running"},
		"retry_count":  {"retry_count": 2},
		"next_retry":   {"next_retry_at": "2026-11-23T20:35:14.100Z"},
		"last_failure": {"last_failure": "[500 Internal] boom (attempt 2)"},
	} {
		got := id(change)
		if other, dup := seen[got]; dup {
			t.Errorf("a change of %s kept the id of %s: %s", name, other, got)
		}
		seen[got] = name
	}
}
