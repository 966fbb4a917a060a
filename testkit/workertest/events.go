package workertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ExamplePath returns the path of a file of the repository's examples/
// (the README's provider events), found from the test's directory up.
func ExamplePath(tb testing.TB, name string) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "examples", name)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatalf("no go.mod above the test's directory: cannot find examples/%s", name)
		}
		dir = parent
	}
}

// Example returns the bytes of a file of the repository's examples/.
func Example(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(ExamplePath(tb, name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// RestateStatuses is each tenant's history in RestateRow: two retries, and
// two rows that change nothing (active after running, the same failure
// seen again), which the view holds in memory until its next commit, so a
// crash must not lose them.
var RestateStatuses = []string{"running", "active", "backing-off", "running", "backing-off", "running", "completed", "completed"}

// RestateRow is one webhook delivery of a Restate invocation status: the
// step-th of RestateStatuses for tenant. The rows carry no retry_count, so
// the view infers retries from backing-off → running transitions: a
// redelivery applied twice would count one twice.
func RestateRow(tenant string, step int) []byte {
	row := map[string]any{"id": "inv_" + tenant, "target_service_key": tenant, "status": RestateStatuses[step],
		"created_at":  "2026-11-01T10:00:00Z",
		"modified_at": time.Date(2026, 11, 1, 10, 0, step, 0, time.UTC).Format(time.RFC3339Nano)}
	if RestateStatuses[step] == "backing-off" {
		row["last_failure"] = fmt.Sprintf("[503] attempt %d failed", step)
	}
	if RestateStatuses[step] == "completed" {
		row["completion_result"], row["completion_failure"] = "failure", "[500] gave up"
	}
	b, _ := json.Marshal(row)
	return b
}

// DeliverRow posts a Restate row (or {"rows":[…]}) to the worker at url
// under a webhook id; nil means 202.
func DeliverRow(url, id string, body []byte) error {
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/ingest/restate", bytes.NewReader(body))
	req.Header.Set("webhook-id", id)
	resp, err := ingestClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// PostRows posts n running Restate rows of tenants prefix0000… to the
// worker at url, in requests of 100 rows each ({"rows":[…]}), and fails
// unless each is answered 202.
func PostRows(tb testing.TB, url, prefix string, n int) {
	tb.Helper()
	for start := 0; start < n; start += 100 {
		var rows []map[string]any
		for i := start; i < min(start+100, n); i++ {
			tenant := fmt.Sprintf("%s%04d", prefix, i)
			rows = append(rows, map[string]any{"id": "inv_" + tenant, "target_service_key": tenant, "status": "running",
				"created_at": "2026-11-01T10:00:00Z", "modified_at": "2026-11-01T10:00:01Z"})
		}
		body, _ := json.Marshal(map[string]any{"rows": rows})
		if err := DeliverRow(url, fmt.Sprintf("%s-%d", prefix, start), body); err != nil {
			tb.Fatalf("post rows %s%d: %v", prefix, start, err)
		}
	}
}

// SecretInput is an execution input with the tenant (%s), an order id and
// secrets, as EventBridge carries it: JSON text.
const SecretInput = `{"tenantId":"%s","order":{"id":"ord-1"},"dbPassword":"hunter2","stripeKey":"sk_live_abc"}`

// IngestTenant posts the README's failed Step Functions example to the
// worker at url for a tenant, with SecretInput as its input, a token in its
// output, and the ingest key (none when empty).
func IngestTenant(tb testing.TB, url, tenant, ingestKey string) {
	tb.Helper()
	var ev map[string]any
	if err := json.Unmarshal(Example(tb, "stepfunctions-failed.json"), &ev); err != nil {
		tb.Fatal(err)
	}
	ev["id"] = "ev-" + tenant
	d := ev["detail"].(map[string]any)
	d["input"] = fmt.Sprintf(SecretInput, tenant)
	d["output"] = `{"token":"tok_secret","receipt":"r-1"}`
	d["executionArn"] = d["executionArn"].(string) + "-" + tenant
	body, _ := json.Marshal(ev)
	if code := Post(tb, url+"/v1/ingest/eventbridge", body, map[string]string{"X-Api-Key": ingestKey}); code != http.StatusAccepted {
		tb.Fatalf("ingest %s: %d", tenant, code)
	}
}
