package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/workertest"
)

// TestStreamsOverHTTP: "events tail", "events dlq" and "audit" read a
// running worker through its HTTP API with --server and --api-key, as the
// other commands do: the tail streams live changes, a key with a tenant
// prefix sees its tenants only, a dead letter's payload needs read:raw
// and is redacted below admin.
func TestStreamsOverHTTP(t *testing.T) {
	keys := strings.Join([]string{
		"reader read * sha256:" + workertest.KeyHash("k-reader"),
		"portal read:raw acme- sha256:" + workertest.KeyHash("k-portal"),
		"admin admin * sha256:" + workertest.KeyHash("k-admin"),
	}, ";")
	base := startWorkerProcess(t, t.TempDir(), "--api-keys", keys).httpURL
	workertest.IngestTenant(t, base, "acme-1", "")
	workertest.IngestTenant(t, base, "globex-1", "")
	over := func(key string, args ...string) (int, string, string) {
		t.Helper()
		return runCLIFor(t, 20*time.Second, append(args, "--server", base, "--api-key", key)...)
	}

	t.Run("TailLive", func(t *testing.T) {
		type result struct {
			code     int
			out, err string
		}
		done := make(chan result, 1)
		go func() {
			code, out, errOut := over("k-reader", "events", "tail", "--count", "2", "-o", "json")
			done <- result{code, out, errOut}
		}()
		// The tail starts with the events stored from its start on: keep
		// ingesting new tenants until it has printed two of them.
		var r result
		for i := 0; ; i++ {
			workertest.IngestTenant(t, base, fmt.Sprintf("live-%d", i), "")
			select {
			case r = <-done:
			case <-time.After(200 * time.Millisecond):
				continue
			}
			break
		}
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		if r.code != 0 || len(lines) != 2 {
			t.Fatalf("events tail --count 2: exit %d\n%s%s", r.code, r.out, r.err)
		}
		for _, l := range lines {
			var e substate.Event
			if err := json.Unmarshal([]byte(l), &e); err != nil || !strings.HasPrefix(e.Data.TenantID, "live-") {
				t.Errorf("not a live event: %v %s", err, l)
			}
		}
	})
	t.Run("TailPrefixKey", func(t *testing.T) {
		code, out, errOut := over("k-portal", "events", "tail", "--from-start", "--idle-timeout", "1s")
		if code != 0 || !strings.Contains(out, "acme-1") || strings.Contains(out, "globex") || strings.Contains(out, "live-") {
			t.Errorf("tail with a key for acme-: exit %d\n%s%s", code, out, errOut)
		}
		code, _, errOut = over("k-portal", "events", "tail", "--tenant", "globex-1", "--from-start")
		if code != 1 || !strings.Contains(errOut, "HTTP 403") {
			t.Errorf("tail of another tenant: exit %d %s", code, errOut)
		}
		code, _, errOut = over("", "events", "tail", "--from-start")
		if code != 1 || !strings.Contains(errOut, "HTTP 401") {
			t.Errorf("tail without a key: exit %d %s", code, errOut)
		}
	})
	t.Run("DeadLetters", func(t *testing.T) {
		if got := workertest.Post(t, base+"/v1/ingest/eventbridge", []byte(`{"id": "x",`), nil); got != http.StatusBadRequest {
			t.Fatalf("bad body: %d", got)
		}
		var out string
		workertest.Eventually(t, func() string {
			code, o, errOut := over("k-reader", "events", "dlq", "-o", "json")
			if out = o; code != 0 || !strings.Contains(out, `"stage":"ingest"`) {
				return fmt.Sprintf("events dlq: exit %d\n%s%s", code, out, errOut)
			}
			return ""
		})
		if !strings.Contains(out, `"payloadOmitted":"the payload is provider evidence`) || strings.Contains(out, `"payload":`) {
			t.Errorf("read key: the payload is shown:\n%s", out)
		}
		if _, out, _ := over("k-admin", "events", "dlq", "-o", "json"); !strings.Contains(out, `"payload":"{\"id\": \"x\","`) {
			t.Errorf("admin key: no payload:\n%s", out)
		}
		code, _, errOut := over("k-admin", "events", "dlq", "--unredacted")
		if code != 1 || !strings.Contains(errOut, "--unredacted applies to the streams read from NATS") {
			t.Errorf("--unredacted over HTTP: exit %d %s", code, errOut)
		}
		// --follow prints the dead letters that arrive while it runs.
		done := make(chan string, 1)
		go func() {
			_, out, _ := runCLIFor(t, 3*time.Second, "events", "dlq", "--follow", "--stage", "ingest", "--server", base, "--api-key", "k-reader")
			done <- out
		}()
		time.Sleep(time.Second)
		workertest.Post(t, base+"/v1/ingest/eventbridge", []byte(`{"id": "y",`), nil)
		if out := <-done; strings.Count(out, "invalid: body is not valid JSON") != 2 {
			t.Errorf("events dlq --follow:\n%s", out)
		}
	})
	t.Run("Audit", func(t *testing.T) {
		code, out, errOut := over("k-reader", "audit", "--tenant", "acme-1")
		if code != 0 || !strings.Contains(out, "acme-1: 1 events: 1 changed the view") {
			t.Errorf("audit: exit %d\n%s%s", code, out, errOut)
		}
		code, _, errOut = over("k-reader", "audit", "--tenant", "acme-1", "--raw")
		if code != 1 || !strings.Contains(errOut, "HTTP 403") {
			t.Errorf("audit --raw with a read key: exit %d %s", code, errOut)
		}
		code, out, errOut = over("k-portal", "audit", "--tenant", "acme-1", "--raw")
		if code != 0 || strings.Contains(out, "hunter2") || !strings.Contains(out, "[redacted]") {
			t.Errorf("audit --raw with read:raw: exit %d\n%s%s", code, out, errOut)
		}
		code, out, _ = over("k-admin", "audit", "--tenant", "acme-1", "--raw", "-o", "yaml")
		if code != 0 || !strings.Contains(out, "hunter2") || !strings.HasPrefix(out, "---\nseq: ") {
			t.Errorf("audit --raw -o yaml with admin: exit %d\n%s", code, out)
		}
	})
	t.Run("ServerFromEnvironment", func(t *testing.T) {
		t.Setenv("SUBSTATE_SERVER", base)
		t.Setenv("SUBSTATE_API_KEY", "k-reader")
		code, out, errOut := runCLI(t, "events", "tail", "--from-start", "--count", "1", "--data-dir", t.TempDir())
		if code != 0 || !strings.Contains(out, "acme-1") {
			t.Errorf("SUBSTATE_SERVER: exit %d\n%s%s", code, out, errOut)
		}
	})
}
