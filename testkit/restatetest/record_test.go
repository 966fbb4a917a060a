package restatetest_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate/testkit/restatetest"
)

var record = flag.Bool("record", false, "record the Restate fixture rows of internal/fixtures/providers from the real server")

// TestRecordFixtures records, with -record, one sys_invocation row per
// status from a real server into internal/fixtures/providers, as the admin
// API's /query answers them ({"rows":[…]}). The service's folder in stack
// traces is replaced by /srv/provision. The paused row carries its
// journal's failure events and its handler's retry policy as the poller
// attaches them.
func TestRecordFixtures(t *testing.T) {
	if !*record {
		t.Skip("run with -record to record the Restate fixture rows")
	}
	s := restatetest.Start(t)
	rows := map[string]json.RawMessage{}
	status := func(st string) func(map[string]any) bool {
		return func(r map[string]any) bool { return r["status"] == st }
	}
	keep := func(name, id string, ok func(map[string]any) bool) {
		s.WaitRow(t, id, name, ok)
		rows[name] = s.Query(t, "SELECT * FROM sys_invocation WHERE id = '"+id+"'")[0]
	}
	busy := s.Send(t, "Provision", "wayne", "busy", map[string]int{"ms": 3000}, 0)
	keep("running", busy, status("running"))
	keep("pending", s.Send(t, "Provision", "wayne", "ok", nil, 0), status("pending"))
	keep("scheduled", s.Send(t, "Provision", "initech", "ok", nil, time.Hour), status("scheduled"))
	s.Gate(t, "globex", "fail")
	flaky := s.Send(t, "Provision", "globex", "flaky", nil, 0)
	keep("backing-off", flaky, func(r map[string]any) bool { return r["status"] == "backing-off" && r["retry_count"] == 2.0 })
	s.Gate(t, "globex", "open")
	keep("completed-success", flaky, status("completed"))
	keep("completed-failure", s.Send(t, "Provision", "umbrella", "terminal", nil, 0), status("completed"))
	nap := s.Send(t, "Provision", "hooli", "nap", nil, 0)
	keep("suspended", nap, status("suspended"))
	s.Kill(t, nap)
	keep("completed-killed", nap, status("completed"))
	stuck := s.Send(t, "Provision", "stark", "stuck", nil, 0)
	keep("paused", stuck, status("paused"))
	events := s.Query(t, "SELECT id, appended_at, event_type, event_json FROM sys_journal_events WHERE id = '"+stuck+
		"' AND event_type IN ('TransientError', 'Paused') ORDER BY appended_at")
	rows["paused"] = withJournal(t, rows["paused"], events, handlerPolicy(t, s, "Provision", "stuck"))
	keep("keyless-completed", s.Send(t, "Notify", "", "send", nil, 0), status("completed"))

	dir := filepath.Join(restatetest.Dir(), "..", "..", "fixtures", "providers")
	for name, row := range rows {
		row = bytes.ReplaceAll(row, []byte(restatetest.Dir()), []byte("/srv/provision"))
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, []byte(`{"rows":[`+string(row)+`]}`), "", "  "); err != nil {
			t.Fatal(err)
		}
		pretty.WriteByte('\n')
		if strings.Contains(pretty.String(), restatetest.Dir()) {
			t.Fatalf("%s still names the service's folder", name)
		}
		file := "restate-invocation-" + name + ".json"
		if name == "keyless-completed" { // no tenant: not a restate-invocation-* case
			file = "restate-keyless-completed.json"
		}
		if err := os.WriteFile(filepath.Join(dir, file), pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// handlerPolicy returns the handler's retry policy as the poller attaches
// it: max_attempts and on_max_attempts from GET /services/{service} (the
// test service sets both on the handlers it records paused).
func handlerPolicy(t *testing.T, s *restatetest.Server, service, handler string) json.RawMessage {
	t.Helper()
	resp, err := http.Get(s.AdminURL + "/services/" + service)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var svc struct {
		Handlers []struct {
			Name   string `json:"name"`
			Policy struct {
				MaxAttempts   *int    `json:"max_attempts"`
				OnMaxAttempts *string `json:"on_max_attempts"`
			} `json:"retry_policy"`
		} `json:"handlers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&svc); err != nil {
		t.Fatal(err)
	}
	for _, h := range svc.Handlers {
		if h.Name == handler && h.Policy.MaxAttempts != nil && h.Policy.OnMaxAttempts != nil {
			b, _ := json.Marshal(h.Policy)
			return b
		}
	}
	t.Fatalf("service %s has no retry policy for %s", service, handler)
	return nil
}

// withJournal adds the journal events and the handler's retry policy to a
// row as the poller does.
func withJournal(t *testing.T, row json.RawMessage, events []json.RawMessage, policy json.RawMessage) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(row, &m); err != nil {
		t.Fatal(err)
	}
	m["sys_journal_events"], _ = json.Marshal(events)
	m["sys_journal_events_count"], _ = json.Marshal(len(events))
	m["handler_retry_policy"] = policy
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
