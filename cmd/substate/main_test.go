package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/testkit/contracttest"
	"github.com/substatehq/substate/testkit/workertest"
)

// TestMain lets a test run this binary's main in a subprocess (to kill it
// with a real signal) by re-executing the test binary with
// SUBSTATE_TEST_MAIN=1 and the command's arguments after "--".
func TestMain(m *testing.M) {
	if os.Getenv("SUBSTATE_TEST_NATS") == "1" {
		runNATSNode()
		return
	}
	if os.Getenv("SUBSTATE_TEST_MAIN") == "1" {
		for i, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{"substate"}, os.Args[i+1:]...)
				break
			}
		}
		main()
		return
	}
	contracttest.Main(m) // every response from a worker must match contract/openapi.json
}

// syncBuffer holds a command's output while the test reads it.
type syncBuffer = termtext.SyncBuffer

// runCLI runs one command in process and returns its exit code and output.
func runCLI(tb testing.TB, args ...string) (int, string, string) {
	tb.Helper()
	return runCLIFor(tb, 30*time.Second, args...)
}

// runCLIFor runs one command in process for at most d.
func runCLIFor(tb testing.TB, d time.Duration, args ...string) (int, string, string) {
	tb.Helper()
	var out, errOut syncBuffer
	m := &Main{Stdout: &out, Stderr: &errOut}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	code := m.Run(ctx, args)
	return code, out.String(), errOut.String()
}

// TestRunEndToEnd is the README's story as a new user runs it: "substate
// run", the failed example posted, "tenants get" shows it failed; the late
// RUNNING event changes nothing; "tenants list" filters, "events tail"
// shows the event, an unknown tenant is exit 1 with the HTTP status. What
// the worker does inside: TestWorkerEndToEnd in worker/e2e.
func TestRunEndToEnd(t *testing.T) {
	p := startWorkerProcess(t, t.TempDir())
	url := p.httpURL
	if code := workertest.PostFile(t, url+"/v1/ingest/eventbridge", workertest.ExamplePath(t, "stepfunctions-failed.json"), nil); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	workertest.Eventually(t, func() string {
		code, out, errOut := runCLI(t, "tenants", "get", "acme", "--server", url, "--json")
		if code != 0 || !strings.Contains(out, `"workflowSubState": "failed"`) {
			return fmt.Sprintf("tenants get: %d %s %s", code, out, errOut)
		}
		return ""
	})
	// The README's late RUNNING event: older than FAILED, so the tenant stays failed.
	if code := workertest.PostFile(t, url+"/v1/ingest/eventbridge", workertest.ExamplePath(t, "stepfunctions-running.json"), nil); code != http.StatusAccepted {
		t.Fatalf("ingest running: %d", code)
	}
	workertest.Eventually(t, func() string {
		if _, metrics := workertest.Get(t, url+"/metrics"); !strings.Contains(metrics, "substate_view_stale_total 1\n") {
			return "the late event is not counted stale yet"
		}
		return ""
	})
	code, out, _ := runCLI(t, "tenants", "list", "--server", url, "--has-error")
	if code != 0 || !strings.Contains(out, "acme") || !strings.Contains(out, "payment provider returned HTTP 503") {
		t.Fatalf("tenants list --has-error: %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "tenants", "list", "--server", url, "--sub-state", "running")
	if code != 0 || strings.Contains(out, "acme") {
		t.Fatalf("tenants list --sub-state running: %d\n%s", code, out)
	}
	code, out, errOut := runCLI(t, append([]string{"events", "tail", "--from-start", "--count", "1"}, p.natsArgs()...)...)
	if code != 0 || !strings.Contains(out, "acme") || !strings.Contains(out, "failed") {
		t.Fatalf("events tail: %d\n%s\n%s", code, out, errOut)
	}
	code, _, errOut = runCLI(t, "tenants", "get", "nobody", "--server", url)
	if code != 1 || !strings.Contains(errOut, "HTTP 404") {
		t.Fatalf("tenants get unknown: %d %s", code, errOut)
	}
}

func TestRunRefusesExposedIngestWithoutCredentials(t *testing.T) {
	code, _, errOut := runBinary(t, "run", "--data-dir", t.TempDir(), "--http-addr", "0.0.0.0:0", "--nats-listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "--ingest-api-key") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// Every flag of "substate run" reads SUBSTATE_<FLAG>: the ingest key and
// the read-API keys (lines separated by ';') from the environment protect
// a running worker.
func TestRunReadsEnvironment(t *testing.T) {
	t.Setenv("SUBSTATE_INGEST_API_KEY", "from-env")
	t.Setenv("SUBSTATE_API_KEYS", "r read * sha256:"+workertest.KeyHash("k")+"; other admin * sha256:"+workertest.KeyHash("o"))
	p := startWorkerProcess(t, t.TempDir())
	url := p.httpURL + "/v1/ingest/eventbridge"
	example := workertest.ExamplePath(t, "stepfunctions-failed.json")
	if code := workertest.PostFile(t, url, example, nil); code != http.StatusUnauthorized {
		t.Fatalf("without the key: %d, want 401", code)
	}
	if code := workertest.PostFile(t, url, example, map[string]string{"X-Api-Key": "from-env"}); code != http.StatusAccepted {
		t.Fatalf("with the key from SUBSTATE_INGEST_API_KEY: %d, want 202", code)
	}
	if code, _, _ := workertest.APIGet(t, p.httpURL+"/v1/tenants", ""); code != http.StatusUnauthorized {
		t.Errorf("keys from SUBSTATE_API_KEYS: no key %d, want 401", code)
	}
	if code, _, _ := workertest.APIGet(t, p.httpURL+"/v1/tenants", "o"); code != http.StatusOK {
		t.Errorf("keys from SUBSTATE_API_KEYS: second key %d, want 200", code)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"tenants", "list", "--help"}, {"events", "tail", "--help"}, {"events", "dlq", "--help"}} {
		code, out, _ := runCLI(t, args...)
		if code != 0 || !strings.Contains(out, "Usage: substate") {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
	}
	// A stop's cause reaches the view on every provider, Restate included:
	// the help says so and no longer that Restate's stop takes no reason.
	code, out, _ := runCLI(t, "executions", "stop", "--help")
	text := strings.Join(strings.Fields(out), " ") // the help is wrapped to the terminal
	for _, want := range []string{`becomes the view's error as "Stopped: <reason>" on every provider`, "3 when the provider accepted the stop but it has not taken effect yet"} {
		if code != 0 || !strings.Contains(text, want) {
			t.Errorf("executions stop --help: exit %d, lacks %q\n%s", code, want, out)
		}
	}
	for _, stale := range []string{"not on Restate", "take no reason", "would be accepted"} {
		if strings.Contains(text, stale) {
			t.Errorf("executions stop --help still says %q\n%s", stale, out)
		}
	}
}
