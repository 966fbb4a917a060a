package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/testkit/bustest"

	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/testkit/contracttest"
	"github.com/substatehq/substate/worker"
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

// testWorker is a worker run by "substate run" in process.
type testWorker struct {
	*worker.Worker
	cancel context.CancelFunc
	done   chan int
}

// startWorker runs "substate run" on a fresh data dir with random ports
// until the test ends.
func startWorker(tb testing.TB, dataDir string, extra ...string) *testWorker {
	tb.Helper()
	ready := make(chan *worker.Worker, 1)
	var stderr syncBuffer
	m := &Main{Stdout: &stderr, Stderr: &stderr, Ready: func(w *worker.Worker) { ready <- w }}
	ctx, cancel := context.WithCancel(context.Background())
	args := append([]string{"run", "--data-dir", dataDir, "--http-addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--log-level", "warn"}, extra...)
	tw := &testWorker{cancel: cancel, done: make(chan int, 1)}
	go func() { tw.done <- m.Run(ctx, args) }()
	select {
	case tw.Worker = <-ready:
	case code := <-tw.done:
		tb.Fatalf("substate run exited with %d: %s", code, stderr.String())
	case <-time.After(30 * time.Second):
		tb.Fatal("substate run did not start")
	}
	tb.Cleanup(func() { tw.stop(tb) })
	return tw
}

// stop cancels the worker as SIGTERM does and waits for it.
func (tw *testWorker) stop(tb testing.TB) {
	tw.cancel()
	select {
	case code := <-tw.done:
		if code != 0 {
			tb.Errorf("substate run exited with %d", code)
		}
		tw.done <- code
	case <-time.After(30 * time.Second):
		tb.Error("substate run did not stop")
	}
}

func postFile(tb testing.TB, url, path string, header map[string]string) int {
	tb.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return postBytes(tb, url, body, header)
}

func postBytes(tb testing.TB, url string, body []byte, header map[string]string) int {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// eventually runs fn until it returns "" or ten seconds pass.
func eventually(tb testing.TB, fn func() string) {
	tb.Helper()
	eventuallyWithin(tb, 10*time.Second, fn)
}

// eventuallyWithin runs fn until it returns "" or limit passes.
func eventuallyWithin(tb testing.TB, limit time.Duration, fn func() string) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for {
		msg := fn()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatal(msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func examplePath(name string) string { return filepath.Join("..", "..", "examples", name) }

func freePort(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestRunEndToEnd(t *testing.T) {
	w := startWorker(t, t.TempDir())
	url := w.HTTP.URL()
	if code := postFile(t, url+"/v1/ingest/eventbridge", examplePath("stepfunctions-failed.json"), nil); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	eventually(t, func() string {
		code, out, errOut := runCLI(t, "tenants", "get", "acme", "--server", url, "--json")
		if code != 0 || !strings.Contains(out, `"workflowSubState": "failed"`) {
			return fmt.Sprintf("tenants get: %d %s %s", code, out, errOut)
		}
		return ""
	})
	// The README's late RUNNING event: older than FAILED, so the tenant stays failed.
	if code := postFile(t, url+"/v1/ingest/eventbridge", examplePath("stepfunctions-running.json"), nil); code != http.StatusAccepted {
		t.Fatalf("ingest running: %d", code)
	}
	eventually(t, func() string {
		if n := w.Metrics.Stale; testutil.ToFloat64(n) != 1 {
			return fmt.Sprintf("stale events: %v, want 1", testutil.ToFloat64(n))
		}
		return ""
	})
	// One change, one stale event, one write transaction: the projector's
	// metrics say so on /metrics (the lag gauges once first measured).
	eventually(t, func() string {
		metrics := getBody(t, url+"/metrics")
		for _, want := range []string{
			"substate_view_applied_total 1\n", "substate_view_unchanged_total 0\n", "substate_view_stale_total 1\n",
			"substate_view_commits_total 1\n", `substate_batch_size_count{stage="project"} `,
			`substate_consumer_lag{consumer="substate-projector"} `, `substate_consumer_lag{consumer="substate-normalizer"} `,
		} {
			if !strings.Contains(metrics, want) {
				return "/metrics lacks " + want
			}
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
	code, out, errOut := runCLI(t, "events", "tail", "--from-start", "--count", "1", "--nats-url", w.Bus.ClientURL(), "--nats-nkey", bustest.Seed(t, w.Bus, bus.Worker))
	if code != 0 || !strings.Contains(out, "acme") || !strings.Contains(out, "failed") {
		t.Fatalf("events tail: %d\n%s\n%s", code, out, errOut)
	}
	code, _, errOut = runCLI(t, "tenants", "get", "nobody", "--server", url)
	if code != 1 || !strings.Contains(errOut, "HTTP 404") {
		t.Fatalf("tenants get unknown: %d %s", code, errOut)
	}
}

func TestRunRefusesExposedIngestWithoutCredentials(t *testing.T) {
	code, _, errOut := runCLI(t, "run", "--data-dir", t.TempDir(), "--http-addr", "0.0.0.0:0", "--nats-listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "--ingest-api-key") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func TestRunReadsEnvironment(t *testing.T) {
	t.Setenv("SUBSTATE_INGEST_API_KEY", "from-env")
	w := startWorker(t, t.TempDir())
	url := w.HTTP.URL() + "/v1/ingest/eventbridge"
	if code := postFile(t, url, examplePath("stepfunctions-failed.json"), nil); code != http.StatusUnauthorized {
		t.Fatalf("without the key: %d, want 401", code)
	}
	if code := postFile(t, url, examplePath("stepfunctions-failed.json"), map[string]string{"X-Api-Key": "from-env"}); code != http.StatusAccepted {
		t.Fatalf("with the key from SUBSTATE_INGEST_API_KEY: %d, want 202", code)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"tenants", "list", "--help"}, {"events", "tail", "--help"}, {"events", "dlq", "--help"}} {
		code, out, _ := runCLI(t, args...)
		if code != 0 || !strings.Contains(out, "Usage: substate") {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
	}
}
