package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/substatehq/substate/testkit/workertest"
)

// TestEventsDLQ is the README's bad input, as a newcomer sees it: each gets
// its answer and "substate events dlq" shows where it went and why.
func TestEventsDLQ(t *testing.T) {
	w := startWorkerProcess(t, t.TempDir())
	nats, nkey := w.nats, w.nkey
	ingest := w.httpURL + "/v1/ingest/eventbridge"
	example := workertest.Example(t, "stepfunctions-failed.json")
	withID := func(id, from, to string) []byte {
		s := strings.Replace(string(example), "3f1c1a52-5a8e-4f0e-9b7a-0c1d2e3f4a51", id, 1)
		return []byte(strings.Replace(s, from, to, 1))
	}
	for _, tc := range []struct {
		body []byte
		want int
	}{
		{[]byte(`{"id": "x",`), http.StatusBadRequest},
		{withID("dt-1", "Step Functions Execution Status Change", "EC2 Instance State-change Notification"), http.StatusAccepted},
		{withID("nt-1", "tenantId", "owner"), http.StatusAccepted},
	} {
		if got := workertest.Post(t, ingest, tc.body, nil); got != tc.want {
			t.Fatalf("post %.30q: %d, want %d", tc.body, got, tc.want)
		}
	}
	var out string
	workertest.Eventually(t, func() string {
		code, o, errOut := runCLI(t, "events", "dlq", "--nats-url", nats, "--nats-nkey", nkey)
		if out = o; code != 0 || strings.Count(out, "\n") != 3 {
			return fmt.Sprintf("events dlq: %d\n%s%s", code, out, errOut)
		}
		return ""
	})
	for _, want := range []string{
		"ingest    seq=1  /v1/ingest/eventbridge  id=-  11 bytes  invalid: body is not valid JSON",
		"normalize seq=2  substate.raw.stepfunctions.eventbridge#1  id=dt-1",
		`detail-type "EC2 Instance State-change Notification"`,
		"normalize seq=3  substate.raw.stepfunctions.eventbridge#2  id=nt-1",
		"tenant_unresolved: no tenant for execution",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("events dlq output lacks %q:\n%s", want, out)
		}
	}

	code, out, _ := runCLI(t, "events", "dlq", "--stage", "normalize", "--json", "--nats-url", nats, "--nats-nkey", nkey)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("events dlq --stage normalize --json: %d\n%s", code, out)
	}
	var d struct {
		Stage, Reason, OriginalID string
		Payload                   map[string]any
		Redacted                  bool
	}
	if err := json.Unmarshal([]byte(lines[1]), &d); err != nil {
		t.Fatal(err)
	}
	if d.Stage != "normalize" || d.OriginalID != "nt-1" || !strings.HasPrefix(d.Reason, "tenant_unresolved: ") || d.Payload["id"] != "nt-1" || !d.Redacted {
		t.Fatalf("dead letter JSON: %+v", d)
	}

	if code, out, errOut := runCLI(t, "events", "dlq", "--stage", "project", "--nats-url", nats, "--nats-nkey", nkey); code != 0 || out != "" {
		t.Fatalf("no dead letters of a stage: %d %q %s", code, out, errOut)
	}
}

// TestOddTenantID: a tenant id that is no subject token goes through the
// pipeline and the commands that name it.
func TestOddTenantID(t *testing.T) {
	w := startWorkerProcess(t, t.TempDir())
	example := workertest.Example(t, "stepfunctions-failed.json")
	const tenant = "acme.eu *>"
	body := strings.Replace(string(example), `\"tenantId\": \"acme\"`, `\"tenantId\": \"`+tenant+`\"`, 1)
	if !strings.Contains(body, tenant) {
		t.Fatal("example input changed: cannot set the tenant")
	}
	if code := workertest.Post(t, w.httpURL+"/v1/ingest/eventbridge", []byte(body), nil); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	code, out, errOut := runCLI(t, "events", "tail", "--from-start", "--count", "1", "--tenant", tenant, "--nats-url", w.nats, "--nats-nkey", w.nkey)
	if code != 0 || !strings.Contains(out, tenant) {
		t.Fatalf("events tail --tenant %q: %d\n%s%s", tenant, code, out, errOut)
	}
	workertest.Eventually(t, func() string {
		code, out, errOut := runCLI(t, "tenants", "get", tenant, "--server", w.httpURL, "--json")
		if code != 0 || !strings.Contains(out, `"workflowSubState": "failed"`) {
			return fmt.Sprintf("tenants get %q: %d %s%s", tenant, code, out, errOut)
		}
		return ""
	})
}
